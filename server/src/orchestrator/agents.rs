//! The handle the session use cases and the HTTP layer hold: the orchestrator when agents can
//! run on this server, else the reason they cannot. Every question about live agents goes
//! through here, so "no runner" is one variant, not a scattering of `Option` checks.

use std::sync::Arc;

use ultraplan_protocol::events::Event;

use super::{Launch, Orchestrator};
use crate::store::SessionRow;

/// Agents on this server: running through an orchestrator, or unavailable and why.
#[derive(Clone)]
pub enum Agents {
    Ready(Orchestrator),
    Unavailable(Arc<str>),
}

impl Agents {
    /// No runner: sessions can be created and read, but no agent runs them.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Agents::Unavailable(Arc::from(reason.into()))
    }

    /// The orchestrator, when agents run here.
    pub fn orchestrator(&self) -> Option<&Orchestrator> {
        match self {
            Agents::Ready(orchestrator) => Some(orchestrator),
            Agents::Unavailable(_) => None,
        }
    }

    /// Why no agent can run, when none can.
    pub fn problem(&self) -> Option<&str> {
        match self {
            Agents::Ready(_) => None,
            Agents::Unavailable(reason) => Some(reason),
        }
    }

    /// Whether an agent task exists for the session.
    pub fn is_live(&self, session_id: &str) -> bool {
        self.orchestrator().is_some_and(|o| o.is_live(session_id))
    }

    /// Whether the session's agent has been silent past the stall threshold.
    pub fn stalled(&self, session_id: &str) -> bool {
        self.orchestrator().is_some_and(|o| o.stalled(session_id))
    }

    /// Whether approved plans are executed here.
    pub fn executes(&self) -> bool {
        self.orchestrator().is_some_and(Orchestrator::executes)
    }

    /// Hand events that are already in the log to the session's agent, if one runs.
    pub fn deliver(&self, session_id: &str, events: &[Event]) {
        if let Some(orchestrator) = self.orchestrator() {
            for event in events {
                orchestrator.deliver(session_id, event.body.clone());
            }
        }
    }

    /// Stop the session's agent and wait until it is gone; nothing when none runs.
    pub async fn stop(&self, session_id: &str) {
        if let Some(orchestrator) = self.orchestrator() {
            orchestrator.stop(session_id).await;
        }
    }

    /// Start the session's agent in the background, when agents run here.
    pub fn launch(&self, session: SessionRow, launch: Launch) {
        if let Some(orchestrator) = self.orchestrator() {
            orchestrator.launch(session, launch);
        }
    }

    /// Start the session's agent unless one already runs; `true` when one started.
    pub fn launch_if_idle(&self, session: SessionRow, launch: Launch) -> bool {
        self.orchestrator()
            .is_some_and(|o| o.launch_if_idle(session, launch))
    }
}
