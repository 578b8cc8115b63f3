//! The claim's two ends for a session task: picking a session up again from its log, and
//! giving it back.

use ultraplan_protocol::SessionStatus;

use super::SessionTask;
use crate::store::{AgentState, now_ms};

impl SessionTask {
    /// Whether the claimed session needs an agent. `false` when its execution had already
    /// finished (the missing report of its patch is appended): a queue entry that raced the
    /// runner which executed it must not start a fresh agent on a finished session. A session
    /// an agent ran for before says in its log that it resumes.
    pub(super) async fn pick_up(&mut self, resumed: bool, took_over: bool) -> bool {
        let state = &self.inner.state;
        match crate::execution::settle_finished(state, &self.session).await {
            Ok(true) => {
                tracing::info!(session_id = %self.session.id, resumed, "claimed a session whose execution had finished: no agent starts");
                let store = &state.store;
                let _ = store.set_status_as(&self.lease, SessionStatus::Idle).await;
                self.set_agent_state(AgentState::Finished).await;
                return false;
            }
            Ok(false) => {}
            Err(error) => {
                tracing::error!(session_id = %self.session.id, %error, "cannot tell whether the execution finished");
            }
        }
        if !resumed {
            return true;
        }
        let message = if took_over {
            format!(
                "The runner that held this session stopped answering; the agent resumes from \
                 the event log on {}.",
                self.lease.runner
            )
        } else {
            format!(
                "The runner that held this session stopped (a restart or a shutdown); the \
                 agent resumes from the event log on {}.",
                self.lease.runner
            )
        };
        self.append_note("resumed", message).await;
        true
    }

    /// Park the session: its agent waits on a person, so it gives its sandbox up until a
    /// decision or message queues the session again. Only when nothing arrived that the agent
    /// has not seen; `true` when parked (the agent is then stopped).
    pub(super) async fn park(&mut self) -> bool {
        let store = &self.inner.state.store;
        let head = match store.session(&self.session.id).await {
            Ok(Some(row)) => row.last_event_id,
            _ => return false,
        };
        match store.park_session(&self.lease, head).await {
            Ok(true) => {}
            Ok(false) => return false,
            Err(error) => {
                tracing::warn!(session_id = %self.session.id, %error, "cannot park the session");
                return false;
            }
        }
        tracing::info!(session_id = %self.session.id, "parked: the agent waits on a person and gives its sandbox up");
        self.inner.state.counters.inc("sessions_parked", &[]);
        self.parked = true;
        self.kill();
        true
    }

    /// Give the claim up; `requeue` puts the session back in the queue for any runner.
    /// Put the released session back in the queue (any runner of the database may take it).
    pub(super) async fn queue_after_release(&self) {
        let state = &self.inner.state;
        match state.store.queue_session(&self.session.id, now_ms()).await {
            Ok(true) => {
                tracing::info!(session_id = %self.session.id, "a plan was approved as its agent ended: queueing its execution");
                state.bell.ring();
            }
            Ok(false) => {}
            Err(error) => {
                tracing::error!(session_id = %self.session.id, %error, "cannot queue the approved plan's execution");
            }
        }
    }

    pub(super) async fn release(&self, requeue: bool) {
        let store = &self.inner.state.store;
        match store.release_lease(&self.lease, requeue).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(session_id = %self.session.id, epoch = self.lease.epoch, "the lease was gone before it was released");
            }
            Err(error) => {
                tracing::error!(session_id = %self.session.id, %error, "cannot release the lease; it lapses on its own");
            }
        }
    }
}
