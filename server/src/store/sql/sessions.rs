//! Session rows: creation, reads and the status, agent-state and archive updates.

use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::patch::{Execution, ExecutionState};
use ultraplan_protocol::session::SessionStatus;

use super::super::backend::{Arg::Text, Conn};
use super::super::{AgentState, AppendEffects, NewSession, SessionRow, StoreResult, now_ms};
use super::rows::{self, session_cols};
use super::{bundles, events, map_unique};

/// Create the session and append its first events (inside the caller's write transaction).
pub async fn create(
    c: &mut dyn Conn,
    new: &NewSession,
    first: &[EventBody],
) -> StoreResult<(SessionRow, Vec<Event>)> {
    let now = now_ms();
    if let Some(bundle) = &new.bundle_id {
        bundles::hold(c, &new.user_id, bundle).await?;
    }
    let context = serde_json::to_string(&new.context)?;
    let usage = serde_json::to_string(&ultraplan_protocol::model::Usage::default())?;
    c.execute(
        "INSERT INTO sessions (id, user_id, title, bundle_id, status, context, usage, \
         created_at, updated_at, last_activity_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $8)",
        &[
            Text(&new.id),
            Text(&new.user_id),
            Text(&new.title),
            new.bundle_id.as_deref().into(),
            Text(new.status.as_str()),
            Text(&context),
            Text(&usage),
            now.into(),
        ],
    )
    .await
    .map_err(|e| map_unique(e, "session"))?;
    let stored = events::append(c, &new.id, first, &AppendEffects::default()).await?;
    let sql = concat!("SELECT ", session_cols!(), " FROM sessions WHERE id = $1");
    let row = c.fetch_one(sql, &[Text(&new.id)]).await?;
    Ok((rows::session(&row)?, stored))
}

pub async fn by_id(c: &mut dyn Conn, id: &str) -> StoreResult<Option<SessionRow>> {
    let sql = concat!("SELECT ", session_cols!(), " FROM sessions WHERE id = $1");
    let row = c.fetch_optional(sql, &[Text(id)]).await?;
    row.as_ref().map(rows::session).transpose()
}

pub async fn for_user(
    c: &mut dyn Conn,
    user_id: &str,
    id: &str,
) -> StoreResult<Option<SessionRow>> {
    let sql = concat!(
        "SELECT ",
        session_cols!(),
        " FROM sessions WHERE id = $1 AND user_id = $2"
    );
    let row = c.fetch_optional(sql, &[Text(id), Text(user_id)]).await?;
    row.as_ref().map(rows::session).transpose()
}

pub async fn list(c: &mut dyn Conn, user_id: &str, limit: u32) -> StoreResult<Vec<SessionRow>> {
    let sql = concat!(
        "SELECT ",
        session_cols!(),
        " FROM sessions WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
    );
    let found = c
        .fetch_all(sql, &[Text(user_id), i64::from(limit).into()])
        .await?;
    rows::sessions(&found)
}

pub async fn with_status(
    c: &mut dyn Conn,
    statuses: &[SessionStatus],
) -> StoreResult<Vec<SessionRow>> {
    let sql = concat!(
        "SELECT ",
        session_cols!(),
        " FROM sessions WHERE status = $1"
    );
    let mut out = Vec::new();
    for status in statuses {
        let found = c.fetch_all(sql, &[Text(status.as_str())]).await?;
        out.extend(rows::sessions(&found)?);
    }
    out.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    Ok(out)
}

/// Sessions whose execution is marked executing, oldest first.
pub async fn executing(c: &mut dyn Conn) -> StoreResult<Vec<SessionRow>> {
    let executing = serde_json::to_string(&Execution {
        state: ExecutionState::Executing,
        patch: None,
    })?;
    let sql = concat!(
        "SELECT ",
        session_cols!(),
        " FROM sessions WHERE execution = $1 ORDER BY created_at, id"
    );
    rows::sessions(&c.fetch_all(sql, &[Text(&executing)]).await?)
}

/// Sessions whose agent was queued or running and that are not archived, oldest first.
pub async fn to_recover(c: &mut dyn Conn) -> StoreResult<Vec<SessionRow>> {
    let sql = concat!(
        "SELECT ",
        session_cols!(),
        " FROM sessions WHERE agent_state IN ('queued', 'running') \
         AND status <> 'archived' ORDER BY created_at, id"
    );
    rows::sessions(&c.fetch_all(sql, &[]).await?)
}

/// Set the status unless the session is archived.
pub async fn set_status(
    c: &mut dyn Conn,
    session_id: &str,
    status: SessionStatus,
) -> StoreResult<()> {
    c.execute(
        "UPDATE sessions SET status = $2, updated_at = $3 \
         WHERE id = $1 AND status <> 'archived'",
        &[Text(session_id), Text(status.as_str()), now_ms().into()],
    )
    .await?;
    Ok(())
}

/// Mark archived; `false` when it already was.
pub async fn archive(c: &mut dyn Conn, session_id: &str) -> StoreResult<bool> {
    let done = c
        .execute(
            "UPDATE sessions SET status = 'archived', archived_at = $2, updated_at = $2 \
             WHERE id = $1 AND status <> 'archived'",
            &[Text(session_id), now_ms().into()],
        )
        .await?;
    Ok(done == 1)
}

pub async fn set_agent_state(
    c: &mut dyn Conn,
    session_id: &str,
    state: AgentState,
) -> StoreResult<()> {
    c.execute(
        "UPDATE sessions SET agent_state = $2 WHERE id = $1",
        &[Text(session_id), Text(state.as_str())],
    )
    .await?;
    Ok(())
}
