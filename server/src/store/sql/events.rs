//! The event log: appends under the session row's lock, and reads.

use std::collections::HashMap;

use ultraplan_protocol::activity::Activity;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_protocol::session::SessionStatus;

use super::super::backend::{Arg::Text, Conn};
use super::super::{AppendEffects, Lease, StoreError, StoreResult, format_ms, now_ms};
use super::{plans, rows, sessions};

fn kind(body: &EventBody) -> &'static str {
    match body {
        EventBody::Assistant(_) => "assistant",
        EventBody::User(_) => "user",
        EventBody::Result(_) => "result",
        EventBody::System(_) => "system",
        EventBody::ControlRequest(_) => "control_request",
    }
}

/// Append inside an open write transaction: ids come from the session's counter, whose
/// UPDATE takes the session row's lock first. Then the caller's `effects` apply.
pub async fn append(
    c: &mut dyn Conn,
    session_id: &str,
    events: &[EventBody],
    effects: &AppendEffects,
) -> StoreResult<Vec<Event>> {
    if let Some(plan) = effects.plans.iter().find(|p| p.event >= events.len()) {
        return Err(StoreError::Corrupt(format!(
            "plan {} names event {} of a batch of {}",
            plan.tool_use_id,
            plan.event,
            events.len()
        )));
    }
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let now = now_ms();
    let count = i64::try_from(events.len()).unwrap_or(i64::MAX);
    let last = take_ids(c, session_id, count, now, effects.fence.as_ref()).await?;
    fold_activity(c, session_id, events).await?;
    let mut stored = Vec::with_capacity(events.len());
    for (index, body) in events.iter().enumerate() {
        let id = last - count + 1 + i64::try_from(index).unwrap_or(i64::MAX);
        c.execute(
            "INSERT INTO events (session_id, id, kind, parent_tool_use_id, body, created_at, \
             author) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                Text(session_id),
                id.into(),
                Text(kind(body)),
                body.parent_tool_use_id().into(),
                Text(&serde_json::to_string(body)?),
                now.into(),
                Text(effects.author.as_str()),
            ],
        )
        .await?;
        for plan in effects.plans.iter().filter(|p| p.event == index) {
            plans::insert(c, session_id, plan, id, now).await?;
        }
        stored.push(Event {
            id,
            session_id: session_id.to_owned(),
            created_at: format_ms(now),
            body: body.clone(),
        });
    }
    if effects.requires_action {
        sessions::set_status(c, session_id, SessionStatus::RequiresAction).await?;
    }
    Ok(stored)
}

/// Reserve `count` ids from the session's counter (taking the session row's lock); the last
/// one. With a `fence`, only while that lease still holds the session.
async fn take_ids(
    c: &mut dyn Conn,
    session_id: &str,
    count: i64,
    now: i64,
    fence: Option<&Lease>,
) -> StoreResult<i64> {
    let row = match fence {
        None => {
            c.fetch_optional(
                "UPDATE sessions SET last_event_id = last_event_id + $2, updated_at = $3, \
                 last_activity_at = $3 WHERE id = $1 RETURNING last_event_id",
                &[Text(session_id), count.into(), now.into()],
            )
            .await?
        }
        Some(lease) => {
            let row = c
                .fetch_optional(
                    "UPDATE sessions SET last_event_id = last_event_id + $2, updated_at = $3, \
                     last_activity_at = $3 WHERE id = $1 AND lease_runner = $4 \
                     AND lease_epoch = $5 RETURNING last_event_id",
                    &[
                        Text(session_id),
                        count.into(),
                        now.into(),
                        Text(&lease.runner),
                        lease.epoch.into(),
                    ],
                )
                .await?;
            if row.is_none() && sessions::by_id(c, session_id).await?.is_some() {
                return Err(StoreError::Fenced {
                    session_id: session_id.to_owned(),
                    epoch: lease.epoch,
                });
            }
            row
        }
    };
    row.ok_or(StoreError::NotFound("session"))?
        .int("last_event_id")
}

/// Fold the events into the session's stored activity (subagents, tool calls).
async fn fold_activity(
    c: &mut dyn Conn,
    session_id: &str,
    events: &[EventBody],
) -> StoreResult<()> {
    if !events.iter().any(Activity::touches) {
        return Ok(());
    }
    let row = c
        .fetch_one(
            "SELECT activity FROM sessions WHERE id = $1",
            &[Text(session_id)],
        )
        .await?;
    let mut activity: Activity = serde_json::from_str(&row.text("activity")?)?;
    for body in events {
        activity.apply(body);
    }
    c.execute(
        "UPDATE sessions SET activity = $2 WHERE id = $1",
        &[Text(session_id), Text(&serde_json::to_string(&activity)?)],
    )
    .await?;
    Ok(())
}

/// Events with `id > after_id`, oldest first, at most `limit`; and whether more follow.
pub async fn list(
    c: &mut dyn Conn,
    session_id: &str,
    after_id: i64,
    limit: u32,
) -> StoreResult<(Vec<Event>, bool)> {
    let found = c
        .fetch_all(
            "SELECT id, body, created_at FROM events WHERE session_id = $1 AND id > $2 \
             ORDER BY id LIMIT $3",
            &[
                Text(session_id),
                after_id.into(),
                (i64::from(limit) + 1).into(),
            ],
        )
        .await?;
    let has_more = found.len() > limit as usize;
    let events = found
        .iter()
        .take(limit as usize)
        .map(|r| rows::event(session_id, r))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok((events, has_more))
}

/// The subtype of the newest `result` event of each of the user's sessions that has one.
pub async fn last_results(c: &mut dyn Conn, user_id: &str) -> StoreResult<HashMap<String, String>> {
    let found = c
        .fetch_all(
            "SELECT e.session_id, e.body FROM events e \
             JOIN sessions s ON s.id = e.session_id \
             WHERE s.user_id = $1 AND e.kind = 'result' AND e.id = \
             (SELECT MAX(x.id) FROM events x \
              WHERE x.session_id = e.session_id AND x.kind = 'result')",
            &[Text(user_id)],
        )
        .await?;
    let mut out = HashMap::new();
    for row in &found {
        if let Ok(EventBody::Result(r)) = serde_json::from_str(&row.text("body")?) {
            out.insert(row.text("session_id")?, r.subtype);
        }
    }
    Ok(out)
}
