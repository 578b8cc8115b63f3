//! The blob store: where uploaded bundle archives live for good (docs/ARCHITECTURE.md §5.1).
//!
//! One [`BlobStore`] wraps an `object_store` backend: a local directory (`file:///…`, the
//! default being the data dir's `blobs/`) or an S3-compatible bucket (`s3://bucket/prefix`,
//! configured by the standard `AWS_*` variables). Transfers stream: uploads go out as
//! multipart uploads a few parts at a time, downloads are read chunk by chunk.
//!
//! A bundle's archive is the blob `bundles/<sha>.tar.gz` (`.tar.zst` when it was uploaded
//! zstd-compressed; one id has one encoding); the unpacked tree in the data dir
//! is a cache of it, rebuilt by [`ensure_bundle_tree`] through the same validating ingestion
//! an upload goes through.

mod error;
mod location;
mod materialise;
mod s3;
pub mod tree_archive;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures_util::stream::{BoxStream, StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, WriteMultipart};
use tokio::io::AsyncReadExt;

use ultraplan_bundle::BundleEncoding;

pub use error::BlobError;
pub use location::{BlobLocation, LocationError};
pub use materialise::{ensure_bundle_tree, ensure_session_bundle_tree};

/// Bytes per multipart part (S3's minimum for all but the last part is 5 MiB).
const PART_BYTES: usize = 5 * 1024 * 1024;
/// Parts in flight at once per upload: with the part being filled, an upload holds at most
/// `(PARTS_IN_FLIGHT + 1) * PART_BYTES` in memory, whatever the archive's size.
const PARTS_IN_FLIGHT: usize = 2;
/// Bytes read from the local file per step.
const READ_BYTES: usize = 256 * 1024;

/// The blob key of bundle `sha`'s archive when it is gzip'd (see [`bundle_key_as`]).
pub fn bundle_key(sha: &str) -> String {
    bundle_key_as(sha, BundleEncoding::Gzip)
}

/// The blob key of bundle `sha`'s archive compressed as `encoding`.
pub fn bundle_key_as(sha: &str, encoding: BundleEncoding) -> String {
    format!("bundles/{sha}.{}", encoding.extension())
}

/// The blob key of a session's execution patch (its unified diff).
pub fn patch_key(session_id: &str) -> String {
    format!("patches/{session_id}.diff")
}

/// The bundle id of a blob key under `bundles/`, if it is one (of either encoding).
pub fn bundle_of_key(key: &str) -> Option<&str> {
    let name = key.strip_prefix("bundles/")?;
    let sha = BundleEncoding::ALL
        .iter()
        .find_map(|encoding| name.strip_suffix(&format!(".{}", encoding.extension())))?;
    ultraplan_bundle::is_valid_sha256(sha).then_some(sha)
}

/// An object store and the prefix every key lives under. Cheap to clone.
#[derive(Clone)]
pub struct BlobStore {
    store: Arc<dyn ObjectStore>,
    prefix: Key,
    location: BlobLocation,
}

/// Never prints credentials: only where the store is.
impl fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlobStore")
            .field("location", &self.location.to_string())
            .finish()
    }
}

/// One blob as listed: its key (relative to the store's prefix) and when it was last written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub modified_ms: i64,
}

impl BlobStore {
    /// The store at `location`, opened once per process and shared afterwards (an S3 client
    /// keeps its connection pool).
    pub fn shared(location: &BlobLocation) -> Result<Self, BlobError> {
        static OPENED: OnceLock<Mutex<HashMap<BlobLocation, BlobStore>>> = OnceLock::new();
        let mut opened = OPENED
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(store) = opened.get(location) {
            return Ok(store.clone());
        }
        let store = Self::open(location)?;
        opened.insert(location.clone(), store.clone());
        Ok(store)
    }

