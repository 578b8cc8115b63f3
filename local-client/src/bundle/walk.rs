//! Which files go into a bundle: a gitignore-aware parallel walk of the tree, plus the tracked
//! files git knows about (a tracked file stays in even when a `.gitignore` matches it).
//!
//! Hidden files are included, `.git` (directory or gitlink file, at any depth) is not. Links are
//! never followed. Secret-looking files, links that leave the repository, and special files
//! (FIFOs, sockets, devices) are skipped and reported.

use std::collections::HashSet;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use ignore::overrides::OverrideBuilder;
use ignore::{WalkBuilder, WalkState};
use serde::Serialize;

use super::error::BundleError;
use super::{secrets, symlink, user_ignore};

/// A file or link that goes into the bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the bundle root.
    pub path: PathBuf,
    pub kind: EntryKind,
    /// What the walk saw of a file, to tell whether it changed since it was last hashed.
    pub stamp: Stamp,
}

/// A file's inode, modification time and change time as the walk saw them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    pub ino: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Stamp {
    #[cfg(unix)]
    fn of(meta: &Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            ino: meta.ino(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
            ctime_ns: meta.ctime().saturating_mul(1_000_000_000) + meta.ctime_nsec(),
        }
    }

    #[cfg(not(unix))]
    fn of(_meta: &Metadata) -> Self {
        Self::default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    File { size: u64, executable: bool },
    Symlink { target: PathBuf },
}

/// A path left out of the bundle, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub path: String,
    pub reason: SkipReason,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The name looks like it holds a secret.
    Secret,
    /// A symbolic link pointing out of the repository.
    SymlinkEscapes,
    /// A FIFO, socket or device.
    SpecialFile,
    /// The walk could not read it.
    Unreadable,
}

/// What the walk found, sorted by path.
#[derive(Debug, Default)]
pub struct Selection {
    pub entries: Vec<Entry>,
    pub skipped: Vec<Skipped>,
}

enum Found {
    Entry(Entry),
    Skipped(Skipped),
}

impl Found {
    fn path(&self) -> PathBuf {
        match self {
            Found::Entry(e) => e.path.clone(),
            Found::Skipped(s) => PathBuf::from(&s.path),
        }
    }
}

/// Walks `root` (absolute) and adds the `tracked` paths (relative) the walk did not reach;
/// then leaves out what `.ultraplanignore` names.
/// Absolute paths in `exclude` are left out silently (the bundle's own output file).
pub fn select(
    root: &Path,
    tracked: &super::git::Tracked,
    exclude: &[PathBuf],
) -> Result<Selection, BundleError> {
    let mut found = walk(root, exclude)?;
    let seen: HashSet<PathBuf> = found.iter().map(Found::path).collect();
    for rel in tracked.get() {
        if seen.contains(rel) || is_git_internal(rel) || exclude.contains(&root.join(rel)) {
            continue;
        }
        if let Ok(meta) = std::fs::symlink_metadata(root.join(rel)) {
            found.extend(classify(root, rel.clone(), &meta));
        }
    }
    if let Some(matcher) = user_ignore::load(root) {
        found.retain(|f| !user_ignore::ignores(&matcher, &f.path()));
    }
    Ok(into_selection(found))
}

fn walk(root: &Path, exclude: &[PathBuf]) -> Result<Vec<Found>, BundleError> {
    let walk_error = |source| BundleError::Walk {
        path: root.to_owned(),
        source,
    };
    let mut overrides = OverrideBuilder::new(root);
    overrides.add("!.git").map_err(walk_error)?;
    let walker = WalkBuilder::new(root)
        .hidden(false)
        .parents(false)
        .ignore(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .follow_links(false)
        .overrides(overrides.build().map_err(walk_error)?)
        .build_parallel();
    let (tx, rx) = mpsc::channel();
    walker.run(|| {
        let tx = tx.clone();
        Box::new(move |result| {
            let found = match result {
                Ok(entry) if entry.depth() == 0 => None,
                Ok(entry) if exclude.iter().any(|p| p == entry.path()) => None,
                Ok(entry) => visit(root, entry),
                Err(err) => Some(unreadable(root, err)),
            };
            match found.map(|f| tx.send(f)) {
                Some(Err(_)) => WalkState::Quit,
                _ => WalkState::Continue,
            }
        })
    });
    drop(tx);
    Ok(rx.into_iter().collect())
}

fn visit(root: &Path, entry: ignore::DirEntry) -> Option<Found> {
    let rel = entry.path().strip_prefix(root).ok()?.to_owned();
    match entry.metadata() {
        Ok(meta) => classify(root, rel, &meta),
        Err(err) => Some(unreadable(root, err)),
    }
}

fn classify(root: &Path, rel: PathBuf, meta: &Metadata) -> Option<Found> {
    let file_type = meta.file_type();
    if file_type.is_dir() {
        return None;
    }
    if secrets::is_secret(&rel) {
        return Some(skipped(&rel, SkipReason::Secret, None));
    }
    if file_type.is_symlink() {
        return Some(link(root, rel));
    }
    if !file_type.is_file() {
        return Some(skipped(&rel, SkipReason::SpecialFile, None));
    }
    let kind = EntryKind::File {
        size: meta.len(),
        executable: is_executable(meta),
    };
    Some(Found::Entry(Entry {
        path: rel,
        kind,
        stamp: Stamp::of(meta),
    }))
}

fn link(root: &Path, rel: PathBuf) -> Found {
    match std::fs::read_link(root.join(&rel)) {
        Ok(target) if symlink::stays_inside(root, &rel, &target) => Found::Entry(Entry {
            path: rel,
            kind: EntryKind::Symlink { target },
            stamp: Stamp::default(),
        }),
        Ok(target) => {
            let detail = format!("points to {}", target.display());
            skipped(&rel, SkipReason::SymlinkEscapes, Some(detail))
        }
        Err(err) => skipped(&rel, SkipReason::Unreadable, Some(err.to_string())),
    }
}

fn skipped(rel: &Path, reason: SkipReason, detail: Option<String>) -> Found {
    tracing::info!(path = %rel.display(), ?reason, "left out of the bundle");
    Found::Skipped(Skipped {
        path: rel.to_string_lossy().into_owned(),
        reason,
        detail,
    })
}

fn unreadable(root: &Path, err: ignore::Error) -> Found {
    tracing::warn!(%err, "cannot read a path while bundling");
    let path = error_path(&err)
        .and_then(|p| p.strip_prefix(root).ok())
        .map(Path::to_owned)
        .unwrap_or_default();
    skipped(&path, SkipReason::Unreadable, Some(err.to_string()))
}

fn error_path(err: &ignore::Error) -> Option<&Path> {
    match err {
        ignore::Error::WithPath { path, .. } => Some(path),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            error_path(err)
        }
        _ => None,
    }
}

fn is_git_internal(rel: &Path) -> bool {
    rel.components().any(|c| c.as_os_str() == ".git")
}

#[cfg(unix)]
fn is_executable(meta: &Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o100 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &Metadata) -> bool {
    false
}

fn into_selection(found: Vec<Found>) -> Selection {
    let mut selection = Selection::default();
    for f in found {
        match f {
            Found::Entry(e) => selection.entries.push(e),
            Found::Skipped(s) => selection.skipped.push(s),
        }
    }
    selection.entries.sort_by(|a, b| a.path.cmp(&b.path));
    selection.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    selection
}
