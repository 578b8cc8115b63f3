//! What git says about the repository: base commit, branch, dirty and untracked files, and the
//! tracked paths. Works with no commits and no remote; outside a work tree (or without git)
//! everything is empty.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The repository around a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepoState {
    /// The work tree's top level, when inside one.
    pub toplevel: Option<PathBuf>,
    /// `HEAD`'s commit; `None` before the first commit.
    pub base_commit: Option<String>,
    /// The current branch; `None` when detached.
    pub branch: Option<String>,
    /// Tracked paths with staged or unstaged changes (deletions included).
    pub dirty: Vec<String>,
    /// Untracked, non-ignored paths.
    pub untracked: Vec<String>,
    /// Every path in the index.
    pub tracked: Vec<PathBuf>,
}

/// Asks git about the repository containing `dir`, running `work` (given the top level, or
/// `dir` outside a work tree, and the tracked paths) while `git status` runs: the two read
/// the same tree, and the status is the slow part of asking.
pub fn inspect_while<T>(dir: &Path, work: impl FnOnce(&Path, &[PathBuf]) -> T) -> (RepoState, T) {
    let Some(top) = git(dir, &["rev-parse", "--show-toplevel"]) else {
        let done = work(dir, &[]);
        return (RepoState::default(), done);
    };
    let top = PathBuf::from(String::from_utf8_lossy(&top).trim_end_matches('\n'));
    let top = top.canonicalize().unwrap_or(top);
    std::thread::scope(|scope| {
        let status = scope.spawn(|| {
            let args = [
                "status",
                "--porcelain=v1",
                "-z",
                "--untracked-files=all",
                "--no-renames",
            ];
            parse_status(&git(&top, &args).unwrap_or_default())
        });
        let line = |args: &[&str]| {
            git(&top, args)
                .map(|out| first_line(&out))
                .filter(|s| !s.is_empty())
        };
        let base_commit = line(&["rev-parse", "--verify", "-q", "HEAD^{commit}"]);
        let branch = line(&["symbolic-ref", "-q", "--short", "HEAD"]);
        let tracked: Vec<PathBuf> = git(&top, &["ls-files", "-z", "--cached"])
            .map(|out| nul_separated(&out).map(PathBuf::from).collect())
            .unwrap_or_default();
        let done = work(&top, &tracked);
        let (dirty, untracked) = status.join().unwrap_or_default();
        let state = RepoState {
            toplevel: Some(top.clone()),
            base_commit,
            branch,
            dirty,
            untracked,
            tracked,
        };
        (state, done)
    })
}

/// The work tree's top level around `dir`, canonical; `None` outside a work tree.
pub fn toplevel(dir: &Path) -> Option<PathBuf> {
    let top = git(dir, &["rev-parse", "--show-toplevel"])?;
    let top = PathBuf::from(String::from_utf8_lossy(&top).trim_end_matches('\n'));
    Some(top.canonicalize().unwrap_or(top))
}

/// Runs git in `dir`; `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    match output {
        Ok(out) if out.status.success() => Some(out.stdout),
        Ok(out) => {
            tracing::debug!(?args, status = %out.status, "git failed");
            None
        }
        Err(err) => {
            tracing::warn!(%err, "cannot run git; bundling without repository information");
            None
        }
    }
}

fn first_line(out: &[u8]) -> String {
    String::from_utf8_lossy(out)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn nul_separated(out: &[u8]) -> impl Iterator<Item = String> + '_ {
    out.split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

/// Splits `git status --porcelain=v1 -z --no-renames` records (`XY path`) into dirty tracked
/// paths and untracked paths.
fn parse_status(out: &[u8]) -> (Vec<String>, Vec<String>) {
    let (mut dirty, mut untracked) = (Vec::new(), Vec::new());
    for record in nul_separated(out) {
        let (Some(code), Some(path)) = (record.get(..2), record.get(3..)) else {
            continue;
        };
        match code {
            "??" => untracked.push(path.to_owned()),
            "!!" => {}
            _ => dirty.push(path.to_owned()),
        }
    }
    (dirty, untracked)
}

#[cfg(test)]
mod tests {
    use super::parse_status;

    #[test]
    fn status_records_are_split() {
        let out = b" M src/a.rs\0A  new.rs\0 D gone.rs\0?? notes.md\0?? dir/x y.txt\0";
        let (dirty, untracked) = parse_status(out);
        assert_eq!(dirty, ["src/a.rs", "new.rs", "gone.rs"]);
        assert_eq!(untracked, ["notes.md", "dir/x y.txt"]);
    }

    #[test]
    fn outside_a_repository_everything_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            super::inspect_while(dir.path(), |_, _| ()).0,
            super::RepoState::default()
        );
    }
}
