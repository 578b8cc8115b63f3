//! Execution workspaces and patch making: the writable copy an approved plan is carried out
//! in, and the patch of what the agent changed in it.
//!
//! The agent never reports its own diff: it is computed from the workspace with a private git
//! repository the sandbox cannot reach, so the patch is what the tree holds. The server's
//! in-process runner and `ultraplan-runner` both use this module (docs/ARCHITECTURE.md §5).

mod copy;
mod diffstat;
mod git;
mod links;
mod symlinks;
mod writable;

use std::path::Path;

pub use git::available as git_available;
pub use writable::{MAX_NEW_FILE_BYTES, Patch, Workspace, remove_root};

/// Largest patch a runner makes or a server stores.
pub const MAX_PATCH_BYTES: usize = 64 * 1024 * 1024;

/// Why a workspace could not be prepared or diffed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("git {command} failed: {reason}")]
    Git { command: String, reason: String },
    #[error("workspace: {0}")]
    Io(String),
    #[error("the patch is larger than {0} bytes")]
    TooLarge(usize),
}

/// The patch of the workspace under `root` (see [`Workspace::at`]): symlinks that are
/// absolute, leave the tree or point into `.git` are taken out first and listed in
/// `left_out` with their reason, so the patch never carries them.
pub async fn patch_of(root: &Path, max_bytes: usize) -> Result<Patch, WorkspaceError> {
    let workspace = Workspace::at(root);
    let refused = symlinks::refuse(root).await?;
    let mut patch = workspace.diff(max_bytes).await?;
    symlinks::check_no_path_through_links(&workspace.tree, &patch.summary).await?;
    patch.summary.left_out.extend(refused);
    Ok(patch)
}

#[cfg(test)]
mod tests;
