//! The repository bundler: what teleport uploads.
//!
//! A bundle is a deterministic `.tar.gz` (or `.tar.zst`, when the server accepts zstd) of the
//! work tree as it is now: tracked files with
//! their uncommitted edits and untracked files that are not ignored, `.git` excluded, hidden
//! files included, secrets left out, links stored as links (never followed, and never one that
//! leaves the repository). The tar stream is cut into fixed 1 MiB chunks compressed in parallel
//! as independent gzip members (zstd frames), so the same tree gives the same bytes and the same SHA-256 on
//! every machine, and the server can skip an upload it already holds.
//!
//! Inside a git work tree the bundle root is the top level, whatever subdirectory was given.

mod codec;
mod compress;
mod error;
mod file;
mod git;
mod plan;
mod secrets;
mod symlink;
mod user_ignore;
mod walk;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use codec::Codec;
pub use error::BundleError;
pub use file::{write_file, write_to_dir};
pub use secrets::is_secret;
pub use walk::{Entry, EntryKind, SkipReason, Skipped, Stamp};

/// gzip compression levels accepted (the fast end: bundling speed matters more than size).
pub const LEVELS: std::ops::RangeInclusive<u32> = 1..=6;

/// The default compression level.
pub const DEFAULT_LEVEL: u32 = 1;

/// How to bundle.
#[derive(Debug, Clone)]
pub struct Options {
    /// The compression.
    pub codec: Codec,
    /// Level, within the codec's [`Codec::levels`].
    pub level: u32,
    /// Compression threads; `None` uses every core.
    pub threads: Option<usize>,
    /// Absolute paths never bundled (the output file, when it lives in the tree).
    pub exclude: Vec<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            codec: Codec::Gzip,
            level: DEFAULT_LEVEL,
            threads: None,
            exclude: Vec::new(),
        }
    }
}

/// What the server is told about the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Manifest {
    /// `HEAD` when the tree is a git repository with at least one commit.
    pub base_commit: Option<String>,
    pub branch: Option<String>,
    /// Tracked paths that differ from `HEAD` (deletions included, secrets left out).
    pub dirty_files: Vec<String>,
    /// Untracked, non-ignored paths in the bundle.
    pub untracked_files: Vec<String>,
    /// Files and links in the bundle.
    pub files: u64,
    /// Size of the archive.
    pub bytes: u64,
}

/// A finished bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bundle {
    /// The directory that was bundled.
    pub root: PathBuf,
    /// SHA-256 of the archive, lower-case hex.
    pub sha256: String,
    /// How the archive is compressed.
    pub encoding: Codec,
    pub manifest: Manifest,
    /// Paths left out, and why.
    pub skipped: Vec<Skipped>,
    /// The largest files in it, largest first (at most [`LARGEST_LISTED`]): what to name in
    /// `.ultraplanignore` when the bundle is over a server's limit.
    pub largest: Vec<(String, u64)>,
}

/// How many of the largest files a bundle lists.
pub const LARGEST_LISTED: usize = 5;

fn largest(entries: &[walk::Entry]) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = entries
        .iter()
        .filter_map(|e| match e.kind {
            walk::EntryKind::File { size, .. } => Some((e.path.display().to_string(), size)),
            walk::EntryKind::Symlink { .. } => None,
        })
        .collect();
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    files.truncate(LARGEST_LISTED);
    files
}

/// The directory a bundle of `path` is rooted at: the git top level, else `path` itself
/// (canonical when it exists).
pub fn repo_root(path: &Path) -> PathBuf {
    git::toplevel(path).unwrap_or_else(|| path.canonicalize().unwrap_or_else(|_| path.to_owned()))
}

