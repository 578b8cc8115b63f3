//! Which bundles have an upload in flight and which are being deleted, so that removing a
//! bundle's files never races an upload of the same bundle in this process (or its tree being
//! unpacked again from the blob store, which registers as an upload): an upload waits while
//! the files go, and files are never removed while an upload may be publishing them.
//! The lock is a plain mutex held only for a map update, never across an await.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

#[derive(Debug, Default)]
struct Entry {
    uploads: usize,
    deleting: bool,
}

type Key = (PathBuf, String);

fn map() -> MutexGuard<'static, HashMap<Key, Entry>> {
    static MAP: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    MAP.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn settle(map: &mut HashMap<Key, Entry>, key: &Key) {
    if map.get(key).is_some_and(|e| e.uploads == 0 && !e.deleting) {
        map.remove(key);
    }
}

/// An upload of a bundle in flight; released on drop.
#[derive(Debug)]
pub struct Uploading {
    key: Key,
}

impl Uploading {
    /// Register an upload of `sha` into the bundle store at `root`, waiting while its files
    /// are being removed.
    pub async fn begin(root: &Path, sha: &str) -> Self {
        let key = (root.to_path_buf(), sha.to_owned());
        loop {
            {
                let mut map = map();
                let entry = map.entry(key.clone()).or_default();
                if !entry.deleting {
                    entry.uploads += 1;
                    return Uploading { key };
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Claim the deletion of this upload's own bundle: only when no other upload of it is in
    /// flight.
    pub fn claim_deletion(&self) -> Option<Deleting> {
        Deleting::claim(&self.key, 1)
    }
}

impl Drop for Uploading {
    fn drop(&mut self) {
        let mut map = map();
        if let Some(entry) = map.get_mut(&self.key) {
            entry.uploads = entry.uploads.saturating_sub(1);
        }
        settle(&mut map, &self.key);
    }
}

/// The right to remove a bundle's files: no upload of it runs meanwhile. Released on drop.
#[derive(Debug)]
pub struct Deleting {
    key: Key,
}

impl Deleting {
    /// Claim the deletion of `sha` under `root`, unless an upload of it is in flight.
    pub fn begin(root: &Path, sha: &str) -> Option<Self> {
        Self::claim(&(root.to_path_buf(), sha.to_owned()), 0)
    }

    fn claim(key: &Key, own_uploads: usize) -> Option<Self> {
        let mut map = map();
        let entry = map.entry(key.clone()).or_default();
        if entry.uploads > own_uploads || entry.deleting {
            settle(&mut map, key);
            return None;
        }
        entry.deleting = true;
        Some(Deleting { key: key.clone() })
    }
}

impl Drop for Deleting {
    fn drop(&mut self) {
        let mut map = map();
        if let Some(entry) = map.get_mut(&self.key) {
            entry.deleting = false;
        }
        settle(&mut map, &self.key);
    }
}

/// Whether an upload of `sha` under `root` is in flight.
pub fn uploading(root: &Path, sha: &str) -> bool {
    map()
        .get(&(root.to_path_buf(), sha.to_owned()))
        .is_some_and(|e| e.uploads > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn uploads_and_deletions_exclude_each_other() {
        let root = Path::new("/registry-test");
        let upload = Uploading::begin(root, "s1").await;
        assert!(uploading(root, "s1"));
        assert!(Deleting::begin(root, "s1").is_none(), "upload in flight");
        let own = upload.claim_deletion().expect("only this upload");
        let waiting = tokio::spawn(async move { Uploading::begin(root, "s1").await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "an upload waits while files go");
        drop(own);
        let second = waiting.await.expect("join");
        drop(upload);
        assert!(uploading(root, "s1"));
        drop(second);
        assert!(!uploading(root, "s1"));
        let gc = Deleting::begin(root, "s1").expect("free");
        assert!(
            Deleting::begin(root, "s1").is_none(),
            "one deletion at a time"
        );
        drop(gc);
        assert!(map().get(&(root.to_path_buf(), "s1".to_owned())).is_none());
    }
}
