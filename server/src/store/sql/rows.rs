//! Reading stored rows into the store's types, and the column lists those readers expect.

use ultraplan_protocol::api::PlanStatus;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::session::SessionStatus;

use super::super::backend::{Record, Row};
use super::super::{AgentState, PlanRow, SessionRow, StoreError, StoreResult, format_ms};

/// Columns of `sessions`, in the order [`session`] reads them.
macro_rules! session_cols {
    () => {
        "id, user_id, title, bundle_id, status, context, usage, last_event_id, plan_revisions, \
         created_at, updated_at, last_activity_at, archived_at, agent_state, activity, execution, \
         lease_runner, requeued_at, (SELECT COUNT(*) FROM plans p WHERE p.session_id = sessions.id \
          AND p.status = 'pending') AS pending_plans"
    };
}

/// Columns of `plans`, in the order [`plan`] reads them.
macro_rules! plan_cols {
    () => {
        "session_id, tool_use_id, revision, plan, status, decision, event_id, decision_event_id, \
         created_at, decided_at, addressed_comment_ids"
    };
}

pub(super) use {plan_cols, session_cols};

fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Corrupt(format!("{what} {value}"))
}

fn json<T: serde::de::DeserializeOwned>(row: &dyn Record, col: &str) -> StoreResult<T> {
    Ok(serde_json::from_str(&row.text(col)?)?)
}

/// A row of [`session_cols`].
pub fn session(row: &Row) -> StoreResult<SessionRow> {
    let status = row.text("status")?;
    let agent_state = row.text("agent_state")?;
    Ok(SessionRow {
        id: row.text("id")?,
        user_id: row.text("user_id")?,
        title: row.text("title")?,
        bundle_id: row.opt_text("bundle_id")?,
        status: SessionStatus::parse(&status).ok_or_else(|| corrupt("session status", &status))?,
        context: json(row.as_ref(), "context")?,
        usage: json(row.as_ref(), "usage")?,
        last_event_id: row.int("last_event_id")?,
        plan_revisions: u32::try_from(row.int("plan_revisions")?).unwrap_or(u32::MAX),
        created_at: row.int("created_at")?,
        updated_at: row.int("updated_at")?,
        last_activity_at: row.int("last_activity_at")?,
        archived_at: row.opt_int("archived_at")?,
        has_pending_plan: row.int("pending_plans")? > 0,
        activity: json(row.as_ref(), "activity")?,
        execution: row
            .opt_text("execution")?
            .map(|e| serde_json::from_str(&e))
            .transpose()?,
        agent_state: AgentState::parse(&agent_state)
            .ok_or_else(|| corrupt("agent state", &agent_state))?,
        runner: row.opt_text("lease_runner")?,
        requeued_at: row.opt_int("requeued_at")?,
    })
}

/// Rows of [`session_cols`].
pub fn sessions(rows: &[Row]) -> StoreResult<Vec<SessionRow>> {
    rows.iter().map(session).collect()
}

/// A row of [`plan_cols`].
pub fn plan(row: &Row) -> StoreResult<PlanRow> {
    let status = row.text("status")?;
    Ok(PlanRow {
        session_id: row.text("session_id")?,
        tool_use_id: row.text("tool_use_id")?,
        revision: u32::try_from(row.int("revision")?).unwrap_or(u32::MAX),
        plan: row.text("plan")?,
        status: PlanStatus::parse(&status).ok_or_else(|| corrupt("plan status", &status))?,
        decision: row
            .opt_text("decision")?
            .map(|d| serde_json::from_str(&d))
            .transpose()?,
        event_id: row.int("event_id")?,
        decision_event_id: row.opt_int("decision_event_id")?,
        created_at: row.int("created_at")?,
        decided_at: row.opt_int("decided_at")?,
        addressed_comment_ids: row
            .opt_text("addressed_comment_ids")?
            .map(|ids| serde_json::from_str(&ids))
            .transpose()?,
    })
}

/// A row of `id, body, created_at` from `events`.
pub fn event(session_id: &str, row: &Row) -> StoreResult<Event> {
    Ok(Event {
        id: row.int("id")?,
        session_id: session_id.to_owned(),
        created_at: format_ms(row.int("created_at")?),
        body: json::<EventBody>(row.as_ref(), "body")?,
    })
}
