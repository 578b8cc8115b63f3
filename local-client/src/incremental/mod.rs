//! Incremental teleport (docs/ARCHITECTURE.md §5.1): instead of the whole archive, send the
//! manifest of the tree (paths, modes, sizes, BLAKE3 hashes, symlink targets), as a change
//! to the one the server accepted last when there is one, then only the contents the server
//! lacks for this owner. A hash cache keyed by inode, times and size keeps the walk cheap.
//!
//! Every failure here is worth falling back to a full upload: the caller does.

mod cache;
mod contents;
mod delta;
mod last;
mod tree;

use std::path::{Path, PathBuf};

use ultraplan_protocol::api::{BundleUploaded, ManifestAccepted, ManifestRequest};

use crate::api::{ApiError, Client};
use crate::bundle::{self, Bundle, Codec};

pub use cache::{Cached, HashCache, RACY_NS};
pub use tree::hash_file;

/// Set to `0` (or `off`) to send whole bundles even to servers that take incremental ones.
pub const ENV_SWITCH: &str = "ULTRAPLAN_INCREMENTAL";

/// Whether incremental bundles are switched off in this environment.
pub fn switched_off() -> bool {
    std::env::var(ENV_SWITCH).is_ok_and(|v| matches!(v.trim(), "0" | "off" | "false" | "no"))
}

#[derive(Debug, thiserror::Error)]
pub enum IncrementalError {
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("{0}: the path is not UTF-8")]
    NotUtf8(String),
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} changed while it was being sent")]
    Changed(String),
    #[error("{0}")]
    Protocol(String),
    #[error("the bundler stopped unexpectedly: {0}")]
    Task(String),
}

/// Where the client keeps what makes the next launch cheap, and who it talks to.
#[derive(Debug, Clone)]
pub struct Places {
    /// Hash caches and accepted manifests.
    pub state_dir: PathBuf,
    /// Temporary contents archives.
    pub cache_dir: PathBuf,
    /// The server and token: accepted manifests are remembered per both.
    pub server: String,
    pub token: String,
}

/// What an incremental teleport did.
#[derive(Debug)]
pub struct Sent {
    pub bundle: Bundle,
    /// `None` when the server already held the tree.
    pub uploaded: Option<BundleUploaded>,
    /// Bytes of the manifest request (compressed) and of the contents archive.
    pub manifest_bytes: u64,
    pub contents_bytes: u64,
    /// The manifest went as a change to the last accepted one.
    pub as_delta: bool,
    /// Files read and hashed (the rest came from the hash cache).
    pub hashed: usize,
    /// Where the time went, in milliseconds: walking and hashing the tree, the manifest's
    /// request, and archiving and sending the contents.
    pub timings: Timings,
}

/// Milliseconds spent on each step of an incremental teleport.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timings {
    pub scan_ms: u128,
    pub manifest_ms: u128,
    pub contents_ms: u128,
}

/// Walk and hash the tree at `repo`, send its manifest and the contents the server lacks.
pub async fn send(client: &Client, repo: &Path, places: &Places) -> Result<Sent, IncrementalError> {
    let started = std::time::Instant::now();
    let mut timings = Timings::default();
    let (scan, mut hashed, base, last_path, cache_path) = blocking({
        let (repo, places) = (repo.to_owned(), places.clone());
        move || prepare(&repo, &places)
    })
    .await?;
    let root = scan.root.clone();
    timings.scan_ms = started.elapsed().as_millis();
    // The hash cache is saved while the requests go out.
    let fresh = std::mem::take(&mut hashed.cache);
    let saving = tokio::task::spawn_blocking(move || fresh.save(&cache_path));
    let (answer, mut manifest_bytes, mut as_delta) =
        post_manifest(client, &hashed.entries, base.as_ref()).await?;
    timings.manifest_ms = started.elapsed().as_millis() - timings.scan_ms;
    let (mut uploaded, mut contents_bytes) = (None, 0);
    if !answer.held {
        let put = put_contents(client, &root, &hashed.entries, &answer, places).await;
        let (stored, bytes) = match put {
            // The server no longer holds a content the base had: the whole manifest says
            // which.
            Err(IncrementalError::Api(e)) if as_delta && e.code() == Some("missing_content") => {
                tracing::info!("a content of the last manifest is gone; sending it whole");
                let (whole, bytes, _) = post_manifest(client, &hashed.entries, None).await?;
                manifest_bytes += bytes;
                as_delta = false;
                put_contents(client, &root, &hashed.entries, &whole, places).await?
            }
            other => other?,
        };
        (uploaded, contents_bytes) = (Some(stored), bytes);
    }
    timings.contents_ms = started.elapsed().as_millis() - timings.scan_ms - timings.manifest_ms;
    // `git status` ran while the requests were out.
    let (id, sent_bytes) = (answer.bundle_id.clone(), manifest_bytes + contents_bytes);
    let bundle = blocking(move || Ok(scan.into_bundle(id, Codec::Zstd, sent_bytes))).await?;
    let accepted = last::Accepted {
        bundle_id: answer.bundle_id,
        entries: hashed.entries.into_values().collect(),
    };
    match saving.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "could not save the hash cache"),
        Err(error) => tracing::warn!(%error, "could not save the hash cache"),
    }
    blocking(move || {
        last::save(&last_path, &accepted).map_err(|source| IncrementalError::Write {
            path: last_path.display().to_string(),
            source,
        })
    })
    .await?;
    Ok(Sent {
        bundle,
        uploaded,
        manifest_bytes,
        contents_bytes,
        as_delta,
        hashed: hashed.hashed,
        timings,
    })
}

