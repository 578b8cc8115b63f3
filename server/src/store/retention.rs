//! Retention and quota queries: which bundles a user holds and how many bytes they take, which
//! holdings and bundles nothing uses any more, and expired login links and browser sessions.
//!
//! The rules (the deletion of files is `crate::retention`'s):
//! - A user holds a bundle from its upload (a row in `bundle_owners`). The holding is dropped
//!   once it is older than the grace period and none of the user's sessions uses the bundle;
//!   sessions are never deleted, so a session's bundle (archived sessions included) is kept.
//! - A bundle that nobody holds and no session uses is deleted.
//! - Creating a session takes the holding's row lock first (see `create_session`), and a
//!   holding is dropped only under that same lock after checking for sessions, so a session
//!   never ends up pointing at a deleted bundle: one of the two waits for the other.
//!
//! SQL uses `$N` placeholders and BIGINT/TEXT only, so the same text runs on both backends.

use sqlx::Row as _;

use super::{BundleRow, Pool, StoreResult, now_ms};

/// Run `$body` with `$tx`, a write transaction on whichever pool this is, and commit it.
/// SQLite takes the database lock up front (as every writer there does); PostgreSQL relies
/// on the row locks the statements take. A `return` inside `$body` rolls back.
macro_rules! in_write_tx {
    ($pool:expr, $tx:ident => $body:expr) => {
        match $pool {
            Pool::Sqlite(pool) => {
                let mut $tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
            Pool::Postgres(pool) => {
                let mut $tx = pool.begin().await?;
                let out = $body;
                $tx.commit().await?;
                out
            }
        }
    };
}

/// Run the same read against whichever pool this is.
macro_rules! on_pool {
    ($pool:expr, $p:ident => $body:expr) => {
        match $pool {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

/// Whether an upload fits its owner's quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Recorded (or the user already held it).
    Admitted,
    /// Not recorded: the user holds `used` bytes and this bundle needs `needed` more.
    OverQuota { used: u64, needed: u64 },
}

/// What one retention pass removed from the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Holdings dropped (a user's claim on a bundle).
    pub holdings: u64,
    /// Bundles deleted: their files are now to be removed.
    pub bundles: Vec<String>,
    /// Login links deleted (expired or used).
    pub links: u64,
    /// Browser sessions deleted (expired).
    pub web_sessions: u64,
}

/// Bytes a bundle takes on disk: the archive plus the unpacked tree.
pub fn stored_bytes(bundle: &BundleRow) -> u64 {
    u64::try_from(bundle.bytes.saturating_add(bundle.unpacked_bytes)).unwrap_or(0)
}

const USED_SQL: &str = "SELECT CAST(COALESCE(SUM(b.bytes + b.unpacked_bytes), 0) AS BIGINT) \
                        AS used FROM bundle_owners o JOIN bundles b ON b.sha256 = o.sha256 \
                        WHERE o.user_id = $1";

/// Bytes of every bundle `user_id` holds.
pub async fn bytes_used(pool: &Pool, user_id: &str) -> StoreResult<u64> {
    let used: i64 = on_pool!(pool, p => {
        sqlx::query(USED_SQL).bind(user_id).fetch_one(p).await?.try_get("used")?
    });
    Ok(u64::try_from(used).unwrap_or(0))
}

/// Record that `user_id` holds `bundle`, unless that takes them over `quota` bytes (0: no
/// limit). Holding it already only refreshes the holding's age. Concurrent uploads of one
/// user are serialised on their user row, so together they cannot pass the quota either.
pub async fn put_within_quota(
    pool: &Pool,
    user_id: &str,
    bundle: &BundleRow,
    quota: u64,
) -> StoreResult<Admission> {
    let now = now_ms();
    let needed = stored_bytes(bundle);
    let admission = in_write_tx!(pool, tx => {
        sqlx::query("UPDATE users SET name = name WHERE id = $1")
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        let refreshed = sqlx::query(
            "UPDATE bundle_owners SET created_at = $3 WHERE sha256 = $1 AND user_id = $2",
        )
        .bind(&bundle.sha256)
        .bind(user_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if refreshed.rows_affected() == 0 {
            let used: i64 = sqlx::query(USED_SQL)
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await?
                .try_get("used")?;
            let used = u64::try_from(used).unwrap_or(0);
            if quota > 0 && used.saturating_add(needed) > quota {
                return Ok(Admission::OverQuota { used, needed });
            }
            sqlx::query(
                "INSERT INTO bundles (sha256, files, bytes, unpacked_bytes, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING",
            )
            .bind(&bundle.sha256)
            .bind(bundle.files)
            .bind(bundle.bytes)
            .bind(bundle.unpacked_bytes)
            .bind(bundle.created_at)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO bundle_owners (sha256, user_id, created_at) VALUES ($1, $2, $3)",
            )
            .bind(&bundle.sha256)
            .bind(user_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        Admission::Admitted
    });
    Ok(admission)
}

/// Whether a bundle row exists for `sha256` (anyone holds or uses it).
pub async fn bundle_known(pool: &Pool, sha256: &str) -> StoreResult<bool> {
    let sql = "SELECT 1 AS one FROM bundles WHERE sha256 = $1";
    let known = on_pool!(pool, p => {
        sqlx::query(sql).bind(sha256).fetch_optional(p).await?.is_some()
    });
    Ok(known)
}

/// Holdings older than `cutoff` that none of their user's sessions uses, at most `limit`.
async fn stale_holdings(
    pool: &Pool,
    cutoff: i64,
    limit: i64,
) -> StoreResult<Vec<(String, String)>> {
    let sql = "SELECT o.sha256, o.user_id FROM bundle_owners o WHERE o.created_at < $1 \
               AND NOT EXISTS (SELECT 1 FROM sessions s \
                   WHERE s.bundle_id = o.sha256 AND s.user_id = o.user_id) \
               ORDER BY o.created_at LIMIT $2";
    let rows: Vec<(String, String)> = on_pool!(pool, p => {
        sqlx::query_as(sql).bind(cutoff).bind(limit).fetch_all(p).await?
    });
    Ok(rows)
}

/// Drop one holding if it is still stale: its row is locked first, then the sessions are
/// checked with the lock held (a session being created holds the same lock).
async fn drop_holding(pool: &Pool, sha256: &str, user_id: &str, cutoff: i64) -> StoreResult<bool> {
    let dropped = in_write_tx!(pool, tx => {
        let locked = sqlx::query(
            "UPDATE bundle_owners SET created_at = created_at \
             WHERE sha256 = $1 AND user_id = $2 AND created_at < $3",
        )
        .bind(sha256)
        .bind(user_id)
        .bind(cutoff)
        .execute(&mut *tx)
        .await?;
        if locked.rows_affected() == 0 {
            return Ok(false);
        }
        let used = sqlx::query("SELECT 1 AS one FROM sessions WHERE bundle_id = $1 AND user_id = $2")
            .bind(sha256)
            .bind(user_id)
            .fetch_optional(&mut *tx)
            .await?;
        if used.is_some() {
            return Ok(false);
        }
        sqlx::query("DELETE FROM bundle_owners WHERE sha256 = $1 AND user_id = $2")
            .bind(sha256)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        true
    });
    Ok(dropped)
}

/// Bundles nobody holds and no session uses, at most `limit`.
pub async fn unused_bundles(pool: &Pool, limit: i64) -> StoreResult<Vec<String>> {
    let sql = "SELECT b.sha256 FROM bundles b \
               WHERE NOT EXISTS (SELECT 1 FROM bundle_owners o WHERE o.sha256 = b.sha256) \
               AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.bundle_id = b.sha256) \
               ORDER BY b.created_at LIMIT $1";
    let rows: Vec<(String,)> = on_pool!(pool, p => {
        sqlx::query_as(sql).bind(limit).fetch_all(p).await?
    });
    Ok(rows.into_iter().map(|(sha,)| sha).collect())
}

/// Delete a bundle's row if nobody holds it and no session uses it (checked in the delete).
pub async fn delete_unused_bundle(pool: &Pool, sha256: &str) -> StoreResult<bool> {
    let deleted = in_write_tx!(pool, tx => {
        let done = sqlx::query(
            "DELETE FROM bundles WHERE sha256 = $1 \
             AND NOT EXISTS (SELECT 1 FROM bundle_owners o WHERE o.sha256 = $1) \
             AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.bundle_id = $1)",
        )
        .bind(sha256)
        .execute(&mut *tx)
        .await?;
        done.rows_affected() == 1
    });
    Ok(deleted)
}

/// Delete login links that expired or were used, and browser sessions that expired.
pub async fn purge_web_logins(pool: &Pool, now: i64) -> StoreResult<(u64, u64)> {
    let links = "DELETE FROM web_login_links WHERE expires_at <= $1 OR used_at IS NOT NULL";
    let sessions = "DELETE FROM web_sessions WHERE expires_at <= $1";
    on_pool!(pool, p => {
        let links = sqlx::query(links).bind(now).execute(p).await?.rows_affected();
        let sessions = sqlx::query(sessions).bind(now).execute(p).await?.rows_affected();
        Ok((links, sessions))
    })
}

/// Most rows one pass looks at per kind; the next pass takes the rest.
const BATCH: i64 = 1000;

/// One pass of the database side of retention at `now`: stale holdings (older than
/// `grace_ms`) are dropped, then bundles nobody holds or uses are deleted and returned, then
/// expired logins. Bundles the caller says are busy (`busy(sha)`, an upload in flight) stay.
pub async fn collect(
    pool: &Pool,
    now: i64,
    grace_ms: i64,
    busy: &(dyn for<'s> Fn(&'s str) -> bool + Sync),
) -> StoreResult<Collected> {
    let cutoff = now.saturating_sub(grace_ms);
    let mut out = Collected::default();
    for (sha, user) in stale_holdings(pool, cutoff, BATCH).await? {
        if drop_holding(pool, &sha, &user, cutoff).await? {
            out.holdings += 1;
        }
    }
    for sha in unused_bundles(pool, BATCH).await? {
        if busy(&sha) {
            continue;
        }
        match delete_unused_bundle(pool, &sha).await {
            Ok(true) => out.bundles.push(sha),
            Ok(false) => {}
            // Someone took hold of it while we deleted (PostgreSQL checks the reference
            // after the delete's own snapshot): it stays.
            Err(super::StoreError::Database(sqlx::Error::Database(e)))
                if e.is_foreign_key_violation() => {}
            Err(e) => return Err(e),
        }
    }
    (out.links, out.web_sessions) = purge_web_logins(pool, now).await?;
    Ok(out)
}
