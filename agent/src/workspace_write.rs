//! The write side of the workspace: where a file may be created or replaced.
//!
//! The path is confined exactly like a read: relative or absolute under the root, no `..`
//! above it. Then it is walked one component at a time from the canonical root: every
//! component that exists is canonicalized (so symlinks are followed) and must stay inside the
//! root; the first missing component starts the part still to be created, which is made of
//! plain names only. A symlinked parent directory or a symlinked file pointing outside is
//! therefore refused before anything is written.

use std::io;
use std::path::{Component, PathBuf};

use super::{Workspace, WorkspaceError};

impl Workspace {
    /// Resolves a user path for writing. The file and any of its parent directories may be
    /// missing; the result is the canonical existing part joined with the missing names, always
    /// inside the root. The root itself is refused (it is a directory).
    pub fn resolve_for_write(&self, user_path: &str) -> Result<PathBuf, WorkspaceError> {
        let normalized = self.normalized(user_path)?;
        let names: Vec<_> = normalized
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        if names.is_empty() {
            return Err(WorkspaceError::Io {
                path: user_path.to_owned(),
                source: io::Error::new(
                    io::ErrorKind::IsADirectory,
                    "the workspace root is a directory",
                ),
            });
        }
        let mut existing = self.root.clone();
        for (i, name) in names.iter().enumerate() {
            let next = existing.join(name);
            match std::fs::symlink_metadata(&next) {
                Ok(_) => existing = self.confine_existing(user_path, &next)?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Ok(names[i..].iter().fold(existing, |path, n| path.join(n)));
                }
                Err(source) => {
                    return Err(WorkspaceError::Io {
                        path: user_path.to_owned(),
                        source,
                    });
                }
            }
        }
        Ok(existing)
    }

    /// Canonicalizes an entry known to exist (possibly a symlink) and checks it stays inside;
    /// a dangling symlink is refused whether or not it would escape.
    fn confine_existing(
        &self,
        user_path: &str,
        joined: &std::path::Path,
    ) -> Result<PathBuf, WorkspaceError> {
        match self.confine(user_path, joined) {
            Err(WorkspaceError::NotFound { .. }) => Err(WorkspaceError::BrokenSymlink {
                path: user_path.to_owned(),
            }),
            other => other,
        }
    }
}
