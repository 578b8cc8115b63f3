//! Leases: runners claim sessions that wait for one, renew their hold, and give it up
//! (docs/ARCHITECTURE.md §5.2). The epoch a claim sets is the fencing token every write of the
//! holder carries ([`super::events::append`]).

use ultraplan_protocol::events::Event;

use super::super::backend::{Arg::Text, Conn, Dialect};
use ultraplan_protocol::session::SessionStatus;

use super::super::{AgentState, Claim, Lease, StoreError, StoreResult, now_ms};
use super::{rows, sessions};

/// Which sessions wait for a runner at the time in parameter `$now`: queued, or running
/// under no live lease.
macro_rules! waiting {
    ($now:literal) => {
        concat!(
            "agent_state IN ('queued', 'running') AND status <> 'archived' \
             AND (lease_runner IS NULL OR lease_expires_at < ",
            $now,
            ")"
        )
    };
}

/// The oldest waiting session, skipping rows other claimers have locked.
const PICK_POSTGRES: &str = concat!(
    "UPDATE sessions SET lease_runner = $1, lease_epoch = lease_epoch + 1, \
     lease_expires_at = $3, \
     requeued_at = CASE WHEN lease_runner IS NULL THEN requeued_at ELSE $2 END \
     WHERE id = (SELECT id FROM sessions WHERE ",
    waiting!("$2"),
    " ORDER BY COALESCE(queued_at, created_at), id LIMIT 1 FOR UPDATE SKIP LOCKED) \
     RETURNING id, lease_epoch, agent_state, queued_at, created_at, requeued_at"
);

/// The same under SQLite's single writer, which the write transaction already holds.
const PICK_SQLITE: &str = concat!(
    "UPDATE sessions SET lease_runner = $1, lease_epoch = lease_epoch + 1, \
     lease_expires_at = $3, \
     requeued_at = CASE WHEN lease_runner IS NULL THEN requeued_at ELSE $2 END \
     WHERE id = (SELECT id FROM sessions WHERE ",
    waiting!("$2"),
    " ORDER BY COALESCE(queued_at, created_at), id LIMIT 1) \
     RETURNING id, lease_epoch, agent_state, queued_at, created_at, requeued_at"
);

/// Claim the longest-waiting session for `runner` (inside the caller's write transaction).
pub async fn claim(
    c: &mut dyn Conn,
    dialect: Dialect,
    runner: &str,
    now: i64,
    lease_ms: i64,
) -> StoreResult<Option<Claim>> {
    let sql = match dialect {
        Dialect::Postgres => PICK_POSTGRES,
        Dialect::Sqlite => PICK_SQLITE,
    };
    let expires = now.saturating_add(lease_ms);
    let Some(picked) = c
        .fetch_optional(sql, &[Text(runner), now.into(), expires.into()])
        .await?
    else {
        return Ok(None);
    };
    let id = picked.text("id")?;
    let queued_at = picked.opt_int("queued_at")?;
    let waited_from = queued_at.unwrap_or(picked.int("created_at")?);
    let session = sessions::by_id(c, &id)
        .await?
        .ok_or(StoreError::NotFound("session"))?;
    Ok(Some(Claim {
        lease: Lease {
            session_id: id,
            runner: runner.to_owned(),
            epoch: picked.int("lease_epoch")?,
        },
        resumed: picked.text("agent_state")? == "running",
        took_over: picked.opt_int("requeued_at")? == Some(now),
        waited_ms: now.saturating_sub(waited_from).max(0),
        session,
    }))
}

/// Extend a lease that still holds its session.
pub async fn renew(c: &mut dyn Conn, lease: &Lease, expires_at: i64) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET lease_expires_at = $4 \
             WHERE id = $1 AND lease_runner = $2 AND lease_epoch = $3",
            &[
                Text(&lease.session_id),
                Text(&lease.runner),
                lease.epoch.into(),
                expires_at.into(),
            ],
        )
        .await?;
    Ok(changed == 1)
}

/// Give a session up; with `requeue_at` it waits for a runner again from then.
pub async fn release(
    c: &mut dyn Conn,
    lease: &Lease,
    requeue_at: Option<i64>,
) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET lease_runner = NULL, lease_expires_at = NULL, \
             queued_at = COALESCE($4, queued_at), \
             agent_state = CASE WHEN $4 IS NULL THEN agent_state ELSE 'queued' END \
             WHERE id = $1 AND lease_runner = $2 AND lease_epoch = $3",
            &[
                Text(&lease.session_id),
                Text(&lease.runner),
                lease.epoch.into(),
                requeue_at.into(),
            ],
        )
        .await?;
    Ok(changed == 1)
}

