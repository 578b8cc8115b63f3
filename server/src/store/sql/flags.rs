//! Feature flags and telemetry counters.

use super::super::backend::{Arg::Text, Conn};
use super::super::{FlagRow, StoreResult, now_ms};

pub async fn list(c: &mut dyn Conn) -> StoreResult<Vec<FlagRow>> {
    let found = c
        .fetch_all(
            "SELECT name, user_id, value, rollout_pct, updated_at FROM flags \
             ORDER BY name, user_id",
            &[],
        )
        .await?;
    found
        .iter()
        .map(|r| {
            let user = r.text("user_id")?;
            Ok(FlagRow {
                name: r.text("name")?,
                user_id: (!user.is_empty()).then_some(user),
                value: r.text("value")?,
                rollout_pct: r
                    .opt_int("rollout_pct")?
                    .map(|p| u8::try_from(p.clamp(0, 100)).unwrap_or(100)),
                updated_at: r.int("updated_at")?,
            })
        })
        .collect()
}

pub async fn set(c: &mut dyn Conn, row: &FlagRow) -> StoreResult<()> {
    c.execute(
        "INSERT INTO flags (name, user_id, value, rollout_pct, updated_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name, user_id) DO UPDATE SET \
         value = excluded.value, rollout_pct = excluded.rollout_pct, \
         updated_at = excluded.updated_at",
        &[
            Text(&row.name),
            Text(row.user_id.as_deref().unwrap_or_default()),
            Text(&row.value),
            row.rollout_pct.map(i64::from).into(),
            row.updated_at.into(),
        ],
    )
    .await?;
    Ok(())
}

pub async fn record_telemetry(
    c: &mut dyn Conn,
    name: &str,
    labels: &serde_json::Value,
    user_id: Option<&str>,
    session_id: Option<&str>,
) -> StoreResult<()> {
    c.execute(
        "INSERT INTO telemetry (name, labels, user_id, session_id, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
        &[
            Text(name),
            Text(&labels.to_string()),
            user_id.into(),
            session_id.into(),
            now_ms().into(),
        ],
    )
    .await?;
    Ok(())
}

pub async fn count_telemetry(c: &mut dyn Conn, name: &str) -> StoreResult<i64> {
    let row = c
        .fetch_one(
            "SELECT COUNT(*) AS n FROM telemetry WHERE name = $1",
            &[Text(name)],
        )
        .await?;
    row.int("n")
}
