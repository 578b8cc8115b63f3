//! The state every handler gets: the shared [`Core`], the agents, and the request limiters.

use std::sync::Arc;

use crate::config::Config;
use crate::core::Core;
use crate::fleet::Fleet;
use crate::http::ratelimit::Limiters;
use crate::orchestrator::{Agents, Orchestrator};
use crate::store::Store;

/// Cheap to clone: everything is behind `Arc`.
#[derive(Clone)]
pub struct AppState {
    pub core: Core,
    /// Runs agents, or says why none can run.
    pub agents: Agents,
    /// Request buckets per user and per client address, and upload slots.
    pub rate_limiters: Arc<Limiters>,
    /// Keyless runners linked to this process; `None` where none may link.
    pub fleet: Option<Fleet>,
}

impl AppState {
    /// State over an opened store, with no agents until [`AppState::with_orchestrator`].
    pub fn new(config: Config, store: Arc<dyn Store>) -> Self {
        AppState::over(Core::new(config, store))
    }

    /// State over an existing core.
    pub fn over(core: Core) -> Self {
        AppState {
            rate_limiters: Arc::new(Limiters::new(
                core.config.rate_limits,
                core.config.request_limits.uploads,
            )),
            core,
            agents: Agents::unavailable("no sandbox runner is configured"),
            fleet: None,
        }
    }

    /// The same state taking runner links into `fleet`.
    pub fn with_fleet(mut self, fleet: Fleet) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// The same state with an orchestrator running its sessions.
    pub fn with_orchestrator(mut self, orchestrator: Orchestrator) -> Self {
        self.agents = Agents::Ready(orchestrator);
        self
    }

    /// The same state with agents run only by other processes on the same database.
    pub fn with_runners_elsewhere(mut self) -> Self {
        self.agents = Agents::Elsewhere(self.core.clone());
        self
    }

    /// The same state with agents unavailable for `reason`.
    pub fn without_agents(mut self, reason: impl Into<String>) -> Self {
        self.agents = Agents::unavailable(reason);
        self
    }
}
