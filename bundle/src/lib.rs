//! The bundle store: streaming ingestion of uploaded repository bundles (gzip'd or zstd'd tar) with
//! hostile-archive-safe extraction (docs/ARCHITECTURE.md §3.1 `PUT /v1/bundles/{sha256}`, §6.1).
//!
//! Layout under `store_root`:
//! - `<sha>/`: the extracted tree (dirs 0755, files 0644 or 0755, relative symlinks that stay
//!   inside, hard links);
//! - `<sha>.tar.gz` or `<sha>.tar.zst`: the upload as received (one of them: the id is the
//!   sha256 of the compressed bytes, so one id has one encoding);
//! - `.staging/<unique>/`: in-flight uploads, removed when they finish, whatever the outcome.
//!
//! Everything here is blocking; call it from `tokio::task::spawn_blocking`. Linux/Unix only.

mod encoding;
mod error;
mod extract;
pub mod incremental;
mod limits;
mod links;
pub mod partial;
mod paths;
pub mod registry;
mod staging;
mod stream;
mod tree;

#[cfg(test)]
mod tests;

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub use encoding::BundleEncoding;
pub use error::{BundleError, is_storage_full};
pub use limits::{BundleLimits, BundleStats};

use encoding::Decoder;
use error::display_path;
use extract::Extractor;
use limits::MAX_TRAILING_BYTES;
use staging::Staging;
use stream::{Guard, Shared, Tee, stream_error};

/// `true` for 64 lowercase hex characters (the form bundle ids take).
pub fn is_valid_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Where the extracted tree of bundle `sha` lives. Does not validate `sha`: check it with
/// [`is_valid_sha256`] first.
pub fn bundle_dir(store_root: &Path, sha: &str) -> PathBuf {
    store_root.join(sha)
}

/// Where the uploaded archive of bundle `sha` is kept if it is compressed as `encoding`.
/// Does not validate `sha`.
pub fn archive_path_as(store_root: &Path, sha: &str, encoding: BundleEncoding) -> PathBuf {
    store_root.join(format!("{sha}.{}", encoding.extension()))
}

/// Where the uploaded archive of bundle `sha` is: the path of whichever encoding's archive
/// exists, else the gzip path. Does not validate `sha`. Blocking (it looks at the disk).
pub fn archive_path(store_root: &Path, sha: &str) -> PathBuf {
    BundleEncoding::ALL
        .iter()
        .map(|&encoding| archive_path_as(store_root, sha, encoding))
        .find(|path| fs::symlink_metadata(path).is_ok_and(|m| m.is_file()))
        .unwrap_or_else(|| archive_path_as(store_root, sha, BundleEncoding::Gzip))
}

/// `true` when bundle `sha`'s unpacked tree is in this store (the local cache of the blob).
/// `false` for invalid ids.
pub fn tree_exists(store_root: &Path, sha: &str) -> bool {
    is_valid_sha256(sha)
        && fs::symlink_metadata(bundle_dir(store_root, sha)).is_ok_and(|m| m.is_dir())
}

/// `true` when bundle `sha` is fully stored (tree and archive). `false` for invalid ids.
pub fn bundle_exists(store_root: &Path, sha: &str) -> bool {
    is_valid_sha256(sha)
        && fs::symlink_metadata(bundle_dir(store_root, sha)).is_ok_and(|m| m.is_dir())
        && BundleEncoding::ALL.iter().any(|&encoding| {
            fs::symlink_metadata(archive_path_as(store_root, sha, encoding))
                .is_ok_and(|m| m.is_file())
        })
}

/// Receive one bundle upload whose encoding is told by its magic bytes (gzip when they are
/// neither's); see [`ingest_bundle_as`].
pub fn ingest_bundle<R: Read>(
    reader: R,
    expected_sha256: &str,
    store_root: &Path,
    limits: &BundleLimits,
) -> Result<BundleStats, BundleError> {
    ingest_bundle_as(reader, None, expected_sha256, store_root, limits)
}

/// Receive one bundle upload.
///
/// Streams `reader` (a gzip'd tar, possibly several concatenated gzip members, or a zstd'd
/// tar, possibly several frames) while hashing
/// the raw bytes and copying them aside; validates every entry as it arrives and unpacks it
/// into a fresh staging dir; drains the stream and compares its sha256 to `expected_sha256`;
/// then renames the tree to `<store_root>/<sha>/` and the archive to `<store_root>/<sha>.tar.gz`
/// (or `.tar.zst`). `declared` is the encoding the upload says it has: magic bytes of the other
/// encoding are refused ([`BundleError::EncodingMismatch`]); `None` lets the magic bytes decide.
/// If another upload of the same sha got there first, theirs is kept and this still returns
/// `Ok`. On any error everything this call created is removed. `store_root` is created if
/// missing (and never removed).
///
/// On a refusal the reader is *not* drained: the caller drops the rest of the body.
pub fn ingest_bundle_as<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    expected_sha256: &str,
    store_root: &Path,
    limits: &BundleLimits,
) -> Result<BundleStats, BundleError> {
    ingest(
        reader,
        declared,
        expected_sha256,
        store_root,
        limits,
        Names::Archive,
    )
}

/// Receive a bundle fetched by its id (from the blob store, or by a runner from its server):
/// as [`ingest_bundle_as`], except that the id may also name the unpacked tree (a bundle the
/// server materialised from a manifest: the id is its [`incremental::TreeManifest::bundle_id`]),
/// so either the archive's sha256 or the tree's manifest must match it.
pub fn ingest_bundle_verified<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    id: &str,
    store_root: &Path,
    limits: &BundleLimits,
) -> Result<BundleStats, BundleError> {
    ingest(
        reader,
        declared,
        id,
        store_root,
        limits,
        Names::ArchiveOrTree,
    )
}

