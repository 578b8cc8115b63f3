//! Session logic shared by the API and the pages: resources, appends that wake pollers and
//! count telemetry, and plan decisions.

mod decide;
pub mod lifecycle;
mod validate;

pub use decide::{DecisionOutcome, decide};
pub use validate::{validate_client_events, validate_create};

use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::session::{SessionKind, SessionResource};
use ultraplan_protocol::{constants::EXIT_PLAN_MODE_TOOL, derive_phase};

use crate::state::AppState;
use crate::store::{SessionRow, StoreResult, format_ms};
use crate::telemetry::names;

/// The API resource of a stored session.
pub fn resource(state: &AppState, row: &SessionRow) -> SessionResource {
    let live = state
        .orchestrator
        .as_ref()
        .is_some_and(|o| o.is_live(&row.id));
    let mut activity = row.activity.clone();
    if !live {
        activity.stop_unfinished();
    }
    SessionResource {
        kind: SessionKind::Session,
        id: row.id.clone(),
        title: row.title.clone(),
        session_status: row.status,
        phase: derive_phase(row.status, row.has_pending_plan, false),
        url: format!(
            "{}/sessions/{}",
            state.config.public_url.trim_end_matches('/'),
            row.id
        ),
        created_at: format_ms(row.created_at),
        updated_at: format_ms(row.updated_at),
        session_context: row.context.clone(),
        usage: row.usage,
        bundle_id: row.bundle_id.clone(),
        last_event_id: row.last_event_id,
        plan_revisions: row.plan_revisions,
        stalled: state
            .orchestrator
            .as_ref()
            .is_some_and(|o| o.stalled(&row.id)),
        agents: activity.counts(),
        tool_calls: activity.tool_calls,
        execution: row.execution.clone(),
    }
}

/// Events with `id > after`, all of them, oldest first.
pub async fn events_after(
    state: &AppState,
    session_id: &str,
    after: i64,
) -> StoreResult<Vec<Event>> {
    let mut all = Vec::new();
    let mut cursor = after;
    loop {
        let (page, more) = state.store.list_events(session_id, cursor, 100).await?;
        cursor = page.last().map_or(cursor, |e| e.id);
        all.extend(page);
        if !more {
            return Ok(all);
        }
    }
}

/// Append events to a session's log, wake its pollers and count telemetry.
pub async fn append(
    state: &AppState,
    session: &SessionRow,
    events: &[EventBody],
) -> StoreResult<Vec<Event>> {
    let stored = state.store.append_events(&session.id, events).await?;
    after_append(state, session, &stored).await;
    Ok(stored)
}

/// Hand events that are already in the log to the session's agent.
pub fn deliver(state: &AppState, session_id: &str, events: &[Event]) {
    if let Some(orchestrator) = &state.orchestrator {
        for event in events {
            orchestrator.deliver(session_id, event.body.clone());
        }
    }
}

/// Side effects of stored events: wake pollers, count telemetry.
pub async fn after_append(state: &AppState, session: &SessionRow, stored: &[Event]) {
    let Some(last) = stored.last() else {
        return;
    };
    state.hub.notify(&session.id, last.id);
    for event in stored {
        if let Some(name) = telemetry_for(&event.body) {
            let (name, labels) = name;
            let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            state
                .telemetry(name, &labels, Some(&session.user_id), Some(&session.id))
                .await;
        }
    }
}

fn telemetry_for(body: &EventBody) -> Option<(&'static str, Vec<(&'static str, String)>)> {
    match body {
        EventBody::Assistant(a) if a.parent_tool_use_id.is_none() => {
            let waits = a.message.content.iter().any(|b| {
                matches!(b, ContentBlock::ToolUse { name, .. }
                    if name == EXIT_PLAN_MODE_TOOL
                        || name == ultraplan_protocol::constants::ASK_USER_QUESTION_TOOL)
            });
            waits.then(|| (names::AWAITING_INPUT, Vec::new()))
        }
        EventBody::Result(r) if r.is_terminal() => {
            Some((names::FAILED, vec![("reason", r.subtype.clone())]))
        }
        _ => None,
    }
}
