//! A running session's inbox: what users write to its log (messages, decisions), from any
//! server process, handed to its agent; and its archiving, which stops the agent.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use ultraplan_protocol::SessionStatus;

use super::Command;
use crate::core::Core;

/// Follow the session's log from `after` (the last event the agent was given) until the task
/// stops listening. Wakes on the session's appends, local or announced by other processes.
pub(super) fn follow(
    state: Core,
    session_id: String,
    after: i64,
    to_task: mpsc::UnboundedSender<Command>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut appended = state.hub.subscribe(&session_id);
        let mut cursor = after;
        let mut closed = false;
        loop {
            match state.store.user_events_after(&session_id, cursor).await {
                Ok(events) => {
                    for event in events {
                        cursor = event.id;
                        if to_task
                            .send(Command::Deliver(Box::new(event.body)))
                            .is_err()
                        {
                            return;
                        }
                    }
                }
                Err(error) => tracing::warn!(session_id, %error, "cannot read the session's inbox"),
            }
            if let Ok(Some(row)) = state.store.session(&session_id).await
                && row.status == SessionStatus::Archived
            {
                let _ = to_task.send(Command::Stop);
                return;
            }
            if closed {
                return;
            }
            // Every append and the archive wake this (here, or announced by another process).
            closed = appended.changed().await.is_err();
        }
    })
}
