//! Execution environments (docs/ARCHITECTURE.md §6.5): a repository's
//! `.ultraplan/environment.toml` says how to set up what its code needs; setup runs once in
//! a sandbox with `/env` writable and the network reachable only through the egress proxy,
//! and what it leaves in `/env` is cached on the runner, keyed by the file, its lock files,
//! the base and the owner, and bound read-only into every later agent of that owner.

pub mod cache;
pub mod file;
mod generations;
pub mod key;
pub mod output;
pub mod setup;
pub mod wire;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub use cache::{EnvironmentCache, Lease, SnapshotMeta};
pub use file::{ENVIRONMENT_FILE, EnvironmentFile, FileError};
pub use setup::{SetupEnd, SetupReport, SetupRun, start_proxy};

use crate::sandbox::{Sandbox, SandboxError};

/// The largest lock file hashed into a key.
const MAX_LOCK_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// What a session's repository asks for.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub file: EnvironmentFile,
    /// The snapshot's key (see [`key::environment_key`]).
    pub key: String,
    /// What the key covers besides the base, so it can be keyed on another base.
    text: String,
    locks: Vec<(String, Option<[u8; 32]>)>,
    scope: String,
}

impl Wanted {
    /// Key the snapshot on a Docker image (its id) instead of the host's toolchain.
    pub fn on_image(&mut self, image_id: &str) {
        self.key = key::environment_key(&key::KeyInputs {
            file: self.text.as_bytes(),
            lock_files: &self.locks,
            base: &format!("image:{image_id}"),
            scope: &self.scope,
        });
    }
}

/// Read the repository's environment file (if any) and key it. Blocking; `root` is an
/// unpacked bundle, whose links were checked on the way in, and every path read is checked
/// again against the real tree.
pub fn read_wanted(root: &Path, scope: &str) -> Result<Option<Wanted>, FileError> {
    let Some(bytes) = read_in_tree(root, ENVIRONMENT_FILE, file::MAX_FILE_BYTES)? else {
        return Ok(None);
    };
    let text =
        std::str::from_utf8(&bytes).map_err(|_| FileError("the file is not UTF-8".to_owned()))?;
    keyed(root, text, scope).map(Some)
}

/// A named environment's definition (kept on the server), keyed like a repository's file:
/// its lock files are read from the repository at `root`. A shared environment's `scope` is
/// the same for every user, so they share its snapshot.
pub fn named_wanted(root: &Path, definition: &str, scope: &str) -> Result<Wanted, FileError> {
    keyed(root, definition, scope)
}

fn keyed(root: &Path, text: &str, scope: &str) -> Result<Wanted, FileError> {
    let bytes = text.as_bytes();
    let file = file::parse(text)?;
    let mut locks = Vec::new();
    for path in &file.lock_files {
        let digest = read_in_tree(root, path, MAX_LOCK_FILE_BYTES)?.map(|b| key::digest(&b));
        locks.push((path.clone(), digest));
    }
    let key = key::environment_key(&key::KeyInputs {
        file: bytes,
        lock_files: &locks,
        base: &base(),
        scope,
    });
    Ok(Wanted {
        file,
        key,
        text: text.to_owned(),
        locks,
        scope: scope.to_owned(),
    })
}

