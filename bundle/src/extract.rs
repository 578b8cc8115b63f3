//! Entry-by-entry extraction into the staging tree, refusing anything hostile.
//!
//! Invariants that make the checks sound:
//! - the staging tree is fresh and only this extractor writes to it;
//! - nothing is ever replaced (a second entry for an existing path is refused, except a
//!   directory entry for an existing directory), so a directory once seen stays a directory;
//! - every directory we create is recorded in [`DirTree`]; a parent that is not recorded is
//!   looked at with `symlink_metadata` (never followed) and refused if it is a symlink or file.

use std::ffi::OsStr;
use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use tar::EntryType;

use super::error::{BundleError, display_path};
use super::limits::{BundleLimits, MAX_HEADER_BYTES};
use super::paths::{self, PathIssue};
use super::stream::{Shared, stream_error};
use super::tree::{ROOT, Tree};

const DIR_MODE: u32 = 0o755;

/// Where a new entry goes: its parent directory's id and depth, its full path and its name.
pub(super) struct Place {
    pub parent: u32,
    pub depth: usize,
    pub full: PathBuf,
    pub name: Vec<u8>,
}

/// The refusal for a second entry at one path.
fn duplicate(shown: &str) -> BundleError {
    BundleError::PathConflict {
        path: shown.to_owned(),
        reason: "already exists in the bundle (duplicate entry)",
    }
}

/// The refusal for a path that broke a lexical rule.
pub(crate) fn path_error(issue: PathIssue, shown: &str, max_path_len: usize) -> BundleError {
    let path = shown.to_owned();
    match issue {
        PathIssue::Absolute | PathIssue::WindowsPrefix => BundleError::AbsolutePath {
            path,
            reason: issue.reason(),
        },
        PathIssue::Traversal => BundleError::PathTraversal { path },
        PathIssue::TooLong => BundleError::PathTooLong {
            path,
            max: max_path_len,
        },
        PathIssue::Empty | PathIssue::Nul | PathIssue::LongComponent | PathIssue::GitDir => {
            BundleError::InvalidPath {
                path,
                reason: issue.reason(),
            }
        }
    }
}

/// The entry kinds that get extracted; everything else is refused.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    HardLink,
}

pub(crate) struct Extractor<'l> {
    /// Canonical path of the staging tree.
    pub(super) root: PathBuf,
    pub(super) limits: &'l BundleLimits,
    shared: Rc<Shared>,
    pub(super) tree: Tree,
    /// Symlinks created, as (parent dir id, name), in order.
    pub(super) symlinks: Vec<(u32, Box<[u8]>)>,
    /// Symlink resolution work done so far, against `MAX_RESOLVE_STEPS`.
    pub(super) resolve_steps: u64,
    entries: u64,
    /// Bytes of entry data consumed (written or skipped), against `max_unpacked_bytes`.
    consumed: u64,
    pub(super) files: u64,
    pub(super) written: u64,
    buf: Vec<u8>,
}

impl<'l> Extractor<'l> {
    pub fn new(root: PathBuf, limits: &'l BundleLimits, shared: Rc<Shared>) -> Self {
        Self {
            root,
            limits,
            shared,
            tree: Tree::default(),
            symlinks: Vec::new(),
            resolve_steps: 0,
            entries: 0,
            consumed: 0,
            files: 0,
            written: 0,
            buf: vec![0; 64 * 1024],
        }
    }

