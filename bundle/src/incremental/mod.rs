//! Incremental bundles (docs/ARCHITECTURE.md §5.1): a client sends the manifest of its tree
//! (whole, or as a change to one this owner sent before), learns which contents its owner's
//! store lacks, sends only those, and the server builds the tree from its content store.
//!
//! Layout under `store_root`, beside the full bundles:
//! - `.manifests/<owner>/<id>`: the canonical bytes of each manifest the owner had accepted,
//!   the bases later deltas name (an owner reaches only its own);
//! - `.content/<owner>/`: the owner's contents ([`OwnerStore`]);
//! - `<id>/` and `<id>.tree`: a materialised tree and its manifest; `<id>.tar.zst` once its
//!   canonical archive is written ([`write_archive`]).
//!
//! Everything here is blocking; call it from `tokio::task::spawn_blocking`.

mod archive;
mod contents;
mod delta;
mod manifest;
mod materialise;
mod on_base;
mod sweep;
mod verify;

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use ultraplan_protocol::api::ManifestRequest;

use crate::error::BundleError;
use crate::limits::BundleLimits;

pub use archive::write_archive;
pub use contents::OwnerStore;
pub use manifest::{Digest, Node, Totals, TreeManifest, parse_digest};
pub use materialise::{
    Incoming, Materialised, Pending, Prepared, ingest_contents, prepare_contents, receive_contents,
    stats_of, tree_manifest_path,
};
pub use on_base::OnBase;
pub use sweep::{TTL, sweep};
pub use verify::manifest_of_dir;

/// A manifest this owner's store accepted: the tree, its id and what it holds.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub manifest: TreeManifest,
    pub bundle_id: String,
    pub totals: Totals,
    /// Contents the owner's store lacks, with their sizes.
    pub missing: Vec<(Digest, u64)>,
    /// How the tree was made from its base, when it was sent as a change that touches no
    /// symlink.
    pub on_base: Option<OnBase>,
    /// The manifest's canonical bytes (what its id hashes, and what is kept).
    canonical: Vec<u8>,
}

/// Where `owner`'s accepted manifests are kept; `None` for an owner id that cannot name a
/// directory.
pub fn manifests_dir(store_root: &Path, owner: &str) -> Option<PathBuf> {
    crate::partial::is_plain(owner).then(|| store_root.join(".manifests").join(owner))
}

/// Check `request` for `owner` (resolving its base among the owner's own manifests) and say
/// which contents are missing. Nothing is recorded: [`keep_manifest`] does that once the
/// caller admitted it (its quota).
pub fn accept(
    store_root: &Path,
    owner: &str,
    request: ManifestRequest,
    limits: &BundleLimits,
) -> Result<Accepted, BundleError> {
    let invalid_owner = || BundleError::InvalidManifest("the owner cannot hold manifests".into());
    let dir = manifests_dir(store_root, owner).ok_or_else(invalid_owner)?;
    let store = OwnerStore::new(store_root, owner).ok_or_else(invalid_owner)?;
    // A delta's base was accepted with its contents: only the delta's are looked for (one
    // gone since is found missing when the tree is built, and the client starts over).
    let (manifest, among, on_base) = match &request.base {
        None => (TreeManifest::from_wire(request.entries)?, None, None),
        Some(base) => {
            let base_manifest = load(&dir, base)?;
            let changed = request
                .entries
                .iter()
                .filter_map(|e| Some((parse_digest(e.blake3.as_deref()?)?, e.size?)))
                .collect::<BTreeMap<_, _>>();
            let on_base =
                OnBase::of_change(base, &base_manifest, &request.removed, &request.entries);
            let manifest = delta::apply(base_manifest, &request.removed, request.entries)?;
            (manifest, Some(changed), on_base)
        }
    };
    let totals = manifest.check(limits)?;
    let canonical = manifest.to_bytes();
    let bundle_id = hex::encode(Sha256::digest(&canonical));
    let missing = store
        .missing(&manifest, among.as_ref())
        .into_iter()
        .collect();
    Ok(Accepted {
        manifest,
        bundle_id,
        totals,
        missing,
        on_base,
        canonical,
    })
}

/// Record an accepted manifest as `owner`'s: the contents upload builds from it, and later
/// deltas may name it as their base.
pub fn keep_manifest(
    store_root: &Path,
    owner: &str,
    accepted: &Accepted,
) -> Result<(), BundleError> {
    let dir = manifests_dir(store_root, owner)
        .ok_or_else(|| BundleError::InvalidManifest("the owner cannot hold manifests".into()))?;
    save(&dir, &accepted.bundle_id, &accepted.canonical)?;
    // A record only ever states a fact about the tree (base + change = tree), so one kept by
    // an earlier request for the same tree stays true.
    if let Some(on_base) = &accepted.on_base {
        let record = on_base::record_path(&dir, &accepted.bundle_id);
        write_atomically(&record, &on_base.to_bytes())
            .map_err(|e| BundleError::io("saving a manifest's base", e))?;
    }
    Ok(())
}

/// How `owner`'s manifest `id` was made from a base, when it was sent as a change touching
/// no symlink (see [`OnBase`]).
pub fn on_base_of(store_root: &Path, owner: &str, id: &str) -> Option<OnBase> {
    let dir = manifests_dir(store_root, owner)?;
    crate::is_valid_sha256(id)
        .then(|| on_base::read(&dir, id))
        .flatten()
}

/// The manifest `id` this owner had accepted; [`BundleError::UnknownBase`] when there is none.
pub fn load_manifest(
    store_root: &Path,
    owner: &str,
    id: &str,
) -> Result<TreeManifest, BundleError> {
    let dir = manifests_dir(store_root, owner)
        .ok_or_else(|| BundleError::UnknownBase(id.chars().take(80).collect()))?;
    load(&dir, id)
}

fn load(dir: &Path, id: &str) -> Result<TreeManifest, BundleError> {
    let unknown = || BundleError::UnknownBase(id.chars().take(80).collect());
    if !crate::is_valid_sha256(id) {
        return Err(unknown());
    }
    let path = dir.join(id);
    // Used now: retention keeps it a while longer.
    let _ = fs::File::open(&path).and_then(|f| f.set_modified(std::time::SystemTime::now()));
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(unknown()),
        Err(e) => return Err(BundleError::io("reading a manifest", e)),
    };
    TreeManifest::from_bytes(&bytes)
        .filter(|m| m.bundle_id() == id)
        .ok_or_else(unknown)
}

fn save(dir: &Path, id: &str, canonical: &[u8]) -> Result<(), BundleError> {
    fs::create_dir_all(dir).map_err(|e| BundleError::io("saving a manifest", e))?;
    write_atomically(&dir.join(id), canonical).map_err(|e| BundleError::io("saving a manifest", e))
}

/// Write `bytes` at `path` through a file beside it, so a reader sees all or nothing.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.{}", std::process::id()));
    fs::write(&partial, bytes)?;
    fs::rename(&partial, path)
}

#[cfg(test)]
mod tests;
