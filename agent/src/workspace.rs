//! The workspace: the unpacked repository bundle every tool works in.
//!
//! Every path the model gives is resolved through [`Workspace::resolve`], which accepts paths
//! relative to the root or absolute paths under it, and refuses anything that leaves the root:
//! `..` climbing above it, absolute paths elsewhere, and symlinks whose target lies outside.
//! Paths to write (execution mode) go through [`Workspace::resolve_for_write`], which applies
//! the same rules to a file and parent directories that may not exist yet.

use std::io;
use std::path::{Component, Path, PathBuf};

use thiserror::Error;

/// Why a path given by the model cannot be used. The `Display` text goes back to the model.
#[derive(Debug, Error)]
pub enum WorkspaceError {
    /// The root itself could not be opened (a broken invariant of the agent's setup).
    #[error("workspace root `{root}` is unusable: {source}")]
    BadRoot {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The root is not a directory.
    #[error("workspace root `{0}` is not a directory")]
    RootNotDir(PathBuf),
    /// `..` components climb above the root.
    #[error("path `{path}` escapes the workspace root `{root}` through `..`; use a path inside it")]
    Escapes { path: String, root: PathBuf },
    /// An absolute path that is not under the root.
    #[error(
        "path `{path}` is outside the workspace root `{root}`; use a path relative to the root \
         or an absolute path under it"
    )]
    OutsideRoot { path: String, root: PathBuf },
    /// A symlink on the way resolves to somewhere outside the root.
    #[error("path `{path}` goes through a symlink that points outside the workspace; refused")]
    SymlinkEscape { path: String },
    /// A symlink on the way points to nothing.
    #[error("path `{path}` goes through a broken symlink; refused")]
    BrokenSymlink { path: String },
    /// Nothing exists at the path.
    #[error("path `{path}` does not exist (relative paths start at the workspace root `{root}`)")]
    NotFound { path: String, root: PathBuf },
    /// Any other IO failure while resolving.
    #[error("cannot access `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// The bundle root, canonicalized once. Cheap to share behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Canonical root (symlinks resolved); every resolved path starts with it.
    root: PathBuf,
    /// The root as it was given (what the model is told), when it differs from `root`.
    given: PathBuf,
    /// A second tree reads may reach by absolute path (a prepared environment, bound
    /// read-only); writes stay confined to `root`. Canonical.
    read_only: Option<PathBuf>,
}

