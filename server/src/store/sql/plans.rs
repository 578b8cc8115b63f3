//! Plan rows: inserted for the ExitPlanMode calls the caller names, read, and decided.

use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::EventBody;

use super::super::backend::{
    Arg::{OptText, Text},
    Conn,
};
use super::super::models::{same_decision, status_for};
use super::super::{
    AppendEffects, Author, DecideOutcome, NewPlan, PlanRow, StoreError, StoreResult, now_ms,
};
use super::events;
use super::rows::{self, plan_cols};

/// Insert the plan at the session's next revision, unless a plan with that id exists.
pub async fn insert(
    c: &mut dyn Conn,
    session_id: &str,
    new: &NewPlan,
    event_id: i64,
    now: i64,
) -> StoreResult<()> {
    let tool_use_id = new.tool_use_id.as_str();
    let addressed = new
        .addressed_comment_ids
        .as_ref()
        .map(serde_json::to_string)
        .transpose()?;
    let exists = c
        .fetch_optional(
            "SELECT 1 FROM plans WHERE session_id = $1 AND tool_use_id = $2",
            &[Text(session_id), Text(tool_use_id)],
        )
        .await?;
    if exists.is_some() {
        return Ok(());
    }
    let row = c
        .fetch_one(
            "UPDATE sessions SET plan_revisions = plan_revisions + 1 WHERE id = $1 \
             RETURNING plan_revisions",
            &[Text(session_id)],
        )
        .await?;
    c.execute(
        "INSERT INTO plans (session_id, tool_use_id, revision, plan, status, event_id, \
         created_at, addressed_comment_ids) VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7)",
        &[
            Text(session_id),
            Text(tool_use_id),
            row.int("plan_revisions")?.into(),
            Text(&new.plan),
            event_id.into(),
            now.into(),
            OptText(addressed.as_deref()),
        ],
    )
    .await?;
    Ok(())
}

pub async fn by_id(
    c: &mut dyn Conn,
    session_id: &str,
    tool_use_id: &str,
) -> StoreResult<Option<PlanRow>> {
    let sql = concat!(
        "SELECT ",
        plan_cols!(),
        " FROM plans WHERE session_id = $1 AND tool_use_id = $2"
    );
    let row = c
        .fetch_optional(sql, &[Text(session_id), Text(tool_use_id)])
        .await?;
    row.as_ref().map(rows::plan).transpose()
}

pub async fn list(c: &mut dyn Conn, session_id: &str) -> StoreResult<Vec<PlanRow>> {
    let sql = concat!(
        "SELECT ",
        plan_cols!(),
        " FROM plans WHERE session_id = $1 ORDER BY revision"
    );
    let found = c.fetch_all(sql, &[Text(session_id)]).await?;
    found.iter().map(rows::plan).collect()
}

/// Decide inside an open write transaction: the conditional update on the pending plan, the
/// caller's `result` event appended, the plan pointed at it and a waiting session made idle.
pub async fn decide(
    c: &mut dyn Conn,
    session_id: &str,
    tool_use_id: &str,
    decision: &Decision,
    result: &EventBody,
) -> StoreResult<DecideOutcome> {
    let now = now_ms();
    let won = c
        .execute(
            "UPDATE plans SET status = $3, decision = $4, decided_at = $5 \
             WHERE session_id = $1 AND tool_use_id = $2 AND status = 'pending'",
            &[
                Text(session_id),
                Text(tool_use_id),
                Text(status_for(decision).as_str()),
                Text(&serde_json::to_string(decision)?),
                now.into(),
            ],
        )
        .await?;
    if won == 0 {
        let Some(plan) = by_id(c, session_id, tool_use_id).await? else {
            return Ok(DecideOutcome::UnknownPlan);
        };
        let same = plan
            .decision
            .as_ref()
            .is_some_and(|d| same_decision(d, decision, &plan.plan));
        return Ok(if same {
            DecideOutcome::AlreadyStands(plan)
        } else {
            DecideOutcome::Conflict(plan)
        });
    }
    let appended = events::append(
        c,
        session_id,
        std::slice::from_ref(result),
        &AppendEffects {
            author: Author::User,
            ..AppendEffects::default()
        },
    )
    .await?;
    let event = appended
        .into_iter()
        .next()
        .ok_or(StoreError::Corrupt("append returned nothing".into()))?;
    c.execute(
        "UPDATE plans SET decision_event_id = $3 WHERE session_id = $1 AND tool_use_id = $2",
        &[Text(session_id), Text(tool_use_id), event.id.into()],
    )
    .await?;
    c.execute(
        "UPDATE sessions SET status = 'idle', updated_at = $2 \
         WHERE id = $1 AND status = 'requires_action'",
        &[Text(session_id), now.into()],
    )
    .await?;
    let plan = by_id(c, session_id, tool_use_id)
        .await?
        .ok_or(StoreError::NotFound("plan"))?;
    Ok(DecideOutcome::Decided {
        plan,
        event: Box::new(event),
    })
}
