//! Stored bytes no bundle row knows: files in this server's bundle store and blobs in the
//! blob store, left by a crash, by a refused upload, or cached here for a bundle another
//! replica deleted. Each goes once it is older than the grace period and no upload of it is
//! in flight in this process.

use std::path::Path;

use crate::blobs::{BlobStore, bundle_of_key};
use crate::core::Core;
use crate::store::StoreError;
use ultraplan_bundle::{self as bundles, registry};

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
        let sha = [".tar.gz", ".tar.zst", ".tree"]
            .iter()
            .find_map(|ext| name.strip_suffix(ext))
            .unwrap_or(&name);
        if !bundles::is_valid_sha256(sha) {
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
pub(super) async fn sweep_files(state: &Core, root: &Path, cutoff: i64) -> Result<u64, StoreError> {
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
        super::remove_files(root, &sha).await;
        removed += 1;
    }
    Ok(removed)
}

/// Delete bundle blobs no row knows, once older than `cutoff` and not uploading here. A
/// blob store that cannot be listed is logged and left for the next pass.
pub(super) async fn sweep_blobs(state: &Core, root: &Path, cutoff: i64) -> Result<u64, StoreError> {
    let listed = match state.config.blobs() {
        Ok(blobs) => blobs.list("bundles").await.map(|l| (blobs, l)),
        Err(error) => Err(error),
    };
    let (blobs, listed) = match listed {
        Ok(found) => found,
        Err(error) => {
            tracing::warn!(%error, "cannot list the blob store; its orphans wait for the next pass");
            return Ok(0);
        }
    };
    let mut removed = 0;
    for blob in listed.iter().filter(|b| b.modified_ms < cutoff) {
        let Some(sha) = bundle_of_key(&blob.key) else {
            continue;
        };
        if remove_orphan_blob(state, &blobs, root, sha).await? {
            removed += 1;
        }
    }
    Ok(removed)
}

async fn remove_orphan_blob(
    state: &Core,
    blobs: &BlobStore,
    root: &Path,
    sha: &str,
) -> Result<bool, StoreError> {
    let Some(_deleting) = registry::Deleting::begin(root, sha) else {
        return Ok(false);
    };
    if state.store.bundle_known(sha).await? {
        return Ok(false);
    }
    tracing::warn!(sha256 = %sha, location = %blobs.location(), "deleting a bundle blob no bundle row knows");
    match blobs.delete_bundle(sha).await {
        Ok(()) => Ok(true),
        Err(error) => {
            tracing::warn!(sha256 = %sha, %error, "cannot delete an orphan blob");
            Ok(false)
        }
    }
}
