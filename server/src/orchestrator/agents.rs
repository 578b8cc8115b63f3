//! The handle the session use cases and the HTTP layer hold: this process's runner when agents
//! run here, the runners of other processes on the same database, or the reason no agent can
//! run. Every question about agents goes through here, so "no runner" is one variant, not a
//! scattering of `Option` checks.

use std::sync::Arc;

use super::Orchestrator;
use crate::core::Core;
use crate::store::{StoreResult, now_ms};

/// Agents for this server's sessions.
#[derive(Clone)]
pub enum Agents {
    /// This process runs agents (and so may others on the same database).
    Ready(Orchestrator),
    /// Only other processes on the same database run agents (`--no-local-runner`): sessions
    /// are queued for them.
    Elsewhere(Core),
    /// No agent can run: sessions can be created and read, and the reason is given.
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
            Agents::Elsewhere(_) | Agents::Unavailable(_) => None,
        }
    }

    /// Why no agent can run, when none can.
    pub fn problem(&self) -> Option<&str> {
        match self {
            Agents::Ready(_) | Agents::Elsewhere(_) => None,
            Agents::Unavailable(reason) => Some(reason),
        }
    }

    /// Whether the session's agent (run here) has been silent past the stall threshold.
    pub fn stalled(&self, session_id: &str) -> bool {
        self.orchestrator().is_some_and(|o| o.stalled(session_id))
    }

    /// Whether approved plans are executed: by this process's runner, or by the fleet's.
    pub fn executes(&self) -> bool {
        match self {
            Agents::Ready(orchestrator) => orchestrator.executes(),
            Agents::Elsewhere(_) => true,
            Agents::Unavailable(_) => false,
        }
    }

    /// Stop the session's agent if it runs here and wait until it is gone; a runner elsewhere
    /// sees the archive through the session's inbox.
    pub async fn stop(&self, session_id: &str) {
        if let Some(orchestrator) = self.orchestrator() {
            orchestrator.stop(session_id).await;
        }
    }

    /// Queue the session if it was parked (a decision or message arrived for it).
    pub async fn unpark(&self, session_id: &str) -> StoreResult<()> {
        match self {
            Agents::Ready(orchestrator) => {
                orchestrator.unpark(session_id).await?;
            }
            Agents::Elsewhere(core) => {
                core.store.unpark_session(session_id, now_ms()).await?;
                core.bell.ring();
            }
            Agents::Unavailable(_) => {}
        }
        Ok(())
    }

    /// Queue the session for a runner, when any can run it.
    pub async fn queue(&self, session_id: &str) -> StoreResult<()> {
        match self {
            Agents::Ready(orchestrator) => {
                orchestrator.queue(session_id).await?;
            }
            Agents::Elsewhere(core) => {
                core.store.queue_session(session_id, now_ms()).await?;
                core.bell.ring();
            }
            Agents::Unavailable(_) => {}
        }
        Ok(())
    }
}
