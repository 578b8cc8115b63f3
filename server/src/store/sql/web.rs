//! The review pages' tables (`migrations/*/0003_web.sql`): one-time login links and browser
//! sessions.

use super::super::backend::{Arg::Text, Conn};
use super::super::{LinkRow, StoreResult, WebSessionRow};

/// Store a new login link, dropping expired ones.
pub async fn insert_link(c: &mut dyn Conn, link: &LinkRow) -> StoreResult<()> {
    c.execute(
        "DELETE FROM web_login_links WHERE expires_at < $1",
        &[link.created_at.into()],
    )
    .await?;
    c.execute(
        "INSERT INTO web_login_links (id, user_id, hash, next_path, created_at, \
         expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            Text(&link.id),
            Text(&link.user_id),
            Text(&link.hash),
            Text(&link.next_path),
            link.created_at.into(),
            link.expires_at.into(),
        ],
    )
    .await?;
    Ok(())
}

/// The link, if it exists, is unused and has not expired at `now`.
pub async fn usable_link(c: &mut dyn Conn, id: &str, now: i64) -> StoreResult<Option<LinkRow>> {
    let row = c
        .fetch_optional(
            "SELECT id, user_id, hash, next_path, created_at, expires_at \
             FROM web_login_links WHERE id = $1 AND used_at IS NULL AND expires_at > $2",
            &[Text(id), now.into()],
        )
        .await?;
    row.map(|r| {
        Ok(LinkRow {
            id: r.text("id")?,
            user_id: r.text("user_id")?,
            hash: r.text("hash")?,
            next_path: r.text("next_path")?,
            created_at: r.int("created_at")?,
            expires_at: r.int("expires_at")?,
        })
    })
    .transpose()
}

/// Spend the link; `false` when another request spent it first or it expired.
pub async fn use_link(c: &mut dyn Conn, id: &str, now: i64) -> StoreResult<bool> {
    let done = c
        .execute(
            "UPDATE web_login_links SET used_at = $2 \
             WHERE id = $1 AND used_at IS NULL AND expires_at > $2",
            &[Text(id), now.into()],
        )
        .await?;
    Ok(done == 1)
}

/// Store a new browser session, dropping expired ones.
pub async fn insert_session(c: &mut dyn Conn, row: &WebSessionRow) -> StoreResult<()> {
    c.execute(
        "DELETE FROM web_sessions WHERE expires_at < $1",
        &[row.created_at.into()],
    )
    .await?;
    c.execute(
        "INSERT INTO web_sessions (id, user_id, hash, csrf, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            Text(&row.id),
            Text(&row.user_id),
            Text(&row.hash),
            Text(&row.csrf),
            row.created_at.into(),
            row.expires_at.into(),
        ],
    )
    .await?;
    Ok(())
}

/// The browser session with its user's name, if it has not expired at `now`.
pub async fn session(c: &mut dyn Conn, id: &str, now: i64) -> StoreResult<Option<WebSessionRow>> {
    let row = c
        .fetch_optional(
            "SELECT w.id, w.user_id, u.name, w.hash, w.csrf, w.created_at, w.expires_at \
             FROM web_sessions w JOIN users u ON u.id = w.user_id \
             WHERE w.id = $1 AND w.expires_at > $2",
            &[Text(id), now.into()],
        )
        .await?;
    row.map(|r| {
        Ok(WebSessionRow {
            id: r.text("id")?,
            user_id: r.text("user_id")?,
            user_name: r.text("name")?,
            hash: r.text("hash")?,
            csrf: r.text("csrf")?,
            created_at: r.int("created_at")?,
            expires_at: r.int("expires_at")?,
        })
    })
    .transpose()
}

/// End a browser session.
pub async fn delete_session(c: &mut dyn Conn, id: &str) -> StoreResult<()> {
    c.execute("DELETE FROM web_sessions WHERE id = $1", &[Text(id)])
        .await?;
    Ok(())
}