/// What a bundle id may be the hash of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Names {
    Archive,
    ArchiveOrTree,
}

fn ingest<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    expected_sha256: &str,
    store_root: &Path,
    limits: &BundleLimits,
    names: Names,
) -> Result<BundleStats, BundleError> {
    if !is_valid_sha256(expected_sha256) {
        let shown = display_path(expected_sha256.as_bytes());
        tracing::warn!(code = "invalid_sha256", sha = ?shown, "bundle upload refused");
        return Err(BundleError::InvalidSha256(shown));
    }
    let span = tracing::info_span!("bundle_ingest", sha = %expected_sha256);
    let _entered = span.enter();

    let outcome = fs::create_dir_all(store_root)
        .map_err(|e| BundleError::io("creating the bundle store", e))
        .and_then(|()| Staging::create(store_root, expected_sha256))
        .and_then(|staging| {
            let stats = receive(reader, declared, expected_sha256, &staging, limits, names)?;
            let won = staging.publish(store_root, expected_sha256, stats.encoding)?;
            Ok((stats, won))
        });
    match outcome {
        Ok((stats, won)) => {
            if won {
                tracing::info!(
                    files = stats.files,
                    encoding = stats.encoding.name(),
                    archive_bytes = stats.archive_bytes,
                    unpacked_bytes = stats.unpacked_bytes,
                    "bundle stored"
                );
            } else {
                tracing::info!(
                    files = stats.files,
                    "bundle already stored; kept the existing copy"
                );
            }
            Ok(stats)
        }
        Err(e) if e.is_client_error() => {
            tracing::warn!(code = e.code(), error = %e, "bundle upload refused");
            Err(e)
        }
        Err(e) => {
            tracing::error!(code = e.code(), error = %e, "bundle upload failed");
            Err(e)
        }
    }
}

/// Everything up to (not including) publishing: stream, extract, verify, hash.
fn receive<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    expected_sha256: &str,
    staging: &Staging,
    limits: &BundleLimits,
    names: Names,
) -> Result<BundleStats, BundleError> {
    let shared = Rc::new(Shared::default());
    let archive_file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&staging.archive)
        .map_err(|e| BundleError::io("creating the archive copy", e))?;
    let mut tee = Tee::new(
        reader,
        archive_file,
        Rc::clone(&shared),
        limits.max_archive_bytes,
    );
    let head = read_head(&mut tee).map_err(|e| stream_error(&shared, limits, e, None))?;
    let encoding = match (declared, BundleEncoding::sniff(&head)) {
        (Some(declared), Some(found)) if declared != found => {
            return Err(BundleError::EncodingMismatch { declared, found });
        }
        (_, Some(found)) => found,
        (Some(declared), None) => declared,
        (None, None) => BundleEncoding::Gzip,
    };
    let raw = BufReader::with_capacity(64 * 1024, io::Cursor::new(head).chain(tee));
    let decoder = Decoder::new(encoding, raw).map_err(|e| BundleError::MalformedArchive {
        entry: None,
        detail: e.to_string(),
    })?;
    let mut guard = Guard::new(
        decoder,
        Rc::clone(&shared),
        limits.max_ratio,
        limits.ratio_grace_bytes,
    );
    let root = fs::canonicalize(&staging.tree)
        .map_err(|e| BundleError::io("resolving the staging tree", e))?;
    let mut extractor = Extractor::new(root, limits, Rc::clone(&shared));
    extractor.extract_all(&mut guard)?;
    drain_tar_padding(&mut guard, &shared, limits)?;

    // The decoder has seen end of input; make sure of it, then hash.
    let mut raw = guard.into_inner().into_inner();
    io::copy(&mut raw, &mut io::sink()).map_err(|e| stream_error(&shared, limits, e, None))?;
    let (_, tee) = raw.into_inner().into_inner();
    let actual = tee
        .finish()
        .map_err(|e| BundleError::io("saving the uploaded archive", e))?;
    extractor.verify_symlinks()?;
    if actual != expected_sha256 && !names_tree(names, &staging.tree, expected_sha256) {
        return Err(BundleError::HashMismatch {
            expected: expected_sha256.to_owned(),
            actual,
        });
    }
    Ok(BundleStats {
        sha256: expected_sha256.to_owned(),
        encoding,
        files: extractor.files,
        archive_bytes: shared.raw.get(),
        unpacked_bytes: extractor.written,
    })
}

/// Does `id` name the unpacked tree at `tree` (when ids may name trees)?
fn names_tree(names: Names, tree: &Path, id: &str) -> bool {
    names == Names::ArchiveOrTree
        && incremental::manifest_of_dir(tree).is_ok_and(|manifest| manifest.bundle_id() == id)
}

/// The first bytes of the upload (up to a zstd magic's length; fewer only at end of input).
pub(crate) fn read_head<R: Read>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(4);
    reader.take(4).read_to_end(&mut head)?;
    Ok(head)
}

/// After the tar end-of-archive marker only zero padding may follow (a little of it):
/// anything else would be data we silently ignore, e.g. a second concatenated tar.
pub(crate) fn drain_tar_padding<R: Read>(
    decompressed: &mut R,
    shared: &Shared,
    limits: &BundleLimits,
) -> Result<(), BundleError> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = match decompressed.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(stream_error(shared, limits, e, None)),
        };
        total += n as u64;
        let detail = if buf[..n].iter().any(|&b| b != 0) {
            "non-zero data after the end of the tar archive"
        } else if total > MAX_TRAILING_BYTES {
            "too much padding after the end of the tar archive"
        } else {
            continue;
        };
        return Err(BundleError::MalformedArchive {
            entry: None,
            detail: detail.to_owned(),
        });
    }
}
