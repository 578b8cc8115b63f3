//! A bundle's tree built from its manifest and the owner's contents: every file hard-linked
//! (or copied) from the content store and every symlink made through the same extractor an
//! uploaded archive goes through, so the tree meets every rule an unpacked archive does:
//! paths, symlinks lexically and on the real tree, counts and sizes.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use super::contents::{OwnerStore, Received, receive};
use super::manifest::{Digest, Node, TreeManifest};
use crate::encoding::BundleEncoding;
use crate::error::BundleError;
use crate::extract::Extractor;
use crate::limits::BundleLimits;
use crate::staging::Staging;
use crate::stream::Shared;

/// What a materialised bundle holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Materialised {
    /// Files and symlinks.
    pub files: u64,
    /// Bytes of its files.
    pub unpacked_bytes: u64,
    /// Raw bytes of the contents upload.
    pub archive_bytes: u64,
}

/// Where a materialised bundle's manifest is kept beside its tree: `<store_root>/<id>.tree`.
pub fn tree_manifest_path(store_root: &Path, id: &str) -> PathBuf {
    store_root.join(format!("{id}.tree"))
}

/// Receive the contents `manifest` lacks from `reader`, then build bundle `id`'s tree at
/// `<store_root>/<id>/` from them and `owner`'s store. On any refusal everything this call
/// made is removed; on success the new contents join the owner's store. If the tree is there
/// already (another upload of the same tree), it is kept.
pub fn ingest_contents<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    manifest: &TreeManifest,
    id: &str,
    store_root: &Path,
    owner: &OwnerStore,
    limits: &BundleLimits,
) -> Result<Materialised, BundleError> {
    fs::create_dir_all(store_root).map_err(|e| BundleError::io("creating the bundle store", e))?;
    let staging = Staging::create(store_root, id)?;
    let scratch = staging.scratch("contents")?;
    // Any of the tree's contents may come (one the owner holds is taken again); whether each
    // is there is found when it is linked.
    let wanted = manifest
        .contents()
        .into_iter()
        .map(|(digest, (size, _))| (digest, size))
        .collect();
    let received = receive(reader, declared, &wanted, &scratch, limits)?;
    let mut sources = Sources {
        owner,
        received: &received,
        scratch: &scratch,
        made: HashMap::new(),
    };
    let root = fs::canonicalize(&staging.tree)
        .map_err(|e| BundleError::io("resolving the staging tree", e))?;
    let mut extractor = Extractor::new(root, limits, Rc::new(Shared::default()));
    for (path, node) in manifest.entries() {
        match node {
            Node::File {
                executable,
                size,
                blake3,
            } => {
                let source = sources.get(blake3, *executable, path)?;
                let placed = extractor.place_file(path.as_bytes(), &source, *executable, *size);
                match placed {
                    Err(BundleError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        return Err(missing(blake3, path));
                    }
                    other => other?,
                }
            }
            Node::Symlink { target } => {
                extractor.place_symlink(path.as_bytes(), target.as_bytes())?;
            }
        }
    }
    extractor.verify_symlinks()?;
    let manifest_file = tree_manifest_path(store_root, id);
    fs::write(&manifest_file, manifest.to_bytes())
        .map_err(|e| BundleError::io("saving the tree's manifest", e))?;
    if let Err(e) = staging.publish_tree(store_root, id) {
        let _ = fs::remove_file(&manifest_file);
        return Err(e);
    }
    sources.keep_all();
    Ok(Materialised {
        files: extractor.files,
        unpacked_bytes: extractor.written,
        archive_bytes: received.archive_bytes,
    })
}

fn missing(digest: &Digest, path: &str) -> BundleError {
    BundleError::MissingContent {
        digest: hex::encode(digest),
        path: path.to_owned(),
    }
}

/// Where each content's bytes are: just received, else the owner's store; an executable
/// copy made in scratch when neither has one.
struct Sources<'a> {
    owner: &'a OwnerStore,
    received: &'a Received,
    scratch: &'a Path,
    /// Executable copies made by this request.
    made: HashMap<Digest, PathBuf>,
}

impl Sources<'_> {
    /// Where content `digest` is, with the mode wanted. The store's copy may be missing: the
    /// link fails then.
    fn get(
        &mut self,
        digest: &Digest,
        executable: bool,
        path: &str,
    ) -> Result<PathBuf, BundleError> {
        let plain = match self.received.staged.get(digest) {
            Some(staged) => staged.clone(),
            None => self.owner.path(digest, false),
        };
        if !executable {
            return Ok(plain);
        }
        if let Some(made) = self.made.get(digest) {
            return Ok(made.clone());
        }
        let held = self.owner.path(digest, true);
        if !self.received.staged.contains_key(digest) && held.is_file() {
            return Ok(held);
        }
        let made = self.scratch.join(format!("{}.x", hex::encode(digest)));
        match fs::copy(&plain, &made) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(missing(digest, path));
            }
            Err(e) => return Err(BundleError::io("copying held content", e)),
        }
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&made, fs::Permissions::from_mode(0o755))
            .map_err(|e| BundleError::io("setting file permissions", e))?;
        self.made.insert(*digest, made.clone());
        Ok(made)
    }

    /// Move what this request received and made into the owner's store. A failure costs only
    /// a later upload of that content again, so it is logged, not fatal.
    fn keep_all(&self) {
        let received = self.received.staged.iter().map(|(d, p)| (d, p, false));
        let made = self.made.iter().map(|(d, p)| (d, p, true));
        for (digest, path, executable) in received.chain(made) {
            if let Err(error) = self.owner.keep(path, digest, executable) {
                tracing::warn!(%error, "could not keep uploaded content");
            }
        }
    }
}
