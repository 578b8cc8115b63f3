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

use super::backend::{
    Arg::{Int, Text},
    Backend, Conn,
};
use super::{BundleRow, StoreResult, now_ms};

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
pub async fn bytes_used(c: &mut dyn Conn, user_id: &str) -> StoreResult<u64> {
    let used = c.fetch_one(USED_SQL, &[Text(user_id)]).await?.int("used")?;
    Ok(u64::try_from(used).unwrap_or(0))
}

/// Record that `user_id` holds `bundle`, unless that takes them over `quota` bytes (0: no
/// limit). Holding it already only refreshes the holding's age. Concurrent uploads of one
/// user are serialised on their user row, so together they cannot pass the quota either.
pub async fn put_within_quota(
    db: &dyn Backend,
    user_id: &str,
    bundle: &BundleRow,
    quota: u64,
) -> StoreResult<Admission> {
    let now = now_ms();
    let needed = stored_bytes(bundle);
    let mut tx = db.write_tx().await?;
    let c = tx.conn();
    c.execute(
        "UPDATE users SET name = name WHERE id = $1",
        &[Text(user_id)],
    )
    .await?;
    let refreshed = c
        .execute(
            "UPDATE bundle_owners SET created_at = $3 WHERE sha256 = $1 AND user_id = $2",
            &[Text(&bundle.sha256), Text(user_id), Int(now)],
        )
        .await?;
    if refreshed == 0 {
        let used = bytes_used(c, user_id).await?;
        if quota > 0 && used.saturating_add(needed) > quota {
            return Ok(Admission::OverQuota { used, needed });
        }
        super::sql::insert_bundle(c, bundle).await?;
        c.execute(
            "INSERT INTO bundle_owners (sha256, user_id, created_at) VALUES ($1, $2, $3)",
            &[Text(&bundle.sha256), Text(user_id), Int(now)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Admission::Admitted)
}

/// Whether a bundle row exists for `sha256` (anyone holds or uses it).
pub async fn bundle_known(c: &mut dyn Conn, sha256: &str) -> StoreResult<bool> {
    let sql = "SELECT 1 AS one FROM bundles WHERE sha256 = $1";
    Ok(c.fetch_optional(sql, &[Text(sha256)]).await?.is_some())
}

/// Holdings older than `cutoff` that none of their user's sessions uses, at most `limit`.
async fn stale_holdings(
    c: &mut dyn Conn,
    cutoff: i64,
    limit: i64,
) -> StoreResult<Vec<(String, String)>> {
    let sql = "SELECT o.sha256, o.user_id FROM bundle_owners o WHERE o.created_at < $1 \
               AND NOT EXISTS (SELECT 1 FROM sessions s \
                   WHERE s.bundle_id = o.sha256 AND s.user_id = o.user_id) \
               ORDER BY o.created_at LIMIT $2";
    let rows = c.fetch_all(sql, &[Int(cutoff), Int(limit)]).await?;
    rows.iter()
        .map(|r| Ok((r.text("sha256")?, r.text("user_id")?)))
        .collect()
}

/// Drop one holding if it is still stale: its row is locked first, then the sessions are
/// checked with the lock held (a session being created holds the same lock).
async fn drop_holding(
    db: &dyn Backend,
    sha256: &str,
    user_id: &str,
    cutoff: i64,
) -> StoreResult<bool> {
    let mut tx = db.write_tx().await?;
    let c = tx.conn();
    let locked = c
        .execute(
            "UPDATE bundle_owners SET created_at = created_at \
             WHERE sha256 = $1 AND user_id = $2 AND created_at < $3",
            &[Text(sha256), Text(user_id), Int(cutoff)],
        )
        .await?;
    if locked == 0 {
        return Ok(false);
    }
    let used = c
        .fetch_optional(
            "SELECT 1 AS one FROM sessions WHERE bundle_id = $1 AND user_id = $2",
            &[Text(sha256), Text(user_id)],
        )
        .await?;
    if used.is_some() {
        return Ok(false);
    }
    c.execute(
        "DELETE FROM bundle_owners WHERE sha256 = $1 AND user_id = $2",
        &[Text(sha256), Text(user_id)],
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Bundles nobody holds and no session uses, at most `limit`.
async fn unused_bundles(c: &mut dyn Conn, limit: i64) -> StoreResult<Vec<String>> {
    let sql = "SELECT b.sha256 FROM bundles b \
               WHERE NOT EXISTS (SELECT 1 FROM bundle_owners o WHERE o.sha256 = b.sha256) \
               AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.bundle_id = b.sha256) \
               ORDER BY b.created_at LIMIT $1";
    let rows = c.fetch_all(sql, &[Int(limit)]).await?;
    rows.iter().map(|r| r.text("sha256")).collect()
}

/// Delete a bundle's row if nobody holds it and no session uses it (checked in the delete).
async fn delete_unused_bundle(db: &dyn Backend, sha256: &str) -> StoreResult<bool> {
    let mut tx = db.write_tx().await?;
    let done = tx
        .conn()
        .execute(
            "DELETE FROM bundles WHERE sha256 = $1 \
             AND NOT EXISTS (SELECT 1 FROM bundle_owners o WHERE o.sha256 = $1) \
             AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.bundle_id = $1)",
            &[Text(sha256)],
        )
        .await?;
    tx.commit().await?;
    Ok(done == 1)
}

/// Delete login links that expired or were used, and browser sessions that expired.
async fn purge_web_logins(c: &mut dyn Conn, now: i64) -> StoreResult<(u64, u64)> {
    let links = c
        .execute(
            "DELETE FROM web_login_links WHERE expires_at <= $1 OR used_at IS NOT NULL",
            &[Int(now)],
        )
        .await?;
    let sessions = c
        .execute(
            "DELETE FROM web_sessions WHERE expires_at <= $1",
            &[Int(now)],
        )
        .await?;
    Ok((links, sessions))
}

/// Most rows one pass looks at per kind; the next pass takes the rest.
const BATCH: i64 = 1000;

/// One pass of the database side of retention at `now`: stale holdings (older than
/// `grace_ms`) are dropped, then bundles nobody holds or uses are deleted and returned, then
/// expired logins. Bundles the caller says are busy (`busy(sha)`, an upload in flight) stay.
pub async fn collect(
    db: &dyn Backend,
    now: i64,
    grace_ms: i64,
    busy: &(dyn for<'s> Fn(&'s str) -> bool + Sync),
) -> StoreResult<Collected> {
    let cutoff = now.saturating_sub(grace_ms);
    let mut out = Collected::default();
    for (sha, user) in stale_holdings(&mut *db.pool(), cutoff, BATCH).await? {
        if drop_holding(db, &sha, &user, cutoff).await? {
            out.holdings += 1;
        }
    }
    for sha in unused_bundles(&mut *db.pool(), BATCH).await? {
        if busy(&sha) {
            continue;
        }
        match delete_unused_bundle(db, &sha).await {
            Ok(true) => out.bundles.push(sha),
            Ok(false) => {}
            // Someone took hold of it while we deleted (PostgreSQL checks the reference
            // after the delete's own snapshot): it stays.
            Err(super::StoreError::Database(sqlx::Error::Database(e)))
                if e.is_foreign_key_violation() => {}
            Err(e) => return Err(e),
        }
    }
    (out.links, out.web_sessions) = purge_web_logins(&mut *db.pool(), now).await?;
    Ok(out)
}
