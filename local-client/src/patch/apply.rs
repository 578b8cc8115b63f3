//! Changing things: finding the repository, the fresh worktree on a new branch, and
//! stash → apply → pop (the one `git apply` itself is in [`super::write`]). Every step is a
//! few git commands; the decisions are made by the caller from the preflight.

use std::path::{Path, PathBuf};

use super::git::{Git, GitError};
use super::parse::FilePatch;
use super::preflight::{TreeStatus, Verdict, parse_status};
use super::write::{nul_list, unstage};

/// Why there is no repository to apply to.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("not a git repository: {} (nor any of its parent directories){}", looked.display(),
            git_says.as_deref().map(|s| format!("; git says: {s}")).unwrap_or_default())]
    NotARepository {
        looked: PathBuf,
        git_says: Option<String>,
    },
    #[error("{}: no such directory", .0.display())]
    NoSuchDirectory(PathBuf),
    #[error(transparent)]
    Git(#[from] GitError),
}

/// The work tree a patch goes into.
#[derive(Debug, Clone)]
pub struct Repo {
    /// Its top level, where patch paths start.
    pub top: PathBuf,
    pub git: Git,
}

impl Repo {
    /// The work tree around `dir` (any directory inside it).
    pub fn discover(dir: &Path) -> Result<Self, RepoError> {
        let looked = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        if !looked.is_dir() {
            return Err(RepoError::NoSuchDirectory(looked));
        }
        let out = Git::new(&looked).run(&["rev-parse", "--show-toplevel"])?;
        let top = out.text();
        if !out.success || top.is_empty() {
            let git_says = out
                .stderr
                .lines()
                .next()
                .map(|l| l.trim_start_matches("fatal: ").to_owned())
                .filter(|l| !l.starts_with("not a git repository"));
            return Err(RepoError::NotARepository { looked, git_says });
        }
        let top = PathBuf::from(top);
        let top = top.canonicalize().unwrap_or(top);
        Ok(Self {
            git: Git::new(&top),
            top,
        })
    }

    /// Local changes.
    pub fn status(&self) -> Result<TreeStatus, GitError> {
        let out = self.git.run(&[
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
        ])?;
        if !out.success {
            return Err(GitError::Failed {
                command: "status".into(),
                stderr: out.stderr,
            });
        }
        Ok(parse_status(&out.stdout))
    }

    /// The full hash of a commit, when this repository has it.
    pub fn commit(&self, rev: &str) -> Option<String> {
        let spec = format!("{rev}^{{commit}}");
        let out = self
            .git
            .run(&["rev-parse", "-q", "--verify", "--end-of-options", &spec])
            .ok()?;
        Some(out.text()).filter(|h| out.success && !h.is_empty())
    }

    /// `refs/stash`, when there is one.
    fn stash_ref(&self) -> Option<String> {
        self.commit("refs/stash")
    }
}

/// Where a new worktree goes and what it starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreePlan {
    pub path: PathBuf,
    pub branch: String,
    /// The commit the branch starts at.
    pub base: String,
    /// Whether `base` is the session's base commit (else this repository's `HEAD`).
    pub at_session_base: bool,
}

/// Why no worktree can be made.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error(
        "the branch {0} already exists (from an earlier pull?); remove it with `git branch -D {0}` (after `git worktree remove` of its worktree), or work there"
    )]
    BranchExists(String),
    #[error("{} already exists; pass --worktree-dir PATH to choose another place", .0.display())]
    PathExists(PathBuf),
    #[error("{0:?} does not make a valid branch name")]
    BadBranch(String),
    #[error("this repository has no commit to start a branch from")]
    NoCommit,
    #[error(transparent)]
    Git(#[from] GitError),
}

/// `ultraplan/<id>`.
pub fn branch_name(id: &str) -> String {
    format!("ultraplan/{id}")
}

/// The default worktree: next to the repository, `<repo>.ultraplan-<first 8 chars of id>`.
pub fn default_worktree_path(top: &Path, id: &str) -> PathBuf {
    let short: String = id
        .chars()
        .take(8)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = top
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".to_owned());
    top.with_file_name(format!("{name}.ultraplan-{short}"))
}

