//! The tree and archive of a bundle this server materialised from a manifest
//! (docs/ARCHITECTURE.md §5.1): once the upload answered, the tree's files are linked and it
//! is published, then its archive is written and sent to the blob store, so runners and other
//! replicas reach it like any uploaded bundle. Whoever needs either before the job is done
//! waits for it: on this replica by holding the bundle (one maker at a time), on another by
//! watching the blob store for a while.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::{BlobError, BlobStore, bundle_key_as};
use ultraplan_bundle::incremental::{self, TreeManifest};
use ultraplan_bundle::{self as bundles, BundleEncoding};

/// How long a reader of a materialised bundle waits for its archive to reach the blob store.
pub const ARCHIVE_WAIT: Duration = Duration::from_secs(60);

/// One lock per bundle whose archive this process may be making.
fn lock_of(id: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    locks.retain(|_, lock| Arc::strong_count(lock) > 1);
    Arc::clone(locks.entry(id.to_owned()).or_default())
}

/// Hold bundle `id` while its tree and archive are made here: whoever needs either waits.
pub async fn hold(id: &str) -> tokio::sync::OwnedMutexGuard<()> {
    lock_of(id).lock_owned().await
}

/// Whether this process is making bundle `id`'s tree or archive now.
pub fn busy(id: &str) -> bool {
    lock_of(id).try_lock().is_err()
}

/// Build a tree whose upload was answered (lay it out if it is not yet, link its files) and
/// publish it, then make its archive, in the background, holding the bundle throughout
/// (`held`, from [`hold`]).
pub fn spawn_build(
    blobs: BlobStore,
    bundles_dir: PathBuf,
    id: String,
    pending: incremental::Pending,
    held: tokio::sync::OwnedMutexGuard<()>,
) {
    tokio::spawn(async move {
        let _held = held;
        let root = bundles_dir.clone();
        let built = tokio::task::spawn_blocking(move || pending.finish(&root)).await;
        match built {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::error!(sha256 = %id, %error, "could not build a materialised bundle's tree");
                return;
            }
            Err(error) => {
                tracing::error!(sha256 = %id, %error, "the tree build stopped");
                return;
            }
        }
        if let Err(error) = make(&blobs, &bundles_dir, &id).await {
            tracing::error!(sha256 = %id, %error, "could not store a materialised bundle's archive");
        }
    });
}

/// `true` once bundle `id`'s archive is in the blob store: there already, or made now from
/// the tree this replica materialised (waiting for a build in progress). `false` when this
/// replica has no such tree.
pub async fn ensure(blobs: &BlobStore, bundles_dir: &Path, id: &str) -> Result<bool, BlobError> {
    let _held = hold(id).await;
    make(blobs, bundles_dir, id).await
}

async fn make(blobs: &BlobStore, bundles_dir: &Path, id: &str) -> Result<bool, BlobError> {
    if blobs.find_bundle(id).await?.is_some() {
        return Ok(true);
    }
    let (root, owned) = (bundles_dir.to_path_buf(), id.to_owned());
    let written = tokio::task::spawn_blocking(move || write_local(&root, &owned))
        .await
        .map_err(|e| BlobError::Task(e.to_string()))?;
    let archive = match written {
        Ok(Some(archive)) => archive,
        Ok(None) => return Ok(false),
        Err(source) => {
            return Err(BlobError::Local {
                action: "writing",
                path: bundles::archive_path_as(bundles_dir, id, BundleEncoding::Zstd)
                    .display()
                    .to_string(),
                source,
            });
        }
    };
    let key = bundle_key_as(id, BundleEncoding::Zstd);
    let sent = blobs.put_file_streaming(&key, &archive).await?;
    tracing::info!(sha256 = id, bytes = sent, location = %blobs.location(),
        "materialised bundle's archive in the blob store");
    Ok(true)
}

/// Write the archive from the local tree and its manifest; `None` when this replica did not
/// materialise bundle `id` (or no longer has it).
fn write_local(root: &Path, id: &str) -> std::io::Result<Option<PathBuf>> {
    let bytes = match std::fs::read(incremental::tree_manifest_path(root, id)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(manifest) = TreeManifest::from_bytes(&bytes).filter(|m| m.bundle_id() == id) else {
        return Ok(None);
    };
    if !bundles::tree_exists(root, id) {
        return Ok(None);
    }
    incremental::write_archive(root, id, &manifest).map(Some)
}

/// The encoding bundle `id`'s archive is stored in, waiting up to `wait` for a materialised
/// bundle's archive to arrive (made here at once when this replica has its tree).
pub async fn find_or_wait(
    blobs: &BlobStore,
    bundles_dir: &Path,
    id: &str,
    wait: Duration,
) -> Result<Option<BundleEncoding>, BlobError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if let Some(found) = blobs.find_bundle(id).await? {
            return Ok(Some(found));
        }
        if ensure(blobs, bundles_dir, id).await? {
            return blobs.find_bundle(id).await;
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(None);
        }
        // Another replica writes the archive to a store that sends no event: poll it.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
