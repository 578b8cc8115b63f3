//! Named environments (`migrations/*/0012_environments.sql`, docs/ARCHITECTURE.md §6.5): an
//! environment file's TOML per owner and name; the owner `''` shares one with every user.

use super::super::backend::{Arg::Text, Conn, Row};
use super::super::{EnvironmentRow, SHARED_OWNER, StoreResult};

/// Insert, or replace the definition of an existing (owner, name) keeping its `created_at`.
pub async fn put(c: &mut dyn Conn, row: &EnvironmentRow) -> StoreResult<()> {
    c.execute(
        "INSERT INTO environments (owner_id, name, definition, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (owner_id, name) DO UPDATE SET definition = excluded.definition,
             updated_at = excluded.updated_at",
        &[
            Text(&row.owner_id),
            Text(&row.name),
            Text(&row.definition),
            row.created_at.into(),
            row.updated_at.into(),
        ],
    )
    .await?;
    Ok(())
}

/// The owner's environments and the shared ones, by name in byte order, the owner's first
/// where a name is both.
pub async fn visible_to(c: &mut dyn Conn, owner_id: &str) -> StoreResult<Vec<EnvironmentRow>> {
    let sql = "SELECT owner_id, name, definition, created_at, updated_at FROM environments
               WHERE owner_id = $1 OR owner_id = $2";
    let rows = c
        .fetch_all(sql, &[Text(owner_id), Text(SHARED_OWNER)])
        .await?;
    let mut found = rows
        .iter()
        .map(environment_row)
        .collect::<StoreResult<Vec<_>>>()?;
    found.sort_by(|a, b| (&a.name, a.shared()).cmp(&(&b.name, b.shared())));
    Ok(found)
}

/// The environment `name` as the owner sees it: their own, else the shared one.
pub async fn named(
    c: &mut dyn Conn,
    owner_id: &str,
    name: &str,
) -> StoreResult<Option<EnvironmentRow>> {
    let sql = "SELECT owner_id, name, definition, created_at, updated_at FROM environments
               WHERE owner_id = $1 AND name = $2";
    for owner in [owner_id, SHARED_OWNER] {
        if let Some(row) = c.fetch_optional(sql, &[Text(owner), Text(name)]).await? {
            return environment_row(&row).map(Some);
        }
    }
    Ok(None)
}

pub async fn delete(c: &mut dyn Conn, owner_id: &str, name: &str) -> StoreResult<bool> {
    let deleted = c
        .execute(
            "DELETE FROM environments WHERE owner_id = $1 AND name = $2",
            &[Text(owner_id), Text(name)],
        )
        .await?;
    Ok(deleted > 0)
}

fn environment_row(r: &Row) -> StoreResult<EnvironmentRow> {
    Ok(EnvironmentRow {
        owner_id: r.text("owner_id")?,
        name: r.text("name")?,
        definition: r.text("definition")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
    })
}