/// A file of the tree, if it is there, after checking its real path stays inside the tree.
fn read_in_tree(root: &Path, relative: &str, cap: u64) -> Result<Option<Vec<u8>>, FileError> {
    use std::io::Read;
    let refuse = |why: &str| FileError(format!("{relative}: {why}"));
    let path = root.join(relative);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let real_root = root.canonicalize().map_err(|e| refuse(&e.to_string()))?;
    let real = path.canonicalize().map_err(|e| refuse(&e.to_string()))?;
    if !real.starts_with(&real_root) || !real.is_file() {
        return Err(refuse("must be a regular file inside the repository"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&real)
        .and_then(|f| f.take(cap + 1).read_to_end(&mut bytes))
        .map_err(|e| refuse(&e.to_string()))?;
    if bytes.len() as u64 > cap {
        return Err(refuse(&format!("larger than {cap} bytes")));
    }
    Ok(Some(bytes))
}

/// The base every environment is built on: this runner's own toolchain, fingerprinted by
/// its OS release, so a snapshot is not reused on a different system.
fn base() -> String {
    let release = std::fs::read("/etc/os-release").unwrap_or_default();
    format!("host:{}", &hex::encode(key::digest(&release))[..16])
}

/// A runner's environments: the cache, and one build at a time per key.
#[derive(Debug, Clone)]
pub struct Environments {
    cache: EnvironmentCache,
    building: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// How an environment was made ready.
#[derive(Debug)]
pub enum Prepared {
    /// A snapshot was there already.
    Reused(Lease),
    /// Setup ran now and succeeded.
    Built(Lease, SetupReport),
}

/// Why an environment is not ready.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("setup did not succeed")]
    Setup(SetupReport),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("environment storage: {0}")]
    Io(String),
}

impl Environments {
    pub fn new(cache: EnvironmentCache) -> Self {
        Environments {
            cache,
            building: Arc::default(),
        }
    }

    pub fn cache(&self) -> &EnvironmentCache {
        &self.cache
    }

    /// The cached snapshot for `key`, if any.
    pub fn lookup(&self, key: &str) -> Option<Lease> {
        self.cache.lookup(key)
    }

    /// Build the snapshot for `key` unless another build of it finishes first (one build
    /// per key at a time on this runner).
    pub async fn build(
        &self,
        sandbox: &Sandbox,
        key: &str,
        mut run: SetupRun,
        lines: tokio::sync::mpsc::UnboundedSender<String>,
    ) -> Result<Prepared, PrepareError> {
        let gate = self.gate(key);
        let _building = gate.lock().await;
        if let Some(lease) = self.cache.lookup(key) {
            return Ok(Prepared::Reused(lease));
        }
        let staging = self
            .cache
            .stage(sandbox.workspace_owner())
            .map_err(|e| PrepareError::Io(e.to_string()))?;
        run.tree = staging.tree.clone();
        let report = match setup::run(sandbox, run, lines).await {
            Ok(report) => report,
            Err(error) => {
                self.cache.discard(staging);
                return Err(error.into());
            }
        };
        if report.end != SetupEnd::Succeeded {
            self.cache.discard(staging);
            return Err(PrepareError::Setup(report));
        }
        let meta = SnapshotMeta {
            key: key.to_owned(),
            built_at_ms: cache::now_ms(),
            setup_ms: u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
            generation: 0,
            maintained_at_ms: None,
        };
        let cache = self.cache.clone();
        let lease = tokio::task::spawn_blocking(move || cache.commit(staging, meta))
            .await
            .map_err(|e| PrepareError::Io(e.to_string()))?
            .map_err(|e| PrepareError::Io(e.to_string()))?;
        Ok(Prepared::Built(lease, report))
    }

    /// Run `run`'s commands (the environment's `[maintenance]`) on a copy of the snapshot for
    /// `key` and make the copy current; `None` when there is no snapshot to maintain (it
    /// expired meanwhile). One build or maintenance per key at a time on this runner.
    pub async fn maintain(
        &self,
        sandbox: &Sandbox,
        key: &str,
        mut run: SetupRun,
        lines: tokio::sync::mpsc::UnboundedSender<String>,
    ) -> Result<Option<(Lease, SetupReport)>, PrepareError> {
        let gate = self.gate(key);
        let _maintaining = gate.lock().await;
        let Some(base) = self.cache.lookup(key) else {
            return Ok(None);
        };
        let (cache, owner) = (self.cache.clone(), sandbox.workspace_owner());
        let (staging, base) = tokio::task::spawn_blocking(move || {
            cache.copy_for_maintenance(&base, owner).map(|s| (s, base))
        })
        .await
        .map_err(|e| PrepareError::Io(e.to_string()))?
        .map_err(|e| PrepareError::Io(e.to_string()))?;
        run.tree = staging.tree.clone();
        let report = match setup::run(sandbox, run, lines).await {
            Ok(report) if report.end == SetupEnd::Succeeded => report,
            Ok(report) => {
                self.cache.discard(staging);
                return Err(PrepareError::Setup(report));
            }
            Err(error) => {
                self.cache.discard(staging);
                return Err(error.into());
            }
        };
        let cache = self.cache.clone();
        let lease = tokio::task::spawn_blocking(move || {
            let lease = cache.commit_generation(staging, &base);
            drop(base);
            lease
        })
        .await
        .map_err(|e| PrepareError::Io(e.to_string()))?
        .map_err(|e| PrepareError::Io(e.to_string()))?;
        Ok(Some((lease, report)))
    }

    fn gate(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let Ok(mut building) = self.building.lock() else {
            return Arc::default();
        };
        building.retain(|_, gate| Arc::strong_count(gate) > 1);
        building.entry(key.to_owned()).or_default().clone()
    }
}
