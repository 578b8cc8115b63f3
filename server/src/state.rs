//! Shared application state handed to every handler.

use std::sync::Arc;

use crate::config::Config;
use crate::hub::EventHub;
use crate::store::Store;
use crate::telemetry::Counters;

/// Cheap to clone: everything is behind `Arc`.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub hub: Arc<EventHub>,
    pub counters: Arc<Counters>,
}

impl AppState {
    /// State over an opened store.
    pub fn new(config: Config, store: Arc<dyn Store>) -> Self {
        AppState {
            config: Arc::new(config),
            store,
            hub: Arc::new(EventHub::default()),
            counters: Arc::new(Counters::default()),
        }
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