    /// Open the store at `location`: a directory (created if missing), or an S3 bucket with
    /// the endpoint, region and keys of the `AWS_*` variables. No request is made yet.
    pub fn open(location: &BlobLocation) -> Result<Self, BlobError> {
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| BlobError::Open {
            location: location.to_string(),
            source,
        };
        let (store, prefix): (Arc<dyn ObjectStore>, &str) = match location {
            BlobLocation::File(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| failed(Box::new(e)))?;
                let local = object_store::local::LocalFileSystem::new_with_prefix(dir)
                    .map_err(|e| failed(Box::new(e)))?;
                (Arc::new(local), "")
            }
            BlobLocation::S3 { bucket, prefix } => {
                let s3 = s3::builder(bucket)
                    .build()
                    .map_err(|e| failed(Box::new(e)))?;
                (Arc::new(s3), prefix.as_str())
            }
        };
        let prefix = Key::parse(prefix).map_err(|e| failed(Box::new(e)))?;
        Ok(BlobStore {
            store,
            prefix,
            location: location.clone(),
        })
    }

    /// Where this store is.
    pub fn location(&self) -> &BlobLocation {
        &self.location
    }

    fn key(&self, key: &str) -> Key {
        key.split('/')
            .fold(self.prefix.clone(), |path, part| path.join(part))
    }

    fn store_error(
        &self,
        action: &'static str,
        key: &str,
        source: object_store::Error,
    ) -> BlobError {
        match source {
            object_store::Error::NotFound { .. } => BlobError::NotFound {
                location: self.location.to_string(),
                key: key.to_owned(),
            },
            source => BlobError::Store {
                location: self.location.to_string(),
                action,
                key: key.to_owned(),
                source: Box::new(source),
            },
        }
    }

    /// Upload the file at `path` as `key` with a multipart upload, reading it a chunk at a
    /// time; the blob appears whole or not at all. Returns the bytes sent.
    pub async fn put_file_streaming(&self, key: &str, path: &Path) -> Result<u64, BlobError> {
        let local = |source| BlobError::Local {
            action: "reading",
            path: path.display().to_string(),
            source,
        };
        let mut file = tokio::fs::File::open(path).await.map_err(local)?;
        let upload = self
            .store
            .put_multipart(&self.key(key))
            .await
            .map_err(|e| self.store_error("starting the upload of", key, e))?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buf = vec![0u8; READ_BYTES];
        let mut sent = 0u64;
        let outcome = loop {
            let n = match file.read(&mut buf).await {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) => break Err(local(e)),
            };
            if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                break Err(self.store_error("uploading", key, e));
            }
            writer.write(&buf[..n]);
            sent += n as u64;
        };
        if let Err(error) = outcome {
            if let Err(abort) = writer.abort().await {
                tracing::warn!(key, error = %abort, "could not abort a failed multipart upload");
            }
            return Err(error);
        }
        writer
            .finish()
            .await
            .map_err(|e| self.store_error("completing the upload of", key, e))?;
        Ok(sent)
    }

    /// Store `bytes` as `key` in one request; the blob appears whole or not at all.
    pub async fn put_bytes(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        self.store
            .put(&self.key(key), bytes.into())
            .await
            .map_err(|e| self.store_error("uploading", key, e))?;
        Ok(())
    }

    /// The whole blob, refused past `max_bytes`.
    pub async fn get_bytes(&self, key: &str, max_bytes: usize) -> Result<Vec<u8>, BlobError> {
        let mut stream = self.raw_stream(key).await?;
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.store_error("downloading", key, e))?;
            if out.len() + chunk.len() > max_bytes {
                return Err(BlobError::TooLarge {
                    key: key.to_owned(),
                    max_bytes,
                });
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// The blob's bytes as a stream of chunks.
    pub async fn get_stream(
        &self,
        key: &str,
    ) -> Result<BoxStream<'static, std::io::Result<Bytes>>, BlobError> {
        Ok(self
            .raw_stream(key)
            .await?
            .map_err(std::io::Error::other)
            .boxed())
    }

    async fn raw_stream(
        &self,
        key: &str,
    ) -> Result<BoxStream<'static, object_store::Result<Bytes>>, BlobError> {
        let got = self
            .store
            .get(&self.key(key))
            .await
            .map_err(|e| self.store_error("downloading", key, e))?;
        Ok(got.into_stream())
    }

    /// Download the blob into a new file at `dest` (written beside it, then renamed, so `dest`
    /// never holds part of a blob). Returns the bytes written.
    pub async fn get_to_file(&self, key: &str, dest: &Path) -> Result<u64, BlobError> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let unique = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut name = dest.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".part-{}-{unique}", std::process::id()));
        let partial = dest.with_file_name(name);
        let local = |action, source| BlobError::Local {
            action,
            path: dest.display().to_string(),
            source,
        };
        let mut stream = self.raw_stream(key).await?;
        let written = async {
            let mut file = tokio::fs::File::create(&partial)
                .await
                .map_err(|e| local("creating", e))?;
            let mut written = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| self.store_error("downloading", key, e))?;
                tokio::io::AsyncWriteExt::write_all(&mut file, &chunk)
                    .await
                    .map_err(|e| local("writing", e))?;
                written += chunk.len() as u64;
            }
            file.sync_all().await.map_err(|e| local("syncing", e))?;
            tokio::fs::rename(&partial, dest)
                .await
                .map_err(|e| local("renaming into", e))?;
            Ok(written)
        }
        .await;
        if written.is_err() {
            let _ = tokio::fs::remove_file(&partial).await;
        }
        written
    }

    /// Whether a blob exists under `key`.
    pub async fn exists(&self, key: &str) -> Result<bool, BlobError> {
        match self.store.head(&self.key(key)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.store_error("looking up", key, e)),
        }
    }

    /// Which encoding bundle `sha`'s archive is stored in, if it is stored.
    pub async fn find_bundle(&self, sha: &str) -> Result<Option<BundleEncoding>, BlobError> {
        for encoding in BundleEncoding::ALL {
            if self.exists(&bundle_key_as(sha, encoding)).await? {
                return Ok(Some(encoding));
            }
        }
        Ok(None)
    }

    /// Delete bundle `sha`'s archive, whichever encoding it is stored in.
    pub async fn delete_bundle(&self, sha: &str) -> Result<(), BlobError> {
        for encoding in BundleEncoding::ALL {
            self.delete(&bundle_key_as(sha, encoding)).await?;
        }
        Ok(())
    }

    /// Delete the blob under `key`; a missing blob is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), BlobError> {
        match self.store.delete(&self.key(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.store_error("deleting", key, e)),
        }
    }

    /// Every blob whose key starts with `dir/`, keys relative to the store's prefix.
    pub async fn list(&self, dir: &str) -> Result<Vec<Listed>, BlobError> {
        let metas: Vec<object_store::ObjectMeta> = self
            .store
            .list(Some(&self.key(dir)))
            .try_collect()
            .await
            .map_err(|e| self.store_error("listing", dir, e))?;
        Ok(metas
            .into_iter()
            .filter_map(|meta| {
                let key = meta.location.prefix_match(&self.prefix)?;
                let key: Vec<String> = key.map(|part| part.as_ref().to_owned()).collect();
                Some(Listed {
                    key: key.join("/"),
                    modified_ms: meta.last_modified.timestamp_millis(),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
