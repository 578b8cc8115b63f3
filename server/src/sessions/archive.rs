//! Archiving (stopping) a session: its agent stops first, then a note goes into the log and the
//! session is marked archived. The API's archive and the review page's stop are this one path.

use ultraplan_protocol::events::{EventBody, SystemEvent};
use ultraplan_protocol::session::SessionStatus;

use super::{SessionError, SessionResult};
use crate::core::Core;
use crate::orchestrator::Agents;
use crate::store::SessionRow;

/// Stop the session's agent and archive it, leaving `note` in its log. `AlreadyArchived` when
/// it already was, or another request archived it meanwhile. Returns the archived row.
pub async fn archive(
    core: &Core,
    agents: &Agents,
    session: &SessionRow,
    note: String,
) -> SessionResult<SessionRow> {
    if session.status == SessionStatus::Archived {
        return Err(SessionError::AlreadyArchived);
    }
    agents.stop(&session.id).await;
    let row = fresh(core, &session.id).await?;
    if row.status == SessionStatus::Archived {
        return Err(SessionError::AlreadyArchived);
    }
    let note = EventBody::System(SystemEvent {
        subtype: "archived".to_owned(),
        message: Some(note),
        data: serde_json::Value::Null,
    });
    let appended = core.append(&row, &[note]).await?;
    let last_event_id = appended.last().map_or(row.last_event_id, |e| e.id);
    if !core.store.archive_session(&row.id).await? {
        return Err(SessionError::AlreadyArchived);
    }
    // Wake what follows the session here (a linked runner's inbox sees the archive and stops
    // its agent); other processes hear of it from the database's announcement.
    core.hub.notify(&row.id, last_event_id);
    core.hub.forget(&row.id);
    fresh(core, &row.id).await
}

async fn fresh(core: &Core, id: &str) -> SessionResult<SessionRow> {
    core.store
        .session(id)
        .await?
        .ok_or(SessionError::NotFound("session"))
}
