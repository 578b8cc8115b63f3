//! What git says about the repository: base commit, branch, dirty and untracked files, and the
//! tracked paths. Works with no commits and no remote; outside a work tree (or without git)
//! everything is empty.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::thread::ScopedJoinHandle;

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
    /// Every path in the index.
    pub tracked: Vec<PathBuf>,
}

/// Asks git about the repository containing `dir`, running `work` (given the top level, or
/// `dir` outside a work tree, and the tracked paths as git lists them) while git answers:
/// `git status` (the slow part), `ls-files`, `HEAD` and the branch each run on a thread of
/// their own, so the caller's walk starts at once and waits for the tracked paths only when
/// it asks for them. Git is not asked for untracked files: that would walk the tree a second
/// time, and the bundle's own walk (which honours the same ignore files) finds them — the
/// walked files the index lacks.
pub fn inspect_while<T>(dir: &Path, work: impl FnOnce(&Path, &Tracked) -> T) -> (RepoState, T) {
    let (mut state, done, status) = inspect(dir, work, true);
    if state.dirty.is_empty() {
        state.dirty = status.wait();
    }
    (state, done)
}

/// [`inspect_while`], but `git status` starts once `work` is done (so the walk has every
/// core) and is left running: the caller waits for it when it needs the dirty paths, after
/// work that leaves the cores idle (network round trips).
pub fn inspect_then<T>(
    dir: &Path,
    work: impl FnOnce(&Path, &Tracked) -> T,
) -> (RepoState, T, PendingStatus) {
    inspect(dir, work, false)
}

fn inspect<T>(
    dir: &Path,
    work: impl FnOnce(&Path, &Tracked) -> T,
    status_during: bool,
) -> (RepoState, T, PendingStatus) {
    let Some(top) = toplevel(dir) else {
        let done = work(dir, &Tracked::default());
        return (RepoState::default(), done, PendingStatus(None));
    };
    std::thread::scope(|scope| {
        let during = status_during.then(|| scope.spawn(|| dirty_paths(&top)));
        let head = scope.spawn(|| {
            let line = |args: &[&str]| {
                git(&top, args)
                    .map(|out| first_line(&out))
                    .filter(|s| !s.is_empty())
            };
            let base_commit = line(&["rev-parse", "--verify", "-q", "HEAD^{commit}"]);
            (
                base_commit,
                line(&["symbolic-ref", "-q", "--short", "HEAD"]),
            )
        });
        let tracked = Tracked::listing(scope.spawn(|| {
            git(&top, &["ls-files", "-z", "--cached"])
                .map(|out| nul_separated(&out).map(PathBuf::from).collect())
                .unwrap_or_default()
        }));
        let done = work(&top, &tracked);
        let (dirty, later) = match during {
            Some(handle) => (handle.join().unwrap_or_default(), PendingStatus(None)),
            None => {
                let top = top.clone();
                let handle = std::thread::spawn(move || dirty_paths(&top));
                (Vec::new(), PendingStatus(Some(handle)))
            }
        };
        let (base_commit, branch) = head.join().unwrap_or_default();
        let state = RepoState {
            toplevel: Some(top.clone()),
            base_commit,
            branch,
            dirty,
            tracked: tracked.into_paths(),
        };
        (state, done, later)
    })
}

/// Tracked paths with staged or unstaged changes, as `git status` lists them.
fn dirty_paths(top: &Path) -> Vec<String> {
    let args = [
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=no",
        "--no-renames",
    ];
    parse_status(&git(top, &args).unwrap_or_default()).0
}

/// `git status` still running on a thread of its own ([`inspect_then`]).
#[derive(Debug)]
pub struct PendingStatus(Option<std::thread::JoinHandle<Vec<String>>>);

impl PendingStatus {
    /// The dirty paths (none outside a work tree, or when git could not say).
    pub fn wait(self) -> Vec<String> {
        self.0.and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

/// The paths in the index, listed by git on another thread: [`Tracked::get`] waits for them.
#[derive(Default)]
pub struct Tracked<'scope> {
    listing: Mutex<Option<ScopedJoinHandle<'scope, Vec<PathBuf>>>>,
    paths: OnceLock<Vec<PathBuf>>,
}

impl<'scope> Tracked<'scope> {
    fn listing(handle: ScopedJoinHandle<'scope, Vec<PathBuf>>) -> Self {
        Tracked {
            listing: Mutex::new(Some(handle)),
            paths: OnceLock::new(),
        }
    }

    /// The tracked paths (none outside a work tree, or when git could not list them).
    pub fn get(&self) -> &[PathBuf] {
        self.paths.get_or_init(|| {
            let handle = self
                .listing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            handle.and_then(|h| h.join().ok()).unwrap_or_default()
        })
    }

    fn into_paths(self) -> Vec<PathBuf> {
        self.get();
        self.paths.into_inner().unwrap_or_default()
    }
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