/// Decides the worktree's place, branch and base commit, and checks that neither is taken.
pub fn plan_worktree(
    repo: &Repo,
    id: &str,
    session_base: Option<&str>,
    dir: Option<&Path>,
) -> Result<WorktreePlan, WorktreeError> {
    let branch = branch_name(id);
    let valid = repo
        .git
        .run(&["check-ref-format", "--branch", &branch])?
        .success;
    if !valid {
        return Err(WorktreeError::BadBranch(branch));
    }
    if repo.commit(&format!("refs/heads/{branch}")).is_some() {
        return Err(WorktreeError::BranchExists(branch));
    }
    let path = match dir {
        Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
        None => default_worktree_path(&repo.top, id),
    };
    let taken = path
        .read_dir()
        .map(|mut entries| entries.next().is_some())
        .unwrap_or_else(|_| path.exists());
    if taken {
        return Err(WorktreeError::PathExists(path));
    }
    let session = session_base.and_then(|c| repo.commit(c));
    let at_session_base = session.is_some();
    let base = session
        .or_else(|| repo.commit("HEAD"))
        .ok_or(WorktreeError::NoCommit)?;
    Ok(WorktreePlan {
        path,
        branch,
        base,
        at_session_base,
    })
}

/// Creates the worktree on its new branch; git there.
pub fn create_worktree(repo: &Repo, plan: &WorktreePlan) -> Result<Git, GitError> {
    let path = plan.path.to_string_lossy();
    repo.git.ok(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &plan.branch,
        "--end-of-options",
        &path,
        &plan.base,
    ])?;
    Ok(Git::new(&plan.path))
}

/// Removes a worktree this command made (and its branch), when a check in it refused the
/// patch: nothing is left behind.
pub fn remove_worktree(repo: &Repo, plan: &WorktreePlan) -> Result<(), GitError> {
    let path = plan.path.to_string_lossy();
    repo.git
        .ok(&["worktree", "remove", "--force", "--end-of-options", &path])?;
    repo.git
        .ok(&["branch", "-D", "--end-of-options", &plan.branch])?;
    Ok(())
}

/// Stashes every local change, untracked files included. Whether a stash was made (nothing to
/// stash makes none, and then nothing must be popped).
pub fn stash_push(repo: &Repo, id: &str) -> Result<bool, GitError> {
    let before = repo.stash_ref();
    let message = format!("ultraplan pull {id}: local changes before applying the patch");
    repo.git
        .ok(&["stash", "push", "--include-untracked", "-m", &message])?;
    let after = repo.stash_ref();
    Ok(after.is_some() && after != before)
}

/// What `git stash pop` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Popped {
    /// The changes are back; the stash is dropped.
    Restored,
    /// It failed; the stash is kept.
    Kept {
        /// Files left with conflict markers.
        conflicted: Vec<String>,
        /// What git said.
        message: String,
    },
}

/// Pops the stash back over the applied patch. The patched paths are staged first, so that
/// git merges the stashed changes into them (it refuses to touch unstaged changes), and
/// unstaged again afterwards; a path that conflicts stays unmerged, to resolve.
pub fn pop_over(
    repo: &Repo,
    files: &[FilePatch],
    verdicts: &[Verdict],
) -> Result<Popped, GitError> {
    let applied: Vec<&str> = files
        .iter()
        .zip(verdicts)
        .filter(|(_, v)| v.applies())
        .flat_map(|(f, _)| f.paths())
        .collect();
    if !applied.is_empty() {
        repo.git.ok_with_input(
            &[
                "--literal-pathspecs",
                "add",
                "-A",
                "--pathspec-from-file=-",
                "--pathspec-file-nul",
            ],
            &nul_list(applied.iter().copied()),
        )?;
    }
    let popped = stash_pop(repo)?;
    let keep: &[String] = match &popped {
        Popped::Restored => &[],
        Popped::Kept { conflicted, .. } => conflicted,
    };
    let back: Vec<&str> = applied
        .into_iter()
        .filter(|p| !keep.iter().any(|k| k == p))
        .collect();
    if !back.is_empty() {
        unstage(&repo.git, back.into_iter())?;
    }
    Ok(popped)
}

/// `git stash pop`.
pub fn stash_pop(repo: &Repo) -> Result<Popped, GitError> {
    let out = repo.git.run(&["stash", "pop"])?;
    if out.success {
        return Ok(Popped::Restored);
    }
    let conflicted = repo
        .git
        .run(&["diff", "--no-color", "--name-only", "-z", "--diff-filter=U"])
        .map(|o| {
            o.stdout
                .split(|&b| b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()
        })
        .unwrap_or_default();
    Ok(Popped::Kept {
        conflicted,
        message: out.stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_paths_and_branches() {
        let cases = [
            ("/src/app", "sess-1", "/src/app.ultraplan-sess-1"),
            (
                "/src/app",
                "0f3c9a7e-1111-2222",
                "/src/app.ultraplan-0f3c9a7e",
            ),
            ("/src/app", "a/b c:d", "/src/app.ultraplan-a-b-c-d"),
        ];
        for (top, id, want) in cases {
            assert_eq!(
                default_worktree_path(Path::new(top), id),
                PathBuf::from(want)
            );
        }
        assert_eq!(branch_name("sess-1"), "ultraplan/sess-1");
    }
}
