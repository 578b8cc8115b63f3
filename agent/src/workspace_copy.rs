//! A throw-away copy of the workspace for the verifier, so nothing it runs can reach the
//! execution's patch. Regular files, directories and symlinks are copied as they are (links are
//! not followed), `.git` is left out, and the copy is refused before anything is written when
//! it would pass [`CopyLimits`]. The copy is removed when its [`WorkspaceCopy`] is dropped.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use thiserror::Error;

/// The most bytes of regular files a copy may hold.
pub const MAX_COPY_BYTES: u64 = 128 * 1024 * 1024;
/// The most entries (files, directories, links) a copy may hold.
pub const MAX_COPY_ENTRIES: usize = 20_000;

/// The name left out wherever it appears.
const SKIPPED: &str = ".git";

/// How big a copy may get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimits {
    pub max_bytes: u64,
    pub max_entries: usize,
}

impl Default for CopyLimits {
    fn default() -> Self {
        CopyLimits {
            max_bytes: MAX_COPY_BYTES,
            max_entries: MAX_COPY_ENTRIES,
        }
    }
}

/// Why the workspace could not be copied.
#[derive(Debug, Error)]
pub enum CopyError {
    #[error("the workspace holds more than {max} bytes of files (the copy limit)")]
    TooLarge { max: u64 },
    #[error("the workspace holds more than {max} files, directories and links (the copy limit)")]
    TooManyEntries { max: usize },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> CopyError {
    let path = path.to_path_buf();
    move |source| CopyError::Io {
        action,
        path,
        source,
    }
}

/// A copy of the workspace; dropping it removes the directory.
#[derive(Debug)]
pub struct WorkspaceCopy {
    path: PathBuf,
}

impl WorkspaceCopy {
    /// The copy's root.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkspaceCopy {
    fn drop(&mut self) {
        match fs::remove_dir_all(&self.path) {
            Ok(()) => tracing::debug!(path = %self.path.display(), "removed the workspace copy"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "could not remove the workspace copy");
            }
        }
    }
}

/// What one entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Link,
}

/// Copies the tree at `root` into a new directory under `base`.
pub fn copy_workspace(
    root: &Path,
    base: &Path,
    limits: CopyLimits,
) -> Result<WorkspaceCopy, CopyError> {
    let entries = scan(root, limits)?;
    fs::create_dir_all(base).map_err(io_error("create", base))?;
    let copy = WorkspaceCopy {
        path: fresh_dir(base)?,
    };
    for (relative, kind) in &entries {
        let from = root.join(relative);
        let to = copy.path.join(relative);
        match kind {
            Kind::Dir => fs::create_dir(&to).map_err(io_error("create", &to))?,
            Kind::File => {
                fs::copy(&from, &to).map_err(io_error("copy", &from))?;
            }
            Kind::Link => {
                let target = fs::read_link(&from).map_err(io_error("read the link", &from))?;
                std::os::unix::fs::symlink(&target, &to).map_err(io_error("link", &to))?;
            }
        }
    }
    tracing::info!(
        entries = entries.len(),
        path = %copy.path.display(),
        "copied the workspace"
    );
    Ok(copy)
}

/// Every entry under `root` (parents before children), or why the copy is refused.
fn scan(root: &Path, limits: CopyLimits) -> Result<Vec<(PathBuf, Kind)>, CopyError> {
    let mut entries = Vec::new();
    let mut bytes = 0_u64;
    let mut pending = vec![PathBuf::new()];
    while let Some(dir) = pending.pop() {
        let absolute = root.join(&dir);
        let mut names: Vec<_> = fs::read_dir(&absolute)
            .map_err(io_error("list", &absolute))?
            .collect::<Result<_, _>>()
            .map_err(io_error("list", &absolute))?;
        names.sort_by_key(fs::DirEntry::file_name);
        for entry in names {
            if entry.file_name() == SKIPPED {
                continue;
            }
            let relative = dir.join(entry.file_name());
            let meta =
                fs::symlink_metadata(entry.path()).map_err(io_error("inspect", &relative))?;
            let kind = if meta.file_type().is_symlink() {
                Kind::Link
            } else if meta.is_dir() {
                pending.push(relative.clone());
                Kind::Dir
            } else if meta.is_file() {
                bytes = bytes.saturating_add(meta.len());
                Kind::File
            } else {
                continue; // sockets, fifos, devices
            };
            entries.push((relative, kind));
            if entries.len() > limits.max_entries {
                return Err(CopyError::TooManyEntries {
                    max: limits.max_entries,
                });
            }
            if bytes > limits.max_bytes {
                return Err(CopyError::TooLarge {
                    max: limits.max_bytes,
                });
            }
        }
    }
    Ok(entries)
}

/// A new, empty directory under `base`.
fn fresh_dir(base: &Path) -> Result<PathBuf, CopyError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("verify-{}-{nanos:08x}-{n}", std::process::id()));
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_error("create", &path)(e)),
        }
    }
}

#[cfg(test)]
#[path = "workspace_copy_tests.rs"]
mod tests;
