//! The per-upload staging directory, `<store_root>/.staging/<unique>/`, holding the extracted
//! `tree/` and the raw `upload.archive`. Dropping a [`Staging`] removes whatever is left of it;
//! publishing renames both into place first.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::BundleError;
use super::{BundleEncoding, archive_path_as, bundle_dir};

pub(crate) const STAGING_DIR: &str = ".staging";

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
pub(crate) struct Staging {
    staging_root: PathBuf,
    dir: PathBuf,
    pub tree: PathBuf,
    pub archive: PathBuf,
}

impl Staging {
    pub fn create(store_root: &Path, sha: &str) -> Result<Self, BundleError> {
        let staging_root = store_root.join(STAGING_DIR);
        let mut attempt = 0;
        let dir = loop {
            attempt += 1;
            fs::create_dir_all(&staging_root)
                .map_err(|e| BundleError::io("creating the staging area", e))?;
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let id = format!(
                "{}-{}-{nanos}-{}",
                sha.get(..16).unwrap_or(sha),
                std::process::id(),
                NEXT_ID.fetch_add(1, Ordering::Relaxed)
            );
            let dir = staging_root.join(id);
            match DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => break dir,
                // A name clash, or another upload's cleanup removed the (empty) staging root
                // between our two calls: try again.
                Err(e)
                    if attempt < 8
                        && matches!(
                            e.kind(),
                            io::ErrorKind::AlreadyExists | io::ErrorKind::NotFound
                        ) => {}
                Err(e) => return Err(BundleError::io("creating a staging directory", e)),
            }
        };
        let staging = Self {
            tree: dir.join("tree"),
            archive: dir.join("upload.archive"),
            staging_root,
            dir,
        };
        DirBuilder::new()
            .mode(0o755)
            .create(&staging.tree)
            .map_err(|e| BundleError::io("creating the staging tree", e))?;
        Ok(staging)
    }

    /// Move the tree to `<store_root>/<sha>/` and the archive to `<store_root>/<sha>.tar.gz`
    /// (`.tar.zst` for zstd).
    ///
    /// Returns `false` when another upload of the same sha got there first: theirs is kept
    /// (ours is dropped with the staging dir). The archive is renamed over any existing copy
    /// either way: it has the same bytes, and this repairs a store where it went missing.
    pub fn publish(
        self,
        store_root: &Path,
        sha: &str,
        encoding: BundleEncoding,
    ) -> Result<bool, BundleError> {
        let final_dir = bundle_dir(store_root, sha);
        let won = match fs::rename(&self.tree, &final_dir) {
            Ok(()) => true,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty
                ) =>
            {
                false
            }
            Err(e) => return Err(BundleError::io("publishing the bundle directory", e)),
        };
        if let Err(e) = fs::rename(&self.archive, archive_path_as(store_root, sha, encoding)) {
            if won {
                // Leave nothing behind: a directory without its archive is not a bundle.
                if let Err(e) = fs::remove_dir_all(&final_dir) {
                    tracing::error!(dir = %final_dir.display(), error = %e,
                        "could not remove a half-published bundle");
                }
            }
            return Err(BundleError::io("publishing the bundle archive", e));
        }
        Ok(won)
    }
}

impl Staging {
    /// A scratch directory inside this staging dir (removed with it).
    pub fn scratch(&self, name: &str) -> Result<PathBuf, BundleError> {
        let path = self.dir.join(name);
        DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| BundleError::io("creating a staging directory", e))?;
        Ok(path)
    }

    /// Move the tree alone to `<store_root>/<sha>/` (a materialised bundle, whose archive is
    /// written later). `false` when another copy got there first: it is kept.
    pub fn publish_tree(&self, store_root: &Path, sha: &str) -> Result<bool, BundleError> {
        match fs::rename(&self.tree, bundle_dir(store_root, sha)) {
            Ok(()) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::AlreadyExists | io::ErrorKind::DirectoryNotEmpty
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(BundleError::io("publishing the bundle directory", e)),
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        match fs::remove_dir_all(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e,
                    "could not remove a bundle staging directory");
            }
        }
        // Only succeeds when no other upload is in flight; that's the point.
        let _ = fs::remove_dir(&self.staging_root);
    }
}
