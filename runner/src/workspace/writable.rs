//! The writable copy an execution works in: a fresh copy of the (read-only, validated) bundle
//! plus a private git repository outside it whose base commit is the bundle as uploaded.

use std::path::{Path, PathBuf};

use std::collections::HashSet;

use ultraplan_protocol::patch::{LeftOut, PatchSummary};

use super::WorkspaceError;
use super::diffstat::summarize;
use super::git::Repo;

/// New files larger than this stay out of the patch (build outputs, dumps).
pub const MAX_NEW_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The ref that names the bundle as uploaded.
const BASE_REF: &str = "refs/ultraplan/base";

/// A session's execution workspace on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// `<root>/tree`: what the agent sees, writable.
    pub tree: PathBuf,
    repo: Repo,
    /// The tree is a tmpfs of this many bytes (where the server can mount one).
    quota: Option<u64>,
}

/// A computed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub diff: Vec<u8>,
    pub summary: PatchSummary,
}

impl Workspace {
    /// The workspace of a session under `root` (`<data>/workspaces/<session>`).
    /// Its tree is capped at the server's configured size when the server can mount a tmpfs.
    pub fn at(root: &Path) -> Self {
        Workspace {
            tree: root.join("tree"),
            repo: Repo {
                git_dir: root.join("git"),
                work_tree: root.join("tree"),
            },
            quota: crate::sandbox::tmpfs::workspace_cap(),
        }
    }

    /// The same workspace with its tree capped at `bytes` (a tmpfs), or uncapped (`None`).
    pub fn capped(self, bytes: Option<u64>) -> Self {
        Workspace {
            quota: bytes,
            ..self
        }
    }

    /// Whether a base commit exists (the workspace was prepared before) and, for a capped
    /// workspace, its tmpfs is still mounted (it survives a server restart, not a reboot).
    pub async fn is_prepared(&self) -> bool {
        let mounted = self.quota.is_none() || crate::sandbox::tmpfs::is_mountpoint(&self.tree);
        mounted
            && self.repo.git_dir.is_dir()
            && self
                .repo
                .run(&["rev-parse", "--verify", "--quiet", BASE_REF])
                .await
                .is_ok()
    }

