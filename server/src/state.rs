//! Shared application state handed to every handler.

use std::sync::Arc;

use crate::config::Config;
use crate::hub::EventHub;
use crate::orchestrator::Orchestrator;
use crate::http::ratelimit::Limiters;
use crate::store::Store;
use crate::telemetry::Counters;

/// Cheap to clone: everything is behind `Arc`.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub hub: Arc<EventHub>,
    pub counters: Arc<Counters>,
    /// Runs agents; `None` when no sandbox runner is available.
    pub orchestrator: Option<Orchestrator>,
    /// Why no agent can run, when `orchestrator` is `None`.
    pub runner_problem: Option<String>,
    /// Request buckets per user and per client address, and upload slots.
    pub rate_limiters: Arc<Limiters>,
}

impl AppState {
    /// State over an opened store.
    pub fn new(config: Config, store: Arc<dyn Store>) -> Self {
        AppState {
            rate_limiters: Arc::new(Limiters::new(
                config.rate_limits,
                config.request_limits.uploads,
            )),
            config: Arc::new(config),
            store,
            hub: Arc::new(EventHub::default()),
            counters: Arc::new(Counters::default()),
            orchestrator: None,
            runner_problem: Some("no sandbox runner is configured".to_owned()),
        }
    }

    /// The same state with an orchestrator running its sessions.
    pub fn with_orchestrator(mut self, orchestrator: Orchestrator) -> Self {
        self.orchestrator = Some(orchestrator);
        self.runner_problem = None;
        self
    }

    /// Record a telemetry event (row + counter).
    pub async fn telemetry(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        user_id: Option<&str>,
        session_id: Option<&str>,
    ) {
        crate::telemetry::record(
            self.store.as_ref(),
            &self.counters,
            name,
            labels,
            user_id,
            session_id,
        )
        .await;
    }
}