    /// Extract every entry of the (decompressed) tar stream.
    pub fn extract_all<R: Read>(&mut self, tar_stream: R) -> Result<(), BundleError> {
        let mut archive = tar::Archive::new(tar_stream);
        let mut entries = archive
            .entries()
            .map_err(|e| stream_error(&self.shared, self.limits, e, None))?;
        loop {
            // Headers, long names and pax records are buffered by the tar crate: bound them.
            self.shared.begin_headers(MAX_HEADER_BYTES);
            let next = entries.next();
            self.shared.end_headers();
            let Some(entry) = next else {
                return Ok(());
            };
            let mut entry = entry.map_err(|e| stream_error(&self.shared, self.limits, e, None))?;
            self.entry(&mut entry)?;
        }
    }

    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), BundleError> {
        let raw_path = entry.path_bytes().into_owned();
        let shown = display_path(&raw_path);
        self.count_entry(&shown)?;
        let size = entry.size();
        if self.consumed.saturating_add(size) > self.limits.max_unpacked_bytes {
            return Err(self.too_large(&shown));
        }
        let kind = match entry.header().entry_type() {
            EntryType::XGlobalHeader => {
                tracing::debug!(entry = %shown, "skipping pax global header");
                return self.pump(entry, None, &shown).map(drop);
            }
            // Old (pre-POSIX) archives mark directories as regular files named `dir/`.
            EntryType::Regular if raw_path.ends_with(b"/") => Kind::Dir,
            EntryType::Regular | EntryType::Continuous => Kind::File,
            EntryType::Directory => Kind::Dir,
            EntryType::Symlink => Kind::Symlink,
            EntryType::Link => Kind::HardLink,
            other => {
                let kind = match other {
                    EntryType::Char => "character device".to_owned(),
                    EntryType::Block => "block device".to_owned(),
                    EntryType::Fifo => "FIFO".to_owned(),
                    EntryType::GNUSparse => "GNU sparse file".to_owned(),
                    _ => format!("unsupported type {:?}", char::from(other.as_byte())),
                };
                return Err(BundleError::SpecialFile { path: shown, kind });
            }
        };
        let Some(place) = self.locate(&raw_path, kind == Kind::Dir, &shown)? else {
            return self.pump(entry, None, &shown).map(drop);
        };
        let Place {
            parent,
            depth,
            full,
            name,
        } = place;
        match kind {
            Kind::File => self.file(entry, &full, &shown)?,
            Kind::Dir => {
                self.mkdir(&full, &shown)?;
                self.tree.add_dir(parent, &name);
            }
            Kind::Symlink => {
                let target = entry.link_name_bytes().unwrap_or_default().into_owned();
                self.symlink(&target, &full, parent, depth, &shown)?;
            }
            Kind::HardLink => self.hard_link(entry, &full, &shown)?,
        }
        // Links and directories should carry no data; skip (and count) any they do.
        self.pump(entry, None, &shown).map(drop)
    }

    /// Where a new entry at `raw_path` goes, once its path passed every rule and its parent
    /// directories exist (created as needed). `None` when the entry is a directory that
    /// exists already (or the root): nothing to do.
    pub(super) fn locate(
        &mut self,
        raw_path: &[u8],
        is_dir: bool,
        shown: &str,
    ) -> Result<Option<Place>, BundleError> {
        self.locate_checked(raw_path, is_dir, shown, true)
    }

    fn locate_checked(
        &mut self,
        raw_path: &[u8],
        is_dir: bool,
        shown: &str,
        look_first: bool,
    ) -> Result<Option<Place>, BundleError> {
        let comps = paths::components(raw_path, self.limits.max_path_len)
            .map_err(|issue| path_error(issue, shown, self.limits.max_path_len))?;
        if !is_dir && paths::names_a_directory(raw_path) {
            return Err(BundleError::InvalidPath {
                path: shown.to_owned(),
                reason: "a file or link named like a directory (ends in `/` or `.`)",
            });
        }
        let Some((name, parent_comps)) = comps.split_last() else {
            if is_dir {
                return Ok(None);
            }
            return Err(BundleError::InvalidPath {
                path: shown.to_owned(),
                reason: "names the bundle root",
            });
        };
        let (parent, parent_path) = self.ensure_dirs(parent_comps, shown)?;
        let full = parent_path.join(OsStr::from_bytes(name));
        if look_first {
            match fs::symlink_metadata(&full) {
                Ok(meta) if is_dir && meta.is_dir() => return Ok(None),
                Ok(_) => return Err(duplicate(shown)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(self.fs_error("inspecting an entry", e, shown)),
            }
        }
        Ok(Some(Place {
            parent,
            depth: parent_comps.len(),
            full,
            name: name.to_vec(),
        }))
    }

    pub(super) fn count_entry(&mut self, shown: &str) -> Result<(), BundleError> {
        self.entries += 1;
        if self.entries > self.limits.max_files {
            return Err(BundleError::TooManyFiles {
                path: shown.to_owned(),
                max: self.limits.max_files,
            });
        }
        Ok(())
    }

    fn too_large(&self, shown: &str) -> BundleError {
        BundleError::TooLarge {
            path: shown.to_owned(),
            max: self.limits.max_unpacked_bytes,
        }
    }

    /// A filesystem error while writing the tree: a name the OS refuses is the client's
    /// fault, anything else is ours.
    pub(super) fn fs_error(&self, context: &str, e: io::Error, shown: &str) -> BundleError {
        if e.kind() == io::ErrorKind::InvalidFilename {
            return BundleError::PathTooLong {
                path: shown.to_owned(),
                max: self.limits.max_path_len,
            };
        }
        BundleError::io(format!("{context} ({shown:?})"), e)
    }

    /// Make sure every component of `comps` is a real directory, creating missing ones.
    /// Returns the id and absolute path of the last one.
    fn ensure_dirs(&mut self, comps: &[&[u8]], shown: &str) -> Result<(u32, PathBuf), BundleError> {
        let mut id = ROOT;
        let mut path = self.root.clone();
        for (depth, comp) in comps.iter().enumerate() {
            path.push(OsStr::from_bytes(comp));
            if let Some(child) = self.tree.dir(id, comp) {
                id = child;
                continue;
            }
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let symlink = display_path(&comps[..=depth].join(&b'/'));
                    return Err(BundleError::SymlinkInPath {
                        path: shown.to_owned(),
                        symlink,
                    });
                }
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    return Err(BundleError::PathConflict {
                        path: shown.to_owned(),
                        reason: "a parent of this entry is not a directory",
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.count_entry(shown)?;
                    self.mkdir(&path, shown)?;
                }
                Err(e) => return Err(self.fs_error("inspecting a parent directory", e, shown)),
            }
            id = self.tree.add_dir(id, comp);
        }
        Ok((id, path))
    }

    pub(super) fn mkdir(&self, path: &Path, shown: &str) -> Result<(), BundleError> {
        DirBuilder::new()
            .mode(DIR_MODE)
            .create(path)
            .map_err(|e| self.fs_error("creating a directory", e, shown))?;
        // Explicitly, so the server's umask doesn't decide what the sandbox user can read.
        fs::set_permissions(path, Permissions::from_mode(DIR_MODE))
            .map_err(|e| self.fs_error("setting directory permissions", e, shown))
    }

    fn file<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        full: &Path,
        shown: &str,
    ) -> Result<(), BundleError> {
        let mode = entry
            .header()
            .mode()
            .map_err(|e| BundleError::MalformedArchive {
                entry: Some(shown.to_owned()),
                detail: e.to_string(),
            })?;
        // Never setuid/setgid/sticky, never group/world-writable, owner is the server.
        let mode = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true) // O_EXCL: never opens through a symlink
            .mode(mode)
            .open(full)
            .map_err(|e| self.fs_error("creating a file", e, shown))?;
        let expected = entry.size();
        let copied = self.pump(entry, Some(&mut file), shown)?;
        if copied != expected {
            return Err(BundleError::MalformedArchive {
                entry: Some(shown.to_owned()),
                detail: format!("entry data is truncated ({copied} of {expected} bytes)"),
            });
        }
        file.set_permissions(Permissions::from_mode(mode))
            .map_err(|e| self.fs_error("setting file permissions", e, shown))?;
        self.files += 1;
        self.written += copied;
        Ok(())
    }

    /// Make room for a file of `size` bytes at `raw_path` whose bytes are already on this
    /// filesystem (content the server holds), under every rule an archive entry meets: the
    /// path, its parents (created), the entry and byte limits. Returns where the file goes;
    /// the caller puts it there (a hard link) before the tree is published.
    pub(crate) fn reserve_file(
        &mut self,
        raw_path: &[u8],
        size: u64,
    ) -> Result<PathBuf, BundleError> {
        let shown = display_path(raw_path);
        self.count_entry(&shown)?;
        self.consumed = self.consumed.saturating_add(size);
        if self.consumed > self.limits.max_unpacked_bytes {
            return Err(self.too_large(&shown));
        }
        let place = self.locate_new(raw_path, &shown)?;
        self.files += 1;
        self.written += size;
        Ok(place.full)
    }

    /// [`locate`](Self::locate) for an entry of a manifest: its paths are unique and none is
    /// under another, so the entry itself is not looked for first (creating it fails with
    /// `AlreadyExists` if it is there).
    fn locate_new(&mut self, raw_path: &[u8], shown: &str) -> Result<Place, BundleError> {
        let root = || BundleError::InvalidPath {
            path: shown.to_owned(),
            reason: "names the bundle root",
        };
        self.locate_checked(raw_path, false, shown, false)?
            .ok_or_else(root)
    }

    /// A symlink placed at `raw_path` under every rule an archive entry meets.
    pub(crate) fn place_symlink(
        &mut self,
        raw_path: &[u8],
        target: &[u8],
    ) -> Result<(), BundleError> {
        let shown = display_path(raw_path);
        self.count_entry(&shown)?;
        let place = self.locate_new(raw_path, &shown)?;
        self.symlink(target, &place.full, place.parent, place.depth, &shown)
    }

    /// Stream the rest of the entry's data into `out` (or nowhere), bounded by the unpacked
    /// limit, through a fixed buffer.
    fn pump<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        mut out: Option<&mut File>,
        shown: &str,
    ) -> Result<u64, BundleError> {
        let mut buf = std::mem::take(&mut self.buf);
        let mut total = 0u64;
        let result = loop {
            let n = match entry.read(&mut buf) {
                Ok(0) => break Ok(total),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let entry = Some(shown.to_owned());
                    break Err(stream_error(&self.shared, self.limits, e, entry));
                }
            };
            total += n as u64;
            self.consumed = self.consumed.saturating_add(n as u64);
            if self.consumed > self.limits.max_unpacked_bytes {
                break Err(self.too_large(shown));
            }
            if let Some(out) = out.as_mut()
                && let Err(e) = out.write_all(&buf[..n])
            {
                break Err(self.fs_error("writing a file", e, shown));
            }
        };
        self.buf = buf;
        result
    }
}