    /// Copy `bundle` into a fresh tree and commit it as the base. A half-prepared workspace
    /// from an earlier attempt is removed first. `owner` chowns the tree (for sandbox users).
    /// A capped tree is a tmpfs of that size: a bundle larger than the cap is refused.
    pub async fn prepare(&self, bundle: &Path, owner: Option<u32>) -> Result<(), WorkspaceError> {
        let (bundle, tree, git_dir, quota) = (
            bundle.to_path_buf(),
            self.tree.clone(),
            self.repo.git_dir.clone(),
            self.quota,
        );
        tokio::task::spawn_blocking(move || -> Result<(), WorkspaceError> {
            crate::sandbox::tmpfs::unmount(&tree).map_err(|e| io(&tree, e))?;
            for dir in [&tree, &git_dir] {
                if dir.exists() {
                    std::fs::remove_dir_all(dir).map_err(|e| io(dir, e))?;
                }
            }
            std::fs::create_dir_all(&tree).map_err(|e| io(&tree, e))?;
            if let Some(bytes) = quota {
                crate::sandbox::tmpfs::mount(&tree, bytes, owner).map_err(|e| {
                    WorkspaceError::Io(format!("cannot mount the workspace tmpfs: {e}"))
                })?;
            }
            super::copy::copy_tree(&bundle, &tree).map_err(|e| match quota {
                Some(bytes) if e.to_string().contains("os error 28") => {
                    WorkspaceError::Io(format!(
                        "the bundle does not fit in the workspace cap of {bytes} bytes \
                     (ULTRAPLAN_WORKSPACE_MAX_BYTES): {e}"
                    ))
                }
                _ => e,
            })?;
            if let Some(uid) = owner {
                super::copy::chown_tree(&tree, uid)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| WorkspaceError::Io(format!("copying the bundle failed: {e}")))??;
        self.repo.run(&["init", "--quiet"]).await?;
        self.scrub().await?;
        self.repo.run(&["add", "--all", "--force", "."]).await?;
        let tree = self.repo.text(&["write-tree"]).await?;
        let base = self
            .repo
            .text(&["commit-tree", &tree, "-m", "bundle as uploaded"])
            .await?;
        self.repo.run(&["update-ref", BASE_REF, &base]).await?;
        Ok(())
    }

    /// The change of the tree against the base: every tracked file and every new file that
    /// `.gitignore` does not exclude, binary-safe. New files over [`MAX_NEW_FILE_BYTES`] are
    /// left out (and listed); a diff over `max_bytes` is refused without being held whole.
    pub async fn diff(&self, max_bytes: usize) -> Result<Patch, WorkspaceError> {
        self.scrub().await?;
        let left_out = self.leave_out_large_new_files().await?;
        self.repo.run(&["add", "--all", "."]).await?;
        let args = |extra: &'static str| {
            [
                "diff",
                "--cached",
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--full-index",
                extra,
                BASE_REF,
            ]
        };
        let diff = self.repo.run_capped(&args("--binary"), max_bytes).await?;
        let names = self
            .repo
            .run(&[&args("--name-status")[..], &["-z"]].concat())
            .await?;
        let stats = self
            .repo
            .run(&[&args("--numstat")[..], &["-z"]].concat())
            .await?;
        let mut summary = summarize(&names, &stats, diff.len());
        summary.left_out = left_out;
        Ok(Patch { summary, diff })
    }

    /// Remove the whole workspace (tree, its tmpfs, and the private git dir).
    pub fn remove(&self) -> std::io::Result<()> {
        match self.tree.parent() {
            Some(root) => remove_root(root),
            None => Ok(()),
        }
    }

    /// Take nested repositories and special files out of the tree before git looks at it.
    async fn scrub(&self) -> Result<(), WorkspaceError> {
        let tree = self.tree.clone();
        let removed = tokio::task::spawn_blocking(move || super::copy::scrub(&tree))
            .await
            .map_err(|e| WorkspaceError::Io(format!("scrubbing the workspace failed: {e}")))??;
        if !removed.is_empty() {
            tracing::warn!(
                ?removed,
                "removed nested .git entries and special files from the workspace"
            );
        }
        Ok(())
    }

    /// Keep new files too large for a patch out of git's sight (through the private git
    /// dir's `info/exclude`, rewritten each time).
    async fn leave_out_large_new_files(&self) -> Result<Vec<LeftOut>, WorkspaceError> {
        let tracked = self.repo.run(&["ls-files", "-z", "--cached"]).await?;
        let tracked: HashSet<Vec<u8>> = tracked
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        let tree = self.tree.clone();
        let large = tokio::task::spawn_blocking(move || {
            super::copy::large_files(&tree, MAX_NEW_FILE_BYTES)
        })
        .await
        .map_err(|e| WorkspaceError::Io(format!("sizing the workspace failed: {e}")))??;
        let left_out: Vec<(String, u64)> = large
            .into_iter()
            .filter(|(path, _)| !tracked.contains(path.as_bytes()))
            .collect();
        let exclude: String = left_out
            .iter()
            .map(|(path, _)| format!("/{}\n", escape_pattern(path)))
            .collect();
        let info = self.repo.git_dir.join("info");
        std::fs::create_dir_all(&info).map_err(|e| io(&info, e))?;
        std::fs::write(info.join("exclude"), exclude).map_err(|e| io(&info, e))?;
        Ok(left_out
            .into_iter()
            .map(|(path, bytes)| LeftOut::too_large(path, bytes))
            .collect())
    }
}

/// Remove a workspace root (see [`Workspace::at`]), its tree's tmpfs unmounted first.
pub fn remove_root(root: &Path) -> std::io::Result<()> {
    crate::sandbox::tmpfs::unmount(&root.join("tree"))?;
    std::fs::remove_dir_all(root)
}

/// A path as a gitignore pattern that matches only itself.
fn escape_pattern(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | ']' | '!' | '#' | ' ') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn io(path: &Path, e: std::io::Error) -> WorkspaceError {
    WorkspaceError::Io(format!("{}: {e}", path.display()))
}
