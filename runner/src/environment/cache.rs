//! Cached environments on a runner's disk: `<root>/<key>/tree` (what setup left in `/env`)
//! and `<root>/<key>/meta.json`, built in `<root>/.staging/` and renamed into place whole.
//! Snapshots in use are never swept (docs/ARCHITECTURE.md §6.5).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a snapshot records about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMeta {
    pub key: String,
    /// When setup finished, in Unix milliseconds.
    pub built_at_ms: i64,
    /// How long setup took.
    pub setup_ms: u64,
    /// Which tree is current: 0 is setup's (`tree`), each maintenance adds one (`gen-N`).
    #[serde(default)]
    pub generation: u32,
    /// When maintenance last refreshed it, in Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintained_at_ms: Option<i64>,
}

impl SnapshotMeta {
    /// The directory of the current tree under the snapshot's directory.
    pub fn tree_name(&self) -> String {
        match self.generation {
            0 => "tree".to_owned(),
            n => format!("gen-{n}"),
        }
    }
}

/// A snapshot a session uses; it is not swept while any lease on it is alive.
#[derive(Debug)]
pub struct Lease {
    pub tree: PathBuf,
    pub meta: SnapshotMeta,
    pub(super) key: String,
    in_use: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Ok(mut in_use) = self.in_use.lock()
            && let Some(n) = in_use.get_mut(&self.key)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                in_use.remove(&self.key);
            }
        }
    }
}

/// A directory a setup is building into.
#[derive(Debug)]
pub struct Staging {
    pub dir: PathBuf,
    pub tree: PathBuf,
}

/// The cache of built environments.
#[derive(Debug, Clone)]
pub struct EnvironmentCache {
    pub(super) root: PathBuf,
    ttl: Duration,
    in_use: Arc<Mutex<HashMap<String, usize>>>,
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl EnvironmentCache {
    pub fn new(root: PathBuf, ttl: Duration) -> Self {
        EnvironmentCache {
            root,
            ttl,
            in_use: Arc::default(),
        }
    }

    fn expired(&self, meta: &SnapshotMeta, now: i64) -> bool {
        let age = u64::try_from(now - meta.built_at_ms).unwrap_or(0);
        Duration::from_millis(age) >= self.ttl
    }

    pub(super) fn read_meta(dir: &Path) -> Option<SnapshotMeta> {
        let bytes = std::fs::read(dir.join("meta.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The snapshot for `key`, leased, if one was built and has not expired.
    pub fn lookup(&self, key: &str) -> Option<Lease> {
        if !plain_key(key) {
            return None;
        }
        let dir = self.root.join(key);
        let meta = Self::read_meta(&dir).filter(|m| m.key == key)?;
        if self.expired(&meta, now_ms()) {
            return None;
        }
        Some(self.lease(key, dir.join(meta.tree_name()), meta))
    }

    pub(super) fn lease(&self, key: &str, tree: PathBuf, meta: SnapshotMeta) -> Lease {
        if let Ok(mut in_use) = self.in_use.lock() {
            *in_use.entry(key.to_owned()).or_default() += 1;
        }
        Lease {
            tree,
            meta,
            key: key.to_owned(),
            in_use: self.in_use.clone(),
        }
    }

    /// A fresh directory to build into, owned by `owner` when given (the sandbox user).
    pub fn stage(&self, owner: Option<u32>) -> std::io::Result<Staging> {
        let dir = self
            .root
            .join(".staging")
            .join(uuid::Uuid::new_v4().simple().to_string());
        let tree = dir.join("tree");
        std::fs::create_dir_all(&tree)?;
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&tree, Some(uid), Some(uid))?;
        }
        Ok(Staging { dir, tree })
    }

    /// Put a finished build in place under `meta.key` and lease it. If another build of the
    /// same key landed first, that one is kept and this one dropped.
    pub fn commit(&self, staging: Staging, meta: SnapshotMeta) -> std::io::Result<Lease> {
        if !plain_key(&meta.key) {
            return Err(std::io::Error::other("not a snapshot key"));
        }
        let bytes = serde_json::to_vec(&meta).map_err(std::io::Error::other)?;
        std::fs::write(staging.dir.join("meta.json"), bytes)?;
        let dir = self.root.join(&meta.key);
        let stale = Self::read_meta(&dir).is_none_or(|m| self.expired(&m, now_ms()));
        if dir.exists() && stale && !self.used(&meta.key) {
            remove_tree(&dir);
        }
        if let Err(error) = std::fs::rename(&staging.dir, &dir) {
            remove_tree(&staging.dir);
            if let Some(lease) = self.lookup(&meta.key) {
                return Ok(lease);
            }
            return Err(error);
        }
        Ok(self.lease(&meta.key.clone(), dir.join("tree"), meta))
    }

    /// Drop a failed build.
    pub fn discard(&self, staging: Staging) {
        remove_tree(&staging.dir);
    }

    /// Remove expired snapshots nobody uses, and staging left by a crash (older than a day).
    /// Returns how many snapshots were removed.
    pub fn sweep(&self) -> usize {
        let now = now_ms();
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == ".staging" {
                self.sweep_staging(&entry.path());
                continue;
            }
            let meta = Self::read_meta(&entry.path());
            let stale = meta.as_ref().is_none_or(|m| self.expired(m, now));
            if stale && !self.used(&name) {
                remove_tree(&entry.path());
                removed += 1;
            } else if let Some(meta) = meta.filter(|_| !self.used(&name)) {
                remove_old_generations(&entry.path(), &meta);
            }
        }
        removed
    }

    pub(super) fn used(&self, key: &str) -> bool {
        self.in_use
            .lock()
            .map_or(true, |in_use| in_use.contains_key(key))
    }

    fn sweep_staging(&self, dir: &Path) {
        let day = Duration::from_secs(24 * 3600);
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > day);
            if old {
                remove_tree(&entry.path());
            }
        }
    }
}

/// A key is 64 lower-case hex digits (and so a safe single path component).
pub fn plain_key(key: &str) -> bool {
    key.len() == 64 && key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Remove a tree that a sandbox user may have made read-only in places.
pub(super) fn remove_tree(path: &Path) {
    if std::fs::remove_dir_all(path).is_ok() {
        return;
    }
    make_writable(path);
    if let Err(error) = std::fs::remove_dir_all(path) {
        tracing::warn!(path = %path.display(), %error, "cannot remove an environment directory");
    }
}

fn make_writable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            make_writable(&entry.path());
        }
    }
}

/// Remove the trees of a snapshot's directory older than its current one (nobody uses them).
pub(super) fn remove_old_generations(dir: &Path, meta: &SnapshotMeta) {
    let current = meta.tree_name();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let a_tree = name == "tree" || name.starts_with("gen-");
        if a_tree && name != current {
            remove_tree(&entry.path());
        }
    }
}

#[cfg(test)]
#[path = "cache_tests.rs"]
mod tests;
