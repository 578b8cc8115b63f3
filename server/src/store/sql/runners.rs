//! Runner tokens (`migrations/*/0008_runner_tokens.sql`): one per runner name, kept as the
//! SHA-256 of the token and looked up by it.

use super::super::StoreResult;
use super::super::backend::{Arg::Text, Conn};
use super::map_unique;

pub async fn add(
    c: &mut dyn Conn,
    name: &str,
    token_hash: &str,
    created_at: i64,
) -> StoreResult<()> {
    c.execute(
        "INSERT INTO runner_tokens (name, token_hash, created_at) VALUES ($1, $2, $3)",
        &[Text(name), Text(token_hash), created_at.into()],
    )
    .await
    .map_err(|e| map_unique(e, "runner"))?;
    Ok(())
}

pub async fn by_hash(c: &mut dyn Conn, token_hash: &str) -> StoreResult<Option<String>> {
    let sql = "SELECT name FROM runner_tokens WHERE token_hash = $1";
    let row = c.fetch_optional(sql, &[Text(token_hash)]).await?;
    row.map(|r| r.text("name")).transpose()
}

/// Every runner's name and creation time, by name in byte order (the same on both backends,
/// whatever PostgreSQL's collation).
pub async fn list(c: &mut dyn Conn) -> StoreResult<Vec<(String, i64)>> {
    let rows = c
        .fetch_all("SELECT name, created_at FROM runner_tokens", &[])
        .await?;
    let mut runners = rows
        .iter()
        .map(|r| Ok((r.text("name")?, r.int("created_at")?)))
        .collect::<StoreResult<Vec<_>>>()?;
    runners.sort();
    Ok(runners)
}

pub async fn revoke(c: &mut dyn Conn, name: &str) -> StoreResult<bool> {
    let deleted = c
        .execute("DELETE FROM runner_tokens WHERE name = $1", &[Text(name)])
        .await?;
    Ok(deleted > 0)
}
