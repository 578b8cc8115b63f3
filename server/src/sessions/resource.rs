//! The API resource of a stored session.

use ultraplan_protocol::derive_phase;
use ultraplan_protocol::session::{SessionKind, SessionResource};

use crate::core::Core;
use crate::orchestrator::Agents;
use crate::store::{AgentState, SessionRow, format_ms};

/// The API resource of a stored session, with what the live agent adds (stalled, activity).
pub fn resource(core: &Core, agents: &Agents, row: &SessionRow) -> SessionResource {
    let mut activity = row.activity.clone();
    if row.runner.is_none() {
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
            core.config.public_url.trim_end_matches('/'),
            row.id
        ),
        created_at: format_ms(row.created_at),
        updated_at: format_ms(row.updated_at),
        session_context: row.context.clone(),
        usage: row.usage,
        bundle_id: row.bundle_id.clone(),
        last_event_id: row.last_event_id,
        plan_revisions: row.plan_revisions,
        stalled: agents.stalled(&row.id),
        agents: activity.counts(),
        tool_calls: activity.tool_calls,
        execution: row.execution.clone(),
        runner: row.runner.clone(),
        requeued_at: row.requeued_at.map(format_ms),
        parked: row.agent_state == AgentState::Parked,
    }
}
