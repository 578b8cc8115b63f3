//! Users and API tokens.

use super::super::backend::{Arg::Text, Conn, Row};
use super::super::{StoreResult, TokenRow, UserRow, now_ms};
use super::map_unique;

pub async fn create(c: &mut dyn Conn, name: &str) -> StoreResult<UserRow> {
    let user = UserRow {
        id: uuid::Uuid::new_v4().to_string(),
        name: name.to_owned(),
        created_at: now_ms(),
    };
    c.execute(
        "INSERT INTO users (id, name, created_at) VALUES ($1, $2, $3)",
        &[Text(&user.id), Text(&user.name), user.created_at.into()],
    )
    .await
    .map_err(|e| map_unique(e, "user"))?;
    Ok(user)
}

fn user(row: &Row) -> StoreResult<UserRow> {
    Ok(UserRow {
        id: row.text("id")?,
        name: row.text("name")?,
        created_at: row.int("created_at")?,
    })
}

pub async fn by_name(c: &mut dyn Conn, name: &str) -> StoreResult<Option<UserRow>> {
    let sql = "SELECT id, name, created_at FROM users WHERE name = $1";
    let row = c.fetch_optional(sql, &[Text(name)]).await?;
    row.as_ref().map(user).transpose()
}

pub async fn by_id(c: &mut dyn Conn, id: &str) -> StoreResult<Option<UserRow>> {
    let sql = "SELECT id, name, created_at FROM users WHERE id = $1";
    let row = c.fetch_optional(sql, &[Text(id)]).await?;
    row.as_ref().map(user).transpose()
}

pub async fn add_token(
    c: &mut dyn Conn,
    user_id: &str,
    token_id: &str,
    salt: &str,
    hash: &str,
) -> StoreResult<()> {
    c.execute(
        "INSERT INTO api_tokens (id, user_id, salt, hash, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
        &[
            Text(token_id),
            Text(user_id),
            Text(salt),
            Text(hash),
            now_ms().into(),
        ],
    )
    .await
    .map_err(|e| map_unique(e, "token"))?;
    Ok(())
}

pub async fn token(c: &mut dyn Conn, token_id: &str) -> StoreResult<Option<TokenRow>> {
    let sql = "SELECT t.id, t.user_id, u.name, t.salt, t.hash FROM api_tokens t \
               JOIN users u ON u.id = t.user_id WHERE t.id = $1";
    let row = c.fetch_optional(sql, &[Text(token_id)]).await?;
    row.map(|r| {
        Ok(TokenRow {
            token_id: r.text("id")?,
            user_id: r.text("user_id")?,
            user_name: r.text("name")?,
            salt: r.text("salt")?,
            hash: r.text("hash")?,
        })
    })
    .transpose()
}