/// Release a held session as parked, if its log has not moved past `last_event_id`.
pub async fn park(c: &mut dyn Conn, lease: &Lease, last_event_id: i64) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET agent_state = 'parked', lease_runner = NULL, \
             lease_expires_at = NULL WHERE id = $1 AND lease_runner = $2 AND lease_epoch = $3 \
             AND last_event_id = $4 AND status <> 'archived'",
            &[
                Text(&lease.session_id),
                Text(&lease.runner),
                lease.epoch.into(),
                last_event_id.into(),
            ],
        )
        .await?;
    Ok(changed == 1)
}

/// Queue a parked session.
pub async fn unpark(c: &mut dyn Conn, session_id: &str, now: i64) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET agent_state = 'queued', queued_at = $2 \
             WHERE id = $1 AND agent_state = 'parked' AND status <> 'archived'",
            &[Text(session_id), now.into()],
        )
        .await?;
    Ok(changed == 1)
}

/// Put a session in the queue unless it is archived or a runner holds it.
pub async fn queue(c: &mut dyn Conn, session_id: &str, now: i64) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET agent_state = 'queued', queued_at = $2 \
         WHERE id = $1 AND status <> 'archived' AND lease_runner IS NULL",
            &[Text(session_id), now.into()],
        )
        .await?;
    Ok(changed == 1)
}

/// Requeue what `runner` holds (everything held when `None`).
pub async fn release_all(c: &mut dyn Conn, runner: Option<&str>, now: i64) -> StoreResult<u64> {
    match runner {
        Some(runner) => {
            c.execute(
                "UPDATE sessions SET lease_runner = NULL, lease_expires_at = NULL, \
                 requeued_at = $2 WHERE lease_runner = $1",
                &[Text(runner), now.into()],
            )
            .await
        }
        None => {
            c.execute(
                "UPDATE sessions SET lease_runner = NULL, lease_expires_at = NULL, \
                 requeued_at = $1 WHERE lease_runner IS NOT NULL",
                &[now.into()],
            )
            .await
        }
    }
}

/// How many sessions wait for a runner at `now`.
pub async fn waiting(c: &mut dyn Conn, now: i64) -> StoreResult<i64> {
    let sql = concat!("SELECT COUNT(*) AS n FROM sessions WHERE ", waiting!("$1"));
    let row = c.fetch_one(sql, &[now.into()]).await?;
    row.int("n")
}

/// Events authored by users after `after_id`.
pub async fn user_events_after(
    c: &mut dyn Conn,
    session_id: &str,
    after_id: i64,
) -> StoreResult<Vec<Event>> {
    let found = c
        .fetch_all(
            "SELECT id, body, created_at FROM events \
             WHERE session_id = $1 AND id > $2 AND author = 'user' ORDER BY id",
            &[Text(session_id), after_id.into()],
        )
        .await?;
    found.iter().map(|r| rows::event(session_id, r)).collect()
}

/// Set the status while `lease` holds the session (and it is not archived).
pub async fn set_status_as(
    c: &mut dyn Conn,
    lease: &Lease,
    status: SessionStatus,
) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET status = $4, updated_at = $5 WHERE id = $1 \
             AND lease_runner = $2 AND lease_epoch = $3 AND status <> 'archived'",
            &[
                Text(&lease.session_id),
                Text(&lease.runner),
                lease.epoch.into(),
                Text(status.as_str()),
                now_ms().into(),
            ],
        )
        .await?;
    Ok(changed == 1)
}

/// Set the agent state while `lease` holds the session.
pub async fn set_agent_state_as(
    c: &mut dyn Conn,
    lease: &Lease,
    state: AgentState,
) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET agent_state = $4 \
             WHERE id = $1 AND lease_runner = $2 AND lease_epoch = $3",
            &[
                Text(&lease.session_id),
                Text(&lease.runner),
                lease.epoch.into(),
                Text(state.as_str()),
            ],
        )
        .await?;
    Ok(changed == 1)
}
