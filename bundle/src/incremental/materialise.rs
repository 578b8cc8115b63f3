//! A bundle's tree built from its manifest and the owner's contents, in steps. The contents
//! are received and checked against their names ([`receive_contents`]). Then the tree is laid
//! out in staging through the same extractor an uploaded archive goes through (paths,
//! symlinks lexically and on the real tree, counts and sizes) and every file's content found
//! ([`Incoming::lay_out`]): everything that can be refused. Last, the files are hard-linked (or
//! copied) from the content store and the tree is published ([`Prepared::finish`]): work that
//! can only fail on the server's side, done after the upload is answered.
//!
//! A change on a base whose tree is here, touching no symlink ([`super::OnBase`]), is answered
//! once its changed files' contents are found ([`Incoming::check_present`]), before the tree
//! is laid out: the base's tree passed every check the new one could fail on disk.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
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

/// A tree that passed every check, its files still to be linked ([`Prepared::finish`]).
/// Dropping it removes everything it made.
#[derive(Debug)]
pub struct Prepared {
    staging: Staging,
    id: String,
    manifest_bytes: Vec<u8>,
    /// (content, where it goes, executable).
    links: Vec<(PathBuf, PathBuf, bool)>,
    /// Contents to move into the owner's store: (digest, staged file, executable).
    keep: Vec<(Digest, PathBuf, bool)>,
    owner: OwnerStore,
    stats: Materialised,
}

/// [`prepare_contents`] and [`Prepared::finish`] at once.
pub fn ingest_contents<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    manifest: &TreeManifest,
    id: &str,
    store_root: &Path,
    owner: &OwnerStore,
    limits: &BundleLimits,
) -> Result<Materialised, BundleError> {
    prepare_contents(reader, declared, manifest, id, store_root, owner, limits)?.finish(store_root)
}

/// Receive the contents `manifest` lacks from `reader` and check bundle `id`'s tree in a
/// staging directory: everything but linking its files. A refusal removes all it made.
pub fn prepare_contents<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    manifest: &TreeManifest,
    id: &str,
    store_root: &Path,
    owner: &OwnerStore,
    limits: &BundleLimits,
) -> Result<Prepared, BundleError> {
    receive_contents(reader, declared, manifest, id, store_root, owner, limits)?
        .lay_out(manifest, limits)
}

/// Contents received for bundle `id`, checked against their names, in its staging directory;
/// its tree not laid out yet ([`Incoming::lay_out`]). Dropping it removes everything it made.
#[derive(Debug)]
pub struct Incoming {
    staging: Staging,
    scratch: PathBuf,
    received: Received,
    id: String,
    owner: OwnerStore,
}

/// Receive the contents of `manifest` the upload in `reader` carries (any of the tree's, each
/// once, hashing to its name) into a staging directory for bundle `id`.
pub fn receive_contents<R: Read>(
    reader: R,
    declared: Option<BundleEncoding>,
    manifest: &TreeManifest,
    id: &str,
    store_root: &Path,
    owner: &OwnerStore,
    limits: &BundleLimits,
) -> Result<Incoming, BundleError> {
    fs::create_dir_all(store_root).map_err(|e| BundleError::io("creating the bundle store", e))?;
    let staging = Staging::create(store_root, id)?;
    let scratch = staging.scratch("contents")?;
    // Any of the tree's contents may come (one the owner holds is taken again).
    let wanted: std::collections::BTreeMap<Digest, u64> = manifest
        .contents()
        .into_iter()
        .map(|(digest, (size, _))| (digest, size))
        .collect();
    let received = receive(reader, declared, &wanted, &scratch, limits)?;
    Ok(Incoming {
        staging,
        scratch,
        received,
        id: id.to_owned(),
        owner: owner.clone(),
    })
}

impl Incoming {
    /// Raw bytes of the contents upload.
    pub fn archive_bytes(&self) -> u64 {
        self.received.archive_bytes
    }

    /// Every file of `manifest` at one of `paths` has its content here: received now, or held
    /// by the owner. The check a change on a base needs before it is answered ([`OnBase`]);
    /// [`lay_out`](Self::lay_out) checks the whole tree.
    ///
    /// [`OnBase`]: super::OnBase
    pub fn check_present(
        &self,
        manifest: &TreeManifest,
        paths: &[String],
    ) -> Result<(), BundleError> {
        for path in paths {
            let Some(Node::File { blake3, .. }) = manifest.entries.get(path) else {
                continue;
            };
            if !self.received.staged.contains_key(blake3) && !self.owner.has(blake3) {
                return Err(missing(blake3, path));
            }
        }
        Ok(())
    }

    /// Lay the tree out in staging through the same extractor an uploaded archive goes
    /// through (paths, symlinks lexically and on the real tree, counts and sizes), finding
    /// every file's content: everything but linking the files.
    pub fn lay_out(
        self,
        manifest: &TreeManifest,
        limits: &BundleLimits,
    ) -> Result<Prepared, BundleError> {
        let received = &self.received;
        let held = self.owner.holding(
            manifest
                .contents()
                .into_keys()
                .filter(|d| !received.staged.contains_key(d))
                .collect::<Vec<_>>()
                .iter(),
        );
        let mut sources = Sources {
            owner: &self.owner,
            received,
            held: &held,
            scratch: &self.scratch,
            made: HashMap::new(),
        };
        let root = fs::canonicalize(&self.staging.tree)
            .map_err(|e| BundleError::io("resolving the staging tree", e))?;
        let mut extractor = Extractor::new(root, limits, Rc::new(Shared::default()));
        let mut links = Vec::with_capacity(manifest.len());
        for (path, node) in manifest.entries() {
            match node {
                Node::File {
                    executable,
                    size,
                    blake3,
                } => {
                    let source = sources.get(blake3, *executable, path)?;
                    let target = extractor.reserve_file(path.as_bytes(), *size)?;
                    links.push((source, target, *executable));
                }
                Node::Symlink { target } => {
                    extractor.place_symlink(path.as_bytes(), target.as_bytes())?;
                }
            }
        }
        extractor.verify_symlinks()?;
        let keep = sources.to_keep();
        Ok(Prepared {
            id: self.id,
            manifest_bytes: manifest.to_bytes(),
            links,
            keep,
            owner: self.owner,
            stats: Materialised {
                files: extractor.files,
                unpacked_bytes: extractor.written,
                archive_bytes: received.archive_bytes,
            },
            staging: self.staging,
        })
    }
}

