//! Everything checked before git writes a byte of a patch: git's reading of the whole patch
//! against the parser's ([`super::crosscheck`]), the rules of [`super::guard`], and the
//! symlinks of the tree it goes into — a work tree on disk, or the commit a new worktree
//! will start from (checked before that worktree exists).

use std::collections::HashSet;
use std::path::Path;

use super::crosscheck;
use super::git::{Git, GitError};
use super::guard::{self, Refusal};
use super::parse::FilePatch;

/// The tree a patch goes into.
#[derive(Debug, Clone, Copy)]
pub enum Tree<'a> {
    /// A work tree on disk, at its top level.
    Disk(&'a Path),
    /// The tree of a commit (a worktree yet to be made from it).
    Commit(&'a str),
}

/// Every file of `patch` (parsed as `files`) that may not be applied to `tree`, and why;
/// empty when all may. `git` runs in the repository (it only reads).
pub fn check(
    git: &Git,
    patch: &[u8],
    files: &[FilePatch],
    tree: Tree<'_>,
) -> Result<Vec<Refusal>, GitError> {
    let mut refusals = crosscheck::check(git, patch, files)?;
    refusals.extend(guard::check_patch(files));
    match tree {
        Tree::Disk(top) => refusals.extend(guard::check_tree(files, &guard::on_disk(top))),
        Tree::Commit(commit) => {
            let links = commit_symlinks(git, commit)?;
            refusals.extend(guard::check_tree(files, &|p| links.contains(p)));
        }
    }
    Ok(guard::merge(refusals))
}

/// The symlinks in a commit's tree.
fn commit_symlinks(git: &Git, commit: &str) -> Result<HashSet<String>, GitError> {
    let spec = format!("{commit}^{{tree}}");
    let listing = git.ok_bytes(&[
        "ls-tree",
        "-r",
        "-z",
        "--full-tree",
        "--end-of-options",
        &spec,
    ])?;
    Ok(guard::symlinks_in_listing(&listing))
}