/// Bundles the tree at `path` into `out`.
pub fn create<W: Write>(path: &Path, options: &Options, out: W) -> Result<Bundle, BundleError> {
    if !options.codec.levels().contains(&options.level) {
        return Err(BundleError::Level(options.level));
    }
    let path = path.canonicalize().map_err(|source| BundleError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !path.is_dir() {
        return Err(BundleError::NotADirectory { path });
    }
    let (repo, selection) = git::inspect_while(&path, |root, tracked| {
        walk::select(root, tracked, &options.exclude)
    });
    let selection = selection?;
    let root = repo.toplevel.clone().unwrap_or(path);
    let plan = plan::plan(&selection.entries, plan::CHUNK_SIZE)?;
    let source = compress::Source {
        root: &root,
        entries: &selection.entries,
        plan: &plan,
    };
    let setting = compress::Setting {
        codec: options.codec,
        level: options.level,
    };
    let written = compress::compress(&source, setting, threads(options), out)?;
    tracing::info!(
        files = selection.entries.len(),
        bytes = written.bytes,
        encoding = options.codec.extension(),
        "bundled {}",
        root.display()
    );
    let manifest = manifest(repo, &selection, written.bytes);
    Ok(Bundle {
        root,
        sha256: written.sha256,
        encoding: options.codec,
        manifest,
        largest: largest(&selection.entries),
        skipped: selection.skipped,
    })
}

/// The tree a bundle of `path` would hold, without archiving it: what an incremental bundle
/// is made of.
pub struct Scan {
    /// The directory that was walked.
    pub root: PathBuf,
    /// The files and links, sorted by path.
    pub entries: Vec<Entry>,
    repo: git::RepoState,
    /// `git status`, asked once the walk was done; [`Scan::into_bundle`] waits for it.
    status: git::PendingStatus,
    selection_skipped: Vec<Skipped>,
}

/// Walk the tree at `path` as [`create`] would.
pub fn scan(path: &Path) -> Result<Scan, BundleError> {
    let path = path.canonicalize().map_err(|source| BundleError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !path.is_dir() {
        return Err(BundleError::NotADirectory { path });
    }
    let (repo, selection, status) =
        git::inspect_then(&path, |root, tracked| walk::select(root, tracked, &[]));
    let selection = selection?;
    let root = repo.toplevel.clone().unwrap_or(path);
    Ok(Scan {
        root,
        entries: selection.entries,
        repo,
        status,
        selection_skipped: selection.skipped,
    })
}

impl Scan {
    /// The bundle this tree is, under id `sha256`, `bytes` being what was sent for it. Waits
    /// for `git status` if it is still running.
    pub fn into_bundle(self, sha256: String, encoding: Codec, bytes: u64) -> Bundle {
        let selection = walk::Selection {
            entries: self.entries,
            skipped: self.selection_skipped,
        };
        let mut repo = self.repo;
        repo.dirty = self.status.wait();
        let manifest = manifest(repo, &selection, bytes);
        Bundle {
            root: self.root,
            sha256,
            encoding,
            manifest,
            largest: largest(&selection.entries),
            skipped: selection.skipped,
        }
    }
}

fn threads(options: &Options) -> usize {
    options
        .threads
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

fn manifest(repo: git::RepoState, selection: &walk::Selection, bytes: u64) -> Manifest {
    let skipped: std::collections::HashSet<&str> =
        selection.skipped.iter().map(|s| s.path.as_str()).collect();
    Manifest {
        untracked_files: untracked(&repo, selection),
        base_commit: repo.base_commit,
        branch: repo.branch,
        dirty_files: repo
            .dirty
            .into_iter()
            .filter(|p| !skipped.contains(p.as_str()))
            .collect(),
        files: selection.entries.len() as u64,
        bytes,
    }
}

/// The bundled files git does not track (none outside a work tree).
fn untracked(repo: &git::RepoState, selection: &walk::Selection) -> Vec<String> {
    if repo.toplevel.is_none() {
        return Vec::new();
    }
    let tracked: std::collections::HashSet<&Path> =
        repo.tracked.iter().map(PathBuf::as_path).collect();
    selection
        .entries
        .iter()
        .filter(|e| !tracked.contains(e.path.as_path()))
        .map(|e| e.path.to_string_lossy().into_owned())
        .collect()
}
