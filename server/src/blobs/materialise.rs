//! Rebuild a bundle's unpacked tree from its archive in the blob store, when this server has
//! no copy (another replica received the upload, or the cache was cleared).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::io::{StreamReader, SyncIoBridge};

use super::tree_archive::{ARCHIVE_WAIT, find_or_wait};
use super::{BlobError, BlobStore, bundle_key_as};
use ultraplan_bundle::registry::Uploading;
use ultraplan_bundle::{self as bundles, BundleLimits};

/// The path of bundle `sha`'s unpacked tree under `bundles_dir`, unpacking it from the blob
/// store first when it is not there.
///
/// The archive is streamed from the store through the same validating ingestion an upload
/// goes through, sha256 check included (or, for a bundle materialised from a manifest, the
/// unpacked tree's id): bytes changed in the store are refused
/// ([`BlobError::Damaged`]) and leave nothing behind. Nothing is held in memory beyond a
/// chunk. Concurrent calls for one bundle are safe: the first to publish wins and the others
/// keep its tree.
pub async fn ensure_bundle_tree(
    blobs: &BlobStore,
    bundles_dir: &Path,
    sha: &str,
    limits: &BundleLimits,
) -> Result<PathBuf, BlobError> {
    unpack(blobs, bundles_dir, sha, limits, Duration::ZERO).await
}

/// [`ensure_bundle_tree`] for a bundle a session holds, so it exists: when its archive is
/// not in the blob store yet (a bundle another replica materialised moments ago), wait for it
/// up to [`ARCHIVE_WAIT`].
pub async fn ensure_session_bundle_tree(
    blobs: &BlobStore,
    bundles_dir: &Path,
    sha: &str,
    limits: &BundleLimits,
) -> Result<PathBuf, BlobError> {
    unpack(blobs, bundles_dir, sha, limits, ARCHIVE_WAIT).await
}

async fn unpack(
    blobs: &BlobStore,
    bundles_dir: &Path,
    sha: &str,
    limits: &BundleLimits,
    wait: Duration,
) -> Result<PathBuf, BlobError> {
    if !bundles::is_valid_sha256(sha) {
        return Err(BlobError::InvalidId(sha.chars().take(80).collect()));
    }
    let dir = bundles::bundle_dir(bundles_dir, sha);
    if tree_present(bundles_dir, sha).await {
        return Ok(dir);
    }
    // Registered like an upload, so a retention pass leaves the files alone meanwhile.
    let _unpacking = Uploading::begin(bundles_dir, sha).await;
    if tree_present(bundles_dir, sha).await {
        return Ok(dir);
    }
    // The key names the encoding; with neither stored, the gzip key's "not found" is the answer.
    let found = find_or_wait(blobs, bundles_dir, sha, wait).await?;
    // A tree materialised here may have been finished while we waited.
    if tree_present(bundles_dir, sha).await {
        return Ok(dir);
    }
    let encoding = found.unwrap_or(bundles::BundleEncoding::Gzip);
    let key = bundle_key_as(sha, encoding);
    let stream = blobs.get_stream(&key).await?;
    let reader = SyncIoBridge::new(StreamReader::new(stream));
    let (root, owned_sha, limits) = (bundles_dir.to_path_buf(), sha.to_owned(), limits.clone());
    let ingested = tokio::task::spawn_blocking(move || {
        bundles::ingest_bundle_verified(reader, Some(encoding), &owned_sha, &root, &limits)
    })
    .await
    .map_err(|e| BlobError::Task(e.to_string()))?;
    let location = blobs.location().to_string();
    match ingested {
        Ok(stats) => {
            tracing::info!(sha256 = sha, files = stats.files, %location,
                "bundle tree unpacked from the blob store");
            Ok(dir)
        }
        Err(bundles::BundleError::Upload(source)) => Err(BlobError::Interrupted {
            location,
            key,
            source,
        }),
        Err(source) if source.is_client_error() => {
            tracing::error!(sha256 = sha, %location, error = %source,
                "the blob store holds a damaged bundle");
            Err(BlobError::Damaged {
                sha: sha.to_owned(),
                location,
                source,
            })
        }
        Err(source) => Err(BlobError::Unpack {
            sha: sha.to_owned(),
            location,
            source,
        }),
    }
}

async fn tree_present(bundles_dir: &Path, sha: &str) -> bool {
    let (root, sha) = (bundles_dir.to_path_buf(), sha.to_owned());
    tokio::task::spawn_blocking(move || bundles::tree_exists(&root, &sha))
        .await
        .unwrap_or(false)
}
