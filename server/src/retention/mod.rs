//! Retention: a periodic pass deletes what nothing needs any more, and a per-user quota
//! bounds what bundles may take.
//!
//! - A bundle is kept while any session uses it (archived sessions included: sessions are
//!   never deleted) and for a grace period after each upload of it, so a bundle uploaded for
//!   a session about to be created survives. A bundle nobody holds any more is deleted: its
//!   database rows, its blob `bundles/<sha>.tar.gz` in the blob store, and this server's
//!   cached copy (the unpacked tree `<data>/bundles/<sha>/` and the archive
//!   `<data>/bundles/<sha>.tar.gz`). Files in the bundle store and blobs that no row knows
//!   (left by a crash, another replica's cache, a refused upload) go too once they are older
//!   than the grace period.
//! - Login links that expired or were used, and expired browser sessions, are deleted.
//! - The rules the database side follows, and why a session being created never loses its
//!   bundle, are in the store (`store/retention.rs`).

mod orphans;
mod quota;

use std::path::Path;

pub use quota::{Quota, QuotaError, human_bytes, parse_size, quota_message};

use crate::core::Core;
use crate::store::StoreError;
use ultraplan_bundle::registry;

/// What one pass removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Users' holdings of bundles dropped.
    pub holdings: u64,
    /// Bundles deleted (rows and files).
    pub bundles: u64,
    /// Files or trees removed from the bundle store that no bundle row knew.
    pub orphans: u64,
    /// Blobs removed from the blob store that no bundle row knew.
    pub orphan_blobs: u64,
    /// Files of resumable uploads untouched for a day, and of incremental bundles (manifests
    /// unused for a week, contents no tree links), removed.
    pub partial_uploads: u64,
    /// Login links deleted.
    pub links: u64,
    /// Browser sessions deleted.
    pub web_sessions: u64,
}

/// Start the periodic pass (unless its interval is zero); it runs once at once, then every
/// interval, for the life of the runtime.
pub fn spawn(state: Core) -> Option<tokio::task::JoinHandle<()>> {
    let every = state.config.retention.interval;
    if every.is_zero() {
        tracing::info!("retention is off (interval 0): nothing is garbage-collected");
        return None;
    }
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Err(error) = sweep(&state, crate::store::now_ms()).await {
                tracing::warn!(%error, "retention pass failed; retrying at the next interval");
            }
        }
    }))
}

/// One pass as of `now` (ms since the epoch).
pub async fn sweep(state: &Core, now: i64) -> Result<Swept, StoreError> {
    let root = state.config.bundles_dir();
    let grace_ms =
        i64::try_from(state.config.retention.bundle_grace.as_millis()).unwrap_or(i64::MAX);
    let busy_root = root.clone();
    let busy = move |sha: &str| registry::uploading(&busy_root, sha);
    let collected = state.store.collect_garbage(now, grace_ms, &busy).await?;
    let mut swept = Swept {
        holdings: collected.holdings,
        links: collected.links,
        web_sessions: collected.web_sessions,
        ..Swept::default()
    };
    for sha in &collected.bundles {
        if let Some(_deleting) = registry::Deleting::begin(&root, sha) {
            remove_files(&root, sha).await;
            remove_blob(state, sha).await;
        }
        swept.bundles += 1;
    }
    let cutoff = now.saturating_sub(grace_ms);
    swept.orphans = orphans::sweep_files(state, &root, cutoff).await?;
    swept.orphan_blobs = orphans::sweep_blobs(state, &root, cutoff).await?;
    let partials_root = root.clone();
    swept.partial_uploads = tokio::task::spawn_blocking(move || {
        let partials = ultraplan_bundle::partial::sweep(
            &partials_root,
            ultraplan_bundle::partial::PARTIAL_TTL,
        );
        let incremental = ultraplan_bundle::incremental::sweep(
            &partials_root,
            ultraplan_bundle::incremental::TTL,
        );
        partials + incremental
    })
    .await
    .map_or(0, |n| u64::try_from(n).unwrap_or(u64::MAX));
    if swept != Swept::default() {
        tracing::info!(
            holdings = swept.holdings,
            bundles = swept.bundles,
            orphans = swept.orphans,
            orphan_blobs = swept.orphan_blobs,
            partial_uploads = swept.partial_uploads,
            links = swept.links,
            web_sessions = swept.web_sessions,
            "retention pass"
        );
    }
    Ok(swept)
}

/// Remove a bundle's tree and archive (what is missing already is fine).
pub(crate) async fn remove_files(root: &Path, sha: &str) {
    if !ultraplan_bundle::is_valid_sha256(sha) {
        return;
    }
    let dir = ultraplan_bundle::bundle_dir(root, sha);
    let archive = ultraplan_bundle::archive_path(root, sha);
    let manifest = ultraplan_bundle::incremental::tree_manifest_path(root, sha);
    let removed = tokio::task::spawn_blocking(move || {
        let tree = match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        let file = match std::fs::remove_file(&archive) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        let _ = std::fs::remove_file(&manifest);
        tree.and(file)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r);
    if let Err(error) = removed {
        tracing::error!(sha256 = sha, %error, "cannot remove a deleted bundle's files");
    }
}

/// Delete a bundle's blob; a failure is logged, and the orphan sweep retries it later.
pub(crate) async fn remove_blob(state: &Core, sha: &str) {
    let deleted = match state.config.blobs() {
        Ok(blobs) => blobs.delete_bundle(sha).await,
        Err(error) => Err(error),
    };
    if let Err(error) = deleted {
        tracing::error!(sha256 = sha, %error, "cannot delete a deleted bundle's blob");
    }
}
