//! Posting user events (messages, answers to the agent's questions) into a session's log.

use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::session::SessionStatus;

use super::{SessionError, SessionResult, validate_client_events};
use crate::core::Core;
use crate::orchestrator::Agents;
use crate::store::{Author, SessionRow};

/// Validate client events and append them for the session's agent. A plan's
/// tool_result cannot be posted: plans are decided through their decision.
pub async fn post_events(
    core: &Core,
    agents: &Agents,
    session: &SessionRow,
    events: &[EventBody],
) -> SessionResult<Vec<Event>> {
    if session.status == SessionStatus::Archived {
        return Err(SessionError::Archived("the session is archived"));
    }
    validate_client_events(events)?;
    for event in events {
        for (tool_use_id, _, _) in event.tool_results() {
            if core.store.plan(&session.id, tool_use_id).await?.is_some() {
                let id = &session.id;
                return Err(SessionError::invalid(
                    "use_decision_endpoint",
                    format!(
                        "{tool_use_id} is a plan: decide it with POST /v1/sessions/{id}/plans/{tool_use_id}/decision"
                    ),
                ));
            }
        }
    }
    // The runner holding the session follows what users write and hands it to its agent; a
    // parked session is queued for one.
    let stored = core
        .append_with(session, events, Author::User, None)
        .await?;
    agents.unpark(&session.id).await?;
    Ok(stored)
}