/// What a materialised bundle of `manifest` holds, as [`Prepared::stats`] counts it: files
/// and symlinks, and the bytes of the files.
pub fn stats_of(manifest: &TreeManifest, archive_bytes: u64) -> Materialised {
    let unpacked_bytes = manifest
        .entries()
        .filter_map(|(_, node)| match node {
            Node::File { size, .. } => Some(*size),
            Node::Symlink { .. } => None,
        })
        .fold(0u64, u64::saturating_add);
    Materialised {
        files: manifest.len() as u64,
        unpacked_bytes,
        archive_bytes,
    }
}

/// A tree whose upload was answered, still to be built.
#[derive(Debug)]
pub enum Pending {
    /// Laid out and checked: its files are to be linked.
    LaidOut(Prepared),
    /// A change on a base, answered once its changed contents were found: laid out (and so
    /// checked on disk) now.
    Received {
        incoming: Incoming,
        manifest: TreeManifest,
        limits: BundleLimits,
    },
}

impl Pending {
    /// Build the tree and publish it at `<store_root>/<id>/`.
    pub fn finish(self, store_root: &Path) -> Result<Materialised, BundleError> {
        match self {
            Pending::LaidOut(prepared) => prepared.finish(store_root),
            Pending::Received {
                incoming,
                manifest,
                limits,
            } => incoming.lay_out(&manifest, &limits)?.finish(store_root),
        }
    }
}

impl Prepared {
    pub fn stats(&self) -> Materialised {
        self.stats
    }

    /// Link every file, publish the tree at `<store_root>/<id>/` with its manifest, and move
    /// the new contents into the owner's store. If the tree is there already (another upload
    /// of the same tree), it is kept.
    pub fn finish(self, store_root: &Path) -> Result<Materialised, BundleError> {
        for (source, target, executable) in &self.links {
            link_or_copy(source, target, *executable)
                .map_err(|e| BundleError::io(format!("placing {}", target.display()), e))?;
        }
        let manifest_file = tree_manifest_path(store_root, &self.id);
        fs::write(&manifest_file, &self.manifest_bytes)
            .map_err(|e| BundleError::io("saving the tree's manifest", e))?;
        if let Err(e) = self.staging.publish_tree(store_root, &self.id) {
            let _ = fs::remove_file(&manifest_file);
            return Err(e);
        }
        // A failure here costs only a later upload of that content again.
        for (digest, path, executable) in &self.keep {
            if let Err(error) = self.owner.keep(path, digest, *executable) {
                tracing::warn!(%error, "could not keep uploaded content");
            }
        }
        Ok(self.stats)
    }
}

/// Hard-link `source` (which has the mode wanted) at the new path `target`, or copy it there
/// when linking fails (too many links, another filesystem); never replaces anything.
fn link_or_copy(source: &Path, target: &Path, executable: bool) -> io::Result<()> {
    match fs::hard_link(source, target) {
        Ok(()) => return Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotFound
            ) =>
        {
            return Err(e);
        }
        Err(_) => {}
    }
    let mode = if executable { 0o755 } else { 0o644 };
    let mut from = File::open(source)?;
    let mut to = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(target)?;
    io::copy(&mut from, &mut to)?;
    to.set_permissions(Permissions::from_mode(mode))
}

fn missing(digest: &Digest, path: &str) -> BundleError {
    BundleError::MissingContent {
        digest: hex::encode(digest),
        path: path.to_owned(),
    }
}

/// Where each content's bytes are: just received, else the owner's store (checked to be
/// there); an executable copy made in scratch when neither has one.
struct Sources<'a> {
    owner: &'a OwnerStore,
    received: &'a Received,
    /// The other contents the owner's store holds.
    held: &'a HashSet<Digest>,
    scratch: &'a Path,
    /// Executable copies made by this request.
    made: HashMap<Digest, PathBuf>,
}

impl Sources<'_> {
    fn get(
        &mut self,
        digest: &Digest,
        executable: bool,
        path: &str,
    ) -> Result<PathBuf, BundleError> {
        let plain = match self.received.staged.get(digest) {
            Some(staged) => staged.clone(),
            None if self.held.contains(digest) => self.owner.path(digest, false),
            None => return Err(missing(digest, path)),
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
        fs::copy(&plain, &made).map_err(|e| BundleError::io("copying held content", e))?;
        fs::set_permissions(&made, Permissions::from_mode(0o755))
            .map_err(|e| BundleError::io("setting file permissions", e))?;
        self.made.insert(*digest, made.clone());
        Ok(made)
    }

    /// What this request received and made, to move into the owner's store.
    fn to_keep(&self) -> Vec<(Digest, PathBuf, bool)> {
        let received = self
            .received
            .staged
            .iter()
            .map(|(d, p)| (*d, p.clone(), false));
        let made = self.made.iter().map(|(d, p)| (*d, p.clone(), true));
        received.chain(made).collect()
    }
}
