//! Bundles and who holds them (quota and retention are in `store::retention`).

use super::super::backend::{Arg::Text, Conn};
use super::super::{BundleRow, StoreError, StoreResult, now_ms};

/// Record a bundle (if new) and that `user_id` holds it (if not yet).
pub async fn put(c: &mut dyn Conn, user_id: &str, b: &BundleRow) -> StoreResult<()> {
    insert(c, b).await?;
    c.execute(
        "INSERT INTO bundle_owners (sha256, user_id, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT (sha256, user_id) DO NOTHING",
        &[Text(&b.sha256), Text(user_id), now_ms().into()],
    )
    .await?;
    Ok(())
}

/// Insert the bundle's row unless it exists.
pub async fn insert(c: &mut dyn Conn, b: &BundleRow) -> StoreResult<()> {
    c.execute(
        "INSERT INTO bundles (sha256, files, bytes, unpacked_bytes, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING",
        &[
            Text(&b.sha256),
            b.files.into(),
            b.bytes.into(),
            b.unpacked_bytes.into(),
            b.created_at.into(),
        ],
    )
    .await?;
    Ok(())
}

pub async fn owned(
    c: &mut dyn Conn,
    user_id: &str,
    sha256: &str,
) -> StoreResult<Option<BundleRow>> {
    let sql = "SELECT b.sha256, b.files, b.bytes, b.unpacked_bytes, b.created_at \
               FROM bundles b JOIN bundle_owners o ON o.sha256 = b.sha256 \
               WHERE o.user_id = $1 AND b.sha256 = $2";
    let row = c
        .fetch_optional(sql, &[Text(user_id), Text(sha256)])
        .await?;
    row.map(|r| {
        Ok(BundleRow {
            sha256: r.text("sha256")?,
            files: r.int("files")?,
            bytes: r.int("bytes")?,
            unpacked_bytes: r.int("unpacked_bytes")?,
            created_at: r.int("created_at")?,
        })
    })
    .transpose()
}

/// Take the row lock of `user_id`'s holding of `bundle` for a session about to use it;
/// retention drops a holding only under the same lock after checking for sessions, so the
/// two never cross. The bundle is gone (or was never held): not found.
pub async fn hold(c: &mut dyn Conn, user_id: &str, bundle: &str) -> StoreResult<()> {
    let held = c
        .execute(
            "UPDATE bundle_owners SET created_at = created_at WHERE sha256 = $1 AND user_id = $2",
            &[Text(bundle), Text(user_id)],
        )
        .await?;
    if held == 0 {
        return Err(StoreError::NotFound("bundle"));
    }
    Ok(())
}
