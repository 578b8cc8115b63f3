//! The tables the pages own (`migrations/*/0003_web.sql`): one-time login links and browser
//! sessions, plus one read of the event log the sessions list needs. The SQL uses `$N`
//! placeholders and BIGINT/TEXT only, so the same text runs on SQLite and PostgreSQL.

use std::collections::HashMap;

use sqlx::Row as _;
use ultraplan_protocol::events::EventBody;

use crate::state::AppState;

/// A connection pool on the server's database.
pub use crate::store::Pool as WebDb;

/// Run the same query code against whichever pool this is.
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            WebDb::Sqlite($pool) => $body,
            WebDb::Postgres($pool) => $body,
        }
    };
}

/// A one-time login link (its secret only as a hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRow {
    pub id: String,
    pub user_id: String,
    pub hash: String,
    pub next_path: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A browser session (its secret only as a hash) and its CSRF token.
#[derive(Clone, PartialEq, Eq)]
pub struct WebSessionRow {
    pub id: String,
    pub user_id: String,
    pub user_name: String,
    pub hash: String,
    pub csrf: String,
    pub created_at: i64,
    pub expires_at: i64,
}

impl std::fmt::Debug for WebSessionRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSessionRow")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// The server store's pool.
pub async fn of(state: &AppState) -> Result<WebDb, sqlx::Error> {
    Ok(state.store.pool())
}

impl WebDb {
    /// Store a new login link, dropping expired ones.
    pub async fn insert_link(&self, link: &LinkRow) -> Result<(), sqlx::Error> {
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM web_login_links WHERE expires_at < $1")
                .bind(link.created_at)
                .execute(pool)
                .await?;
            sqlx::query(
                "INSERT INTO web_login_links (id, user_id, hash, next_path, created_at, \
                 expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&link.id)
            .bind(&link.user_id)
            .bind(&link.hash)
            .bind(&link.next_path)
            .bind(link.created_at)
            .bind(link.expires_at)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// The link, if it exists, is unused and has not expired at `now`.
    pub async fn usable_link(&self, id: &str, now: i64) -> Result<Option<LinkRow>, sqlx::Error> {
        let sql = "SELECT id, user_id, hash, next_path, created_at, expires_at \
                   FROM web_login_links WHERE id = $1 AND used_at IS NULL AND expires_at > $2";
        on_pool!(self, pool => {
            let row = sqlx::query(sql).bind(id).bind(now).fetch_optional(pool).await?;
            row.map(|r| {
                Ok(LinkRow {
                    id: r.try_get("id")?,
                    user_id: r.try_get("user_id")?,
                    hash: r.try_get("hash")?,
                    next_path: r.try_get("next_path")?,
                    created_at: r.try_get("created_at")?,
                    expires_at: r.try_get("expires_at")?,
                })
            })
            .transpose()
        })
    }

    /// Spend the link; `false` when another request spent it first or it expired.
    pub async fn use_link(&self, id: &str, now: i64) -> Result<bool, sqlx::Error> {
        let sql = "UPDATE web_login_links SET used_at = $2 \
                   WHERE id = $1 AND used_at IS NULL AND expires_at > $2";
        on_pool!(self, pool => {
            let done = sqlx::query(sql).bind(id).bind(now).execute(pool).await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Store a new browser session, dropping expired ones.
    pub async fn insert_session(&self, row: &WebSessionRow) -> Result<(), sqlx::Error> {
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM web_sessions WHERE expires_at < $1")
                .bind(row.created_at)
                .execute(pool)
                .await?;
            sqlx::query(
                "INSERT INTO web_sessions (id, user_id, hash, csrf, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&row.id)
            .bind(&row.user_id)
            .bind(&row.hash)
            .bind(&row.csrf)
            .bind(row.created_at)
            .bind(row.expires_at)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// The browser session with its user's name, if it has not expired at `now`.
    pub async fn session(&self, id: &str, now: i64) -> Result<Option<WebSessionRow>, sqlx::Error> {
        let sql = "SELECT w.id, w.user_id, u.name, w.hash, w.csrf, w.created_at, w.expires_at \
                   FROM web_sessions w JOIN users u ON u.id = w.user_id \
                   WHERE w.id = $1 AND w.expires_at > $2";
        on_pool!(self, pool => {
            let row = sqlx::query(sql).bind(id).bind(now).fetch_optional(pool).await?;
            row.map(|r| {
                Ok(WebSessionRow {
                    id: r.try_get("id")?,
                    user_id: r.try_get("user_id")?,
                    user_name: r.try_get("name")?,
                    hash: r.try_get("hash")?,
                    csrf: r.try_get("csrf")?,
                    created_at: r.try_get("created_at")?,
                    expires_at: r.try_get("expires_at")?,
                })
            })
            .transpose()
        })
    }

    /// End a browser session.
    pub async fn delete_session(&self, id: &str) -> Result<(), sqlx::Error> {
        on_pool!(self, pool => {
            sqlx::query("DELETE FROM web_sessions WHERE id = $1")
                .bind(id)
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// The subtype of the newest `result` event of each of the user's sessions that has one.
    pub async fn last_results(
        &self,
        user_id: &str,
    ) -> Result<HashMap<String, String>, sqlx::Error> {
        let sql = "SELECT e.session_id, e.body FROM events e \
                   JOIN sessions s ON s.id = e.session_id \
                   WHERE s.user_id = $1 AND e.kind = 'result' AND e.id = \
                   (SELECT MAX(x.id) FROM events x \
                    WHERE x.session_id = e.session_id AND x.kind = 'result')";
        let rows: Vec<(String, String)> = on_pool!(self, pool => {
            sqlx::query_as(sql).bind(user_id).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .filter_map(|(id, body)| match serde_json::from_str(&body) {
                Ok(EventBody::Result(r)) => Some((id, r.subtype)),
                _ => None,
            })
            .collect())
    }
}
