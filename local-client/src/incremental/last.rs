//! The manifest the server accepted last for a tree: kept per server, token and repository
//! under the client's state dir, so the next launch sends only what changed against it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use ultraplan_protocol::api::ManifestEntry;

/// An accepted manifest and the bundle id the server gave it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accepted {
    pub bundle_id: String,
    pub entries: Vec<ManifestEntry>,
}

impl Accepted {
    pub fn by_path(&self) -> BTreeMap<String, ManifestEntry> {
        self.entries
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect()
    }
}

/// A file name for `parts` (each length-prefixed, so no two lists share one).
pub fn key(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Where the accepted manifest of `key` is kept under `state_dir`.
pub fn path(state_dir: &Path, key: &str) -> PathBuf {
    state_dir.join("manifests").join(key)
}

/// The accepted manifest at `path`, if there is a readable one.
pub fn load(path: &Path) -> Option<Accepted> {
    serde_json::from_slice(&fs::read(path).ok()?).ok()
}

/// Keep `accepted` at `path` (through a temporary file beside it).
pub fn save(path: &Path, accepted: &Accepted) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let partial = path.with_extension(format!("tmp{}", std::process::id()));
    fs::write(
        &partial,
        serde_json::to_vec(accepted).map_err(io::Error::other)?,
    )?;
    fs::rename(&partial, path)
}