impl Workspace {
    /// Opens the workspace at `root`, which must be an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        let given = absolute(root.as_ref());
        let canonical =
            std::fs::canonicalize(&given).map_err(|source| WorkspaceError::BadRoot {
                root: given.clone(),
                source,
            })?;
        if !canonical.is_dir() {
            return Err(WorkspaceError::RootNotDir(given));
        }
        Ok(Workspace {
            root: canonical,
            given,
            read_only: None,
        })
    }

    /// Let reads resolve absolute paths under `dir` too (a prepared environment at `/env`,
    /// docs/ARCHITECTURE.md §6.5). Writes stay confined to the root. A `dir` that is not a
    /// directory is ignored.
    pub fn with_read_only_root(mut self, dir: &Path) -> Self {
        self.read_only = std::fs::canonicalize(dir).ok().filter(|d| d.is_dir());
        self
    }

    /// The read-only tree, when one is set.
    pub fn read_only_root(&self) -> Option<&Path> {
        self.read_only.as_deref()
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a user path to an existing canonical path inside the root.
    ///
    /// An empty path or `.` is the root itself.
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, WorkspaceError> {
        if let Some(found) = self.resolve_read_only(user_path) {
            return found;
        }
        let normalized = self.normalized(user_path)?;
        self.confine(user_path, &self.root.join(normalized))
    }

    /// `user_path` relative to the root with `.` and `..` resolved; an escape above the root
    /// is refused.
    fn normalized(&self, user_path: &str) -> Result<PathBuf, WorkspaceError> {
        let relative = self.relative_part(user_path)?;
        normalize(&relative).ok_or_else(|| WorkspaceError::Escapes {
            path: user_path.to_owned(),
            root: self.given.clone(),
        })
    }

    /// Canonicalizes `joined` (a path under the root, possibly through symlinks) and checks it
    /// stays inside. `label` names the path in errors.
    pub fn confine(&self, label: &str, joined: &Path) -> Result<PathBuf, WorkspaceError> {
        match std::fs::canonicalize(joined) {
            Ok(real) if real.starts_with(&self.root) => Ok(real),
            Ok(_) => Err(WorkspaceError::SymlinkEscape {
                path: label.to_owned(),
            }),
            Err(e) => Err(self.classify_missing(label, joined, e)),
        }
    }

    /// The part of an absolute `path` under the root (either spelling of it), if any.
    pub fn strip_root<'p>(&self, path: &'p Path) -> Option<&'p Path> {
        [&self.root, &self.given]
            .into_iter()
            .find_map(|root| path.strip_prefix(root).ok())
    }

    /// The path as shown to the model: relative to the root, `/`-separated, `.` for the root.
    pub fn display(&self, path: &Path) -> String {
        let relative = path
            .strip_prefix(&self.root)
            .or_else(|_| path.strip_prefix(&self.given))
            .unwrap_or(path);
        if relative.as_os_str().is_empty() {
            return ".".to_owned();
        }
        relative.to_string_lossy().into_owned()
    }

    /// An absolute path lexically under the read-only tree, resolved there (its real path
    /// must stay inside it); `None` for any other path.
    fn resolve_read_only(&self, user_path: &str) -> Option<Result<PathBuf, WorkspaceError>> {
        let tree = self.read_only.as_ref()?;
        let path = Path::new(user_path.trim());
        if !path.is_absolute() {
            return None;
        }
        let full = Path::new("/").join(normalize(path)?);
        if !full.starts_with(tree) {
            return None;
        }
        Some(match std::fs::canonicalize(&full) {
            Ok(real) if real.starts_with(tree) => Ok(real),
            Ok(_) => Err(WorkspaceError::SymlinkEscape {
                path: user_path.to_owned(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(WorkspaceError::NotFound {
                path: user_path.to_owned(),
                root: tree.clone(),
            }),
            Err(source) => Err(WorkspaceError::Io {
                path: user_path.to_owned(),
                source,
            }),
        })
    }

    /// The root-relative part of a user path, before normalization.
    fn relative_part(&self, user_path: &str) -> Result<PathBuf, WorkspaceError> {
        let path = Path::new(user_path.trim());
        if !path.is_absolute() {
            return Ok(path.to_path_buf());
        }
        self.strip_root(path)
            .map(Path::to_path_buf)
            .ok_or_else(|| WorkspaceError::OutsideRoot {
                path: user_path.to_owned(),
                root: self.given.clone(),
            })
    }

    /// Explains a failed canonicalization: a dangling symlink that leaves the root is still an
    /// escape; otherwise the path is missing or unreadable.
    fn classify_missing(&self, user_path: &str, joined: &Path, e: io::Error) -> WorkspaceError {
        if e.kind() == io::ErrorKind::NotFound {
            if self.dangling_link_escapes(joined) {
                return WorkspaceError::SymlinkEscape {
                    path: user_path.to_owned(),
                };
            }
            return WorkspaceError::NotFound {
                path: user_path.to_owned(),
                root: self.given.clone(),
            };
        }
        WorkspaceError::Io {
            path: user_path.to_owned(),
            source: e,
        }
    }

    /// Whether `path` is a symlink whose (missing) target lies outside the root.
    fn dangling_link_escapes(&self, path: &Path) -> bool {
        let Ok(target) = std::fs::read_link(path) else {
            return false;
        };
        let base = path.parent().unwrap_or(&self.root);
        let full = base.join(target);
        match normalize(&full) {
            Some(n) => !Path::new("/").join(n).starts_with(&self.root),
            None => true,
        }
    }
}

/// Makes `path` absolute against the current directory, without touching the filesystem.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Lexically removes `.` and `..`; `None` when `..` climbs above the start. Root and prefix
/// components are dropped, so the result is always relative.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(parts.iter().collect())
}

#[path = "workspace_write.rs"]
mod write;

#[cfg(test)]
#[path = "workspace_tests.rs"]
mod tests;
