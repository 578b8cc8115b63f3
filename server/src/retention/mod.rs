//! Retention: a periodic pass deletes what nothing needs any more, and a per-user quota
//! bounds what bundles may take.
//!
//! - A bundle is kept while any session uses it (archived sessions included: sessions are
//!   never deleted) and for a grace period after each upload of it, so a bundle uploaded for
//!   a session about to be created survives. A bundle nobody holds any more is deleted: its
//!   database rows, its unpacked tree `<data>/bundles/<sha>/` and its archive
//!   `<data>/bundles/<sha>.tar.gz`. Files in the bundle store that no row knows (left by a
//!   crash) go too once they are older than the grace period.
//! - Login links that expired or were used, and expired browser sessions, are deleted.
//! - The rules the database side follows, and why a session being created never loses its
//!   bundle, are in the store (`store/retention.rs`).

mod quota;
mod registry;

use std::path::Path;

pub use quota::{Quota, QuotaError, human_bytes, parse_size, quota_message};

use crate::core::Core;
use crate::store::StoreError;

/// What one pass removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Users' holdings of bundles dropped.
    pub holdings: u64,
    /// Bundles deleted (rows and files).
    pub bundles: u64,
    /// Files or trees removed from the bundle store that no bundle row knew.
    pub orphans: u64,
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
        }
        swept.bundles += 1;
    }
    swept.orphans = sweep_orphans(state, &root, now.saturating_sub(grace_ms)).await?;
    if swept != Swept::default() {
        tracing::info!(
            holdings = swept.holdings,
            bundles = swept.bundles,
            orphans = swept.orphans,
            links = swept.links,
            web_sessions = swept.web_sessions,
            "retention pass"
        );
    }
    Ok(swept)
}

/// Remove a bundle's tree and archive (what is missing already is fine).
pub(crate) async fn remove_files(root: &Path, sha: &str) {
    if !crate::bundles::is_valid_sha256(sha) {
        return;
    }
    let dir = crate::bundles::bundle_dir(root, sha);
    let archive = crate::bundles::archive_path(root, sha);
    let removed = tokio::task::spawn_blocking(move || {
        let tree = match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        let file = match std::fs::remove_file(&archive) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        tree.and(file)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r);
    if let Err(error) = removed {
        tracing::error!(sha256 = sha, %error, "cannot remove a deleted bundle's files");
    }
}

/// Bundle ids with files in the store that are older than `cutoff` (ms).
fn stored_ids(root: &Path, cutoff: i64) -> std::io::Result<Vec<String>> {
    let mut ids = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ids),
        other => other?,
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let sha = name.strip_suffix(".tar.gz").unwrap_or(&name);
        if !crate::bundles::is_valid_sha256(sha) {
            continue;
        }
        let modified = entry.metadata()?.modified()?;
        let age_ms = modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        if age_ms < cutoff && !ids.iter().any(|id| id == sha) {
            ids.push(sha.to_owned());
        }
    }
    Ok(ids)
}

/// Remove stored files of bundles no row knows, once older than `cutoff` and not uploading.
async fn sweep_orphans(state: &Core, root: &Path, cutoff: i64) -> Result<u64, StoreError> {
    let dir = root.to_path_buf();
    let ids = tokio::task::spawn_blocking(move || stored_ids(&dir, cutoff))
        .await
        .map_err(|e| StoreError::Corrupt(format!("listing the bundle store failed: {e}")))?
        .map_err(|e| StoreError::Corrupt(format!("cannot list the bundle store: {e}")))?;
    let mut removed = 0;
    for sha in ids {
        let Some(_deleting) = registry::Deleting::begin(root, &sha) else {
            continue;
        };
        if state.store.bundle_known(&sha).await? {
            continue;
        }
        tracing::warn!(sha256 = %sha, "removing bundle files no bundle row knows");
        remove_files(root, &sha).await;
        removed += 1;
    }
    Ok(removed)
}
