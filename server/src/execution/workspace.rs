//! The writable copy an execution works in: a fresh copy of the (read-only, validated) bundle
//! plus a private git repository outside it whose base commit is the bundle as uploaded.

use std::path::{Path, PathBuf};

use ultraplan_protocol::patch::PatchSummary;

use super::ExecutionError;
use super::diffstat::summarize;
use super::git::Repo;

/// The ref that names the bundle as uploaded.
const BASE_REF: &str = "refs/ultraplan/base";

/// A session's execution workspace on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// `<root>/tree`: what the agent sees, writable.
    pub tree: PathBuf,
    repo: Repo,
}

/// A computed patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub diff: Vec<u8>,
    pub summary: PatchSummary,
}

impl Workspace {
    /// The workspace of a session under `root` (`<data>/workspaces/<session>`).
    pub fn at(root: &Path) -> Self {
        Workspace {
            tree: root.join("tree"),
            repo: Repo {
                git_dir: root.join("git"),
                work_tree: root.join("tree"),
            },
        }
    }

    /// Whether a base commit exists (the workspace was prepared before).
    pub async fn is_prepared(&self) -> bool {
        self.repo.git_dir.is_dir()
            && self
                .repo
                .run(&["rev-parse", "--verify", "--quiet", BASE_REF])
                .await
                .is_ok()
    }

    /// Copy `bundle` into a fresh tree and commit it as the base. A half-prepared workspace
    /// from an earlier attempt is removed first. `owner` chowns the tree (for container users).
    pub async fn prepare(&self, bundle: &Path, owner: Option<u32>) -> Result<(), ExecutionError> {
        let (bundle, tree, git_dir) = (
            bundle.to_path_buf(),
            self.tree.clone(),
            self.repo.git_dir.clone(),
        );
        tokio::task::spawn_blocking(move || -> Result<(), ExecutionError> {
            for dir in [&tree, &git_dir] {
                if dir.exists() {
                    std::fs::remove_dir_all(dir).map_err(|e| io(dir, e))?;
                }
            }
            std::fs::create_dir_all(&tree).map_err(|e| io(&tree, e))?;
            super::copy::copy_tree(&bundle, &tree)?;
            if let Some(uid) = owner {
                super::copy::chown_tree(&tree, uid)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| ExecutionError::Io(format!("copying the bundle failed: {e}")))??;
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
    /// `.gitignore` does not exclude, binary-safe.
    pub async fn diff(&self) -> Result<Patch, ExecutionError> {
        self.scrub().await?;
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
        let diff = self.repo.run(&args("--binary")).await?;
        let names = self
            .repo
            .run(&[&args("--name-status")[..], &["-z"]].concat())
            .await?;
        let stats = self
            .repo
            .run(&[&args("--numstat")[..], &["-z"]].concat())
            .await?;
        Ok(Patch {
            summary: summarize(&names, &stats, diff.len()),
            diff,
        })
    }
}

impl Workspace {
    /// Take nested repositories and special files out of the tree before git looks at it.
    async fn scrub(&self) -> Result<(), ExecutionError> {
        let tree = self.tree.clone();
        let removed = tokio::task::spawn_blocking(move || super::copy::scrub(&tree))
            .await
            .map_err(|e| ExecutionError::Io(format!("scrubbing the workspace failed: {e}")))??;
        if !removed.is_empty() {
            tracing::warn!(
                ?removed,
                "removed nested .git entries and special files from the workspace"
            );
        }
        Ok(())
    }
}

fn io(path: &Path, e: std::io::Error) -> ExecutionError {
    ExecutionError::Io(format!("{}: {e}", path.display()))
}
