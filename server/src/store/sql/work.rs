//! What a session's work leaves behind: remote execution state, its patch, model calls.

use ultraplan_protocol::model::Usage;
use ultraplan_protocol::patch::{Execution, ExecutionState, PatchSummary};

use super::super::backend::{
    Arg::{Bytes, Text},
    Conn,
};
use super::super::{ModelCall, PatchRow, StoreError, StoreResult, now_ms};

pub async fn set_execution(
    c: &mut dyn Conn,
    session_id: &str,
    execution: &Execution,
) -> StoreResult<()> {
    write_execution(c, session_id, execution, now_ms()).await
}

/// Replace a session's context while it records no execution.
pub async fn set_context_before_execution(
    c: &mut dyn Conn,
    session_id: &str,
    context: &ultraplan_protocol::session::SessionContext,
) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE sessions SET context = $2, updated_at = $3 \
             WHERE id = $1 AND execution IS NULL",
            &[
                Text(session_id),
                Text(&serde_json::to_string(context)?),
                now_ms().into(),
            ],
        )
        .await?;
    Ok(changed == 1)
}

/// Record an execution as under way where the session records none yet.
pub async fn mark_executing(c: &mut dyn Conn, session_id: &str) -> StoreResult<bool> {
    let executing = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    let changed = c
        .execute(
            "UPDATE sessions SET execution = $2, updated_at = $3 \
             WHERE id = $1 AND execution IS NULL",
            &[
                Text(session_id),
                Text(&serde_json::to_string(&executing)?),
                now_ms().into(),
            ],
        )
        .await?;
    Ok(changed == 1)
}

async fn write_execution(
    c: &mut dyn Conn,
    session_id: &str,
    execution: &Execution,
    now: i64,
) -> StoreResult<()> {
    c.execute(
        "UPDATE sessions SET execution = $2, updated_at = $3 WHERE id = $1",
        &[
            Text(session_id),
            Text(&serde_json::to_string(execution)?),
            now.into(),
        ],
    )
    .await?;
    Ok(())
}

/// Store the patch (replacing an earlier one) and mark the execution finished, inside the
/// caller's write transaction.
pub async fn save_patch(
    c: &mut dyn Conn,
    session_id: &str,
    diff: &[u8],
    summary: &PatchSummary,
) -> StoreResult<()> {
    let now = now_ms();
    c.execute(
        "INSERT INTO patches (session_id, diff, summary, created_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (session_id) DO UPDATE \
         SET diff = excluded.diff, summary = excluded.summary, \
         created_at = excluded.created_at",
        &[
            Text(session_id),
            Bytes(diff),
            Text(&serde_json::to_string(summary)?),
            now.into(),
        ],
    )
    .await?;
    let execution = Execution {
        state: ExecutionState::Finished,
        patch: Some(summary.clone()),
    };
    write_execution(c, session_id, &execution, now).await
}

pub async fn patch(c: &mut dyn Conn, session_id: &str) -> StoreResult<Option<PatchRow>> {
    let row = c
        .fetch_optional(
            "SELECT session_id, diff, summary, created_at FROM patches WHERE session_id = $1",
            &[Text(session_id)],
        )
        .await?;
    row.map(|r| {
        Ok(PatchRow {
            session_id: r.text("session_id")?,
            diff: r.bytes("diff")?,
            summary: serde_json::from_str(&r.text("summary")?)?,
            created_at: r.int("created_at")?,
        })
    })
    .transpose()
}

/// Record the call and add its usage to the session's total, inside the caller's write
/// transaction; the new total.
pub async fn record_model_call(c: &mut dyn Conn, call: &ModelCall) -> StoreResult<Usage> {
    let now = now_ms();
    let row = c
        .fetch_optional(
            "UPDATE sessions SET updated_at = $2 WHERE id = $1 RETURNING usage",
            &[Text(&call.session_id), now.into()],
        )
        .await?
        .ok_or(StoreError::NotFound("session"))?;
    let before: Usage = serde_json::from_str(&row.text("usage")?)?;
    let total = before + call.usage;
    c.execute(
        "UPDATE sessions SET usage = $2 WHERE id = $1",
        &[
            Text(&call.session_id),
            Text(&serde_json::to_string(&total)?),
        ],
    )
    .await?;
    let u = |n: u64| i64::try_from(n).unwrap_or(i64::MAX).into();
    c.execute(
        "INSERT INTO model_calls (session_id, model, input_tokens, output_tokens, \
         cache_read_input_tokens, cache_creation_input_tokens, attempts, error, \
         created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            Text(&call.session_id),
            Text(&call.model),
            u(call.usage.input_tokens),
            u(call.usage.output_tokens),
            u(call.usage.cache_read_input_tokens),
            u(call.usage.cache_creation_input_tokens),
            i64::from(call.attempts).into(),
            call.error.as_deref().into(),
            now.into(),
        ],
    )
    .await?;
    Ok(total)
}