type Prepared = (
    bundle::Scan,
    tree::Hashed,
    Option<last::Accepted>,
    PathBuf,
    PathBuf,
);

/// The walk, the hashes (the cache saved again), and the manifest accepted last.
fn prepare(repo: &Path, places: &Places) -> Result<Prepared, IncrementalError> {
    let scan = bundle::scan(repo)?;
    let root_text = scan.root.display().to_string();
    let cache_path = places
        .state_dir
        .join("hashes")
        .join(last::key(&[&root_text]));
    let cache = HashCache::load(&cache_path);
    let hashed = tree::manifest(&scan.root, &scan.entries, &cache)?;
    let key = last::key(&[&places.server, &places.token, &root_text]);
    let last_path = last::path(&places.state_dir, &key);
    let base = last::load(&last_path);
    Ok((scan, hashed, base, last_path, cache_path))
}

/// Send the manifest, as a change to `base` when there is one (and the whole of it when the
/// server no longer knows that base). Returns the answer, the bytes sent and whether they
/// were a change.
async fn post_manifest(
    client: &Client,
    entries: &std::collections::BTreeMap<String, ultraplan_protocol::api::ManifestEntry>,
    base: Option<&last::Accepted>,
) -> Result<(ManifestAccepted, u64, bool), IncrementalError> {
    if let Some(base) = base {
        let (changed, removed) = delta::delta(&base.entries, entries);
        let request = ManifestRequest {
            base: Some(base.bundle_id.clone()),
            entries: changed,
            removed,
        };
        let body = compress(&request)?;
        let length = body.len() as u64;
        match client.post_manifest(body).await {
            Ok(answer) => return Ok((answer, length, true)),
            Err(error) if error.code() == Some("unknown_base") => {
                tracing::info!("the server no longer has the last manifest; sending it whole");
            }
            Err(error) => return Err(error.into()),
        }
    }
    let request = ManifestRequest {
        base: None,
        entries: entries.values().cloned().collect(),
        removed: Vec::new(),
    };
    let body = compress(&request)?;
    let length = body.len() as u64;
    Ok((client.post_manifest(body).await?, length, false))
}

fn compress(request: &ManifestRequest) -> Result<Vec<u8>, IncrementalError> {
    let json =
        serde_json::to_vec(request).map_err(|e| IncrementalError::Protocol(e.to_string()))?;
    zstd::encode_all(&json[..], 3).map_err(|source| IncrementalError::Write {
        path: "the manifest".to_owned(),
        source,
    })
}

/// Archive the missing contents and send them.
async fn put_contents(
    client: &Client,
    root: &Path,
    entries: &std::collections::BTreeMap<String, ultraplan_protocol::api::ManifestEntry>,
    answer: &ManifestAccepted,
    places: &Places,
) -> Result<(BundleUploaded, u64), IncrementalError> {
    let dir = places.cache_dir.join("bundles");
    std::fs::create_dir_all(&dir).map_err(|source| IncrementalError::Write {
        path: dir.display().to_string(),
        source,
    })?;
    let file = dir.join(format!(
        "contents-{}-{}.tar.zst",
        answer.bundle_id,
        std::process::id()
    ));
    let written = blocking({
        let (root, entries, missing, file) = (
            root.to_owned(),
            entries.clone(),
            answer.missing.clone(),
            file.clone(),
        );
        move || contents::write(&root, &entries, &missing, &file)
    })
    .await;
    let result = match written {
        Ok(length) => upload(client, &answer.bundle_id, &file, length)
            .await
            .map(|up| (up, length)),
        Err(error) => Err(error),
    };
    let _ = std::fs::remove_file(&file);
    result
}

async fn upload(
    client: &Client,
    id: &str,
    file: &Path,
    length: u64,
) -> Result<BundleUploaded, IncrementalError> {
    let opened = tokio::fs::File::open(file)
        .await
        .map_err(|source| IncrementalError::Read {
            path: file.display().to_string(),
            source,
        })?;
    let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(opened));
    Ok(client.put_contents(id, length, body).await?)
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, IncrementalError> + Send + 'static,
) -> Result<T, IncrementalError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| IncrementalError::Task(e.to_string()))?
}
