//! The handle the session use cases and the HTTP layer hold: the orchestrator when agents can
//! run on this server, else the reason they cannot. Every question about live agents goes
//! through here, so "no runner" is one variant, not a scattering of `Option` checks.

use std::sync::Arc;

use super::Orchestrator;
use crate::store::StoreResult;

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

    /// Whether the session's agent has been silent past the stall threshold.
    pub fn stalled(&self, session_id: &str) -> bool {
        self.orchestrator().is_some_and(|o| o.stalled(session_id))
    }

    /// Whether approved plans are executed here.
    pub fn executes(&self) -> bool {
        self.orchestrator().is_some_and(Orchestrator::executes)
    }

    /// Stop the session's agent and wait until it is gone; nothing when none runs.
    pub async fn stop(&self, session_id: &str) {
        if let Some(orchestrator) = self.orchestrator() {
            orchestrator.stop(session_id).await;
        }
    }

    /// Queue the session if it was parked (a decision or message arrived for it).
    pub async fn unpark(&self, session_id: &str) -> StoreResult<()> {
        if let Some(orchestrator) = self.orchestrator() {
            orchestrator.unpark(session_id).await?;
        }
        Ok(())
    }

    /// Queue the session for a runner, when agents run here.
    pub async fn queue(&self, session_id: &str) -> StoreResult<()> {
        if let Some(orchestrator) = self.orchestrator() {
            orchestrator.queue(session_id).await?;
        }
        Ok(())
    }
}
