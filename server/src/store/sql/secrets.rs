//! Secrets (`migrations/*/0011_secrets.sql`, docs/ARCHITECTURE.md §6.5): sealed values per
//! owner and name. Nothing here sees a plain value.

use super::super::backend::{
    Arg::{Bytes, Text},
    Conn, Row,
};
use super::super::{SecretRow, StoreResult};

/// Insert, or replace the value of an existing (owner, name) keeping its `created_at`: one
/// statement, so concurrent writers of one name never collide on the key.
pub async fn put(c: &mut dyn Conn, row: &SecretRow) -> StoreResult<()> {
    c.execute(
        "INSERT INTO secrets (owner_id, name, nonce, ciphertext, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (owner_id, name) DO UPDATE SET nonce = excluded.nonce,
             ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
        &[
            Text(&row.owner_id),
            Text(&row.name),
            Bytes(&row.nonce),
            Bytes(&row.ciphertext),
            row.created_at.into(),
            row.updated_at.into(),
        ],
    )
    .await?;
    Ok(())
}

/// Names and last-set times, by name in byte order (the same on both backends, whatever
/// PostgreSQL's collation).
pub async fn names(c: &mut dyn Conn, owner_id: &str) -> StoreResult<Vec<(String, i64)>> {
    let sql = "SELECT name, updated_at FROM secrets WHERE owner_id = $1";
    let rows = c.fetch_all(sql, &[Text(owner_id)]).await?;
    let mut names = rows
        .iter()
        .map(|r| Ok((r.text("name")?, r.int("updated_at")?)))
        .collect::<StoreResult<Vec<_>>>()?;
    names.sort();
    Ok(names)
}

pub async fn delete(c: &mut dyn Conn, owner_id: &str, name: &str) -> StoreResult<bool> {
    let deleted = c
        .execute(
            "DELETE FROM secrets WHERE owner_id = $1 AND name = $2",
            &[Text(owner_id), Text(name)],
        )
        .await?;
    Ok(deleted > 0)
}

/// One lookup by key per name (an environment names a few), by name.
pub async fn sealed(
    c: &mut dyn Conn,
    owner_id: &str,
    names: &[String],
) -> StoreResult<Vec<SecretRow>> {
    let sql = "SELECT owner_id, name, nonce, ciphertext, created_at, updated_at FROM secrets
               WHERE owner_id = $1 AND name = $2";
    let mut found = Vec::with_capacity(names.len());
    for name in names {
        if let Some(row) = c.fetch_optional(sql, &[Text(owner_id), Text(name)]).await? {
            found.push(secret_row(&row)?);
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found.dedup_by(|a, b| a.name == b.name);
    Ok(found)
}

/// Every row, by owner then name.
pub async fn all(c: &mut dyn Conn) -> StoreResult<Vec<SecretRow>> {
    let sql = "SELECT owner_id, name, nonce, ciphertext, created_at, updated_at FROM secrets";
    let rows = c.fetch_all(sql, &[]).await?;
    let mut found = rows
        .iter()
        .map(secret_row)
        .collect::<StoreResult<Vec<_>>>()?;
    found.sort_by(|a, b| (&a.owner_id, &a.name).cmp(&(&b.owner_id, &b.name)));
    Ok(found)
}

/// Swap a row's sealed value if it is still the one `old` read (same nonce and time).
pub async fn reseal(
    c: &mut dyn Conn,
    old: &SecretRow,
    nonce: &[u8],
    ciphertext: &[u8],
) -> StoreResult<bool> {
    let changed = c
        .execute(
            "UPDATE secrets SET nonce = $3, ciphertext = $4
             WHERE owner_id = $1 AND name = $2 AND nonce = $5 AND updated_at = $6",
            &[
                Text(&old.owner_id),
                Text(&old.name),
                Bytes(nonce),
                Bytes(ciphertext),
                Bytes(&old.nonce),
                old.updated_at.into(),
            ],
        )
        .await?;
    Ok(changed == 1)
}

fn secret_row(r: &Row) -> StoreResult<SecretRow> {
    Ok(SecretRow {
        owner_id: r.text("owner_id")?,
        name: r.text("name")?,
        nonce: r.bytes("nonce")?,
        ciphertext: r.bytes("ciphertext")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
    })
}
