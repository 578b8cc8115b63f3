//! `ultraplan pull ID` of an approved, remotely executed plan: real git repositories in temp
//! dirs, and the scripted server serving a real patch made with `git diff --binary
//! --full-index` in a scratch copy of the repository.

use std::path::{Path, PathBuf};

use crate::support::Home;
use crate::support::pty::Pty;
use crate::support::server::{Config, SESSION_ID, Server, executing, finished, plan};
use serde_json::json;

pub(crate) const LIB: &str = "pub fn one() -> u32 {\n    1\n}\n\npub fn two() -> u32 {\n    2\n}\n\n\
                   pub fn three() -> u32 {\n    3\n}\n";

/// A PNG-ish blob with NULs: git treats it as binary.
pub(crate) fn blob(seed: u8, len: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0".to_vec();
    bytes.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    bytes
}

pub(crate) fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit (no remote) and one untracked file.
pub(crate) struct Repo {
    pub(crate) path: PathBuf,
    pub(crate) base: String,
}

impl Repo {
    pub(crate) fn new(parent: &Path) -> Self {
        let path = parent.join("repo");
        std::fs::create_dir_all(path.join("src")).unwrap();
        std::fs::write(path.join("src/lib.rs"), LIB).unwrap();
        std::fs::write(path.join("README.md"), "# demo\n\nA demo.\n").unwrap();
        std::fs::write(path.join("logo.png"), blob(1, 600)).unwrap();
        git_in(&path, &["init", "-q", "-b", "main"]);
        git_in(&path, &["add", "."]);
        git_in(&path, &["commit", "-q", "-m", "init"]);
        std::fs::write(path.join("notes.txt"), "untracked\n").unwrap();
        let path = path.canonicalize().unwrap();
        let base = git_in(&path, &["rev-parse", "HEAD"]).trim().to_owned();
        Self { path, base }
    }

    pub(crate) fn git(&self, args: &[&str]) -> String {
        git_in(&self.path, args)
    }

    pub(crate) fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path.join(rel)).unwrap()
    }

    fn text(&self, rel: &str) -> String {
        String::from_utf8(self.read(rel)).unwrap()
    }

    pub(crate) fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.path.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    pub(crate) fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// `git status` and every file's bytes (untracked included, `.git` excluded).
    pub(crate) fn snapshot(&self) -> (String, Vec<(PathBuf, Vec<u8>)>, String) {
        fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.file_name().unwrap() == ".git" {
                    continue;
                }
                if path.is_dir() {
                    walk(&path, root, out);
                } else {
                    let bytes = std::fs::read(&path).unwrap();
                    out.push((path.strip_prefix(root).unwrap().to_path_buf(), bytes));
                }
            }
        }
        let mut files = Vec::new();
        walk(&self.path, &self.path, &mut files);
        files.sort();
        let status = self.git(&["status", "--porcelain=v1", "--untracked-files=all"]);
        let stashes = self.git(&["stash", "list"]);
        (status, files, stashes)
    }

    /// A patch made as the server makes it: change a scratch copy of the base, then
    /// `git diff --binary --full-index` against the base.
    pub(crate) fn patch(&self, change: impl FnOnce(&Path)) -> Vec<u8> {
        let scratch = self.path.parent().unwrap().join("scratch");
        let _ = std::fs::remove_dir_all(&scratch);
        git_in(
            self.path.parent().unwrap(),
            &["clone", "-q", self.path.to_str().unwrap(), "scratch"],
        );
        git_in(&scratch, &["checkout", "-q", &self.base]);
        change(&scratch);
        git_in(&scratch, &["add", "-A"]);
        let out = std::process::Command::new("git")
            .args(["diff", "--cached", "--binary", "--full-index"])
            .current_dir(&scratch)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &scratch)
            .output()
            .unwrap();
        assert!(out.status.success());
        std::fs::remove_dir_all(&scratch).unwrap();
        out.stdout
    }
}

/// The usual change: one line of src/lib.rs, a new file, a modified and a new binary.
pub(crate) fn usual_change(dir: &Path) {
    let lib = LIB.replace("    1\n", "    100\n");
    std::fs::write(dir.join("src/lib.rs"), lib).unwrap();
    std::fs::write(dir.join("src/extra.rs"), "pub const EXTRA: u8 = 7;\n").unwrap();
    std::fs::write(dir.join("logo.png"), blob(9, 700)).unwrap();
    std::fs::create_dir_all(dir.join("assets")).unwrap();
    std::fs::write(dir.join("assets/icon.bin"), blob(3, 300)).unwrap();
}

/// A server whose session's approved plan finished executing with `patch`.
pub(crate) fn server_with(repo: &Repo, patch: Vec<u8>) -> Server {
    Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            session_context: json!({"base": {"commit": repo.base, "branch": "main"}}),
            executions: vec![finished()],
            patch,
            ..Config::default()
        },
        vec![],
    )
}

pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn pull(home: &Home, server: &Server, cwd: &Path, extra: &[&str]) -> Run {
    let out = home
        .cmd(cwd)
        .env("ULTRAPLAN_POLL_INTERVAL_MS", "50")
        .args(["--server", &server.url, "pull", SESSION_ID])
        .args(extra)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// The report line of `path`.
pub(crate) fn line_of<'a>(run: &'a Run, path: &str) -> &'a str {
    run.stdout
        .lines()
        .find(|l| l.split_whitespace().any(|w| w == path))
        .unwrap_or_else(|| panic!("no line for {path}:\n{run}"))
}

fn assert_patched(dir: &Path) {
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    assert_eq!(lib, LIB.replace("    1\n", "    100\n"));
    assert_eq!(
        std::fs::read_to_string(dir.join("src/extra.rs")).unwrap(),
        "pub const EXTRA: u8 = 7;\n"
    );
    assert_eq!(std::fs::read(dir.join("logo.png")).unwrap(), blob(9, 700));
    assert_eq!(
        std::fs::read(dir.join("assets/icon.bin")).unwrap(),
        blob(3, 300)
    );
}

#[test]
fn a_clean_tree_gets_the_patch_in_its_working_tree() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stdout.contains(&format!(
            "Patch of session {SESSION_ID}: 4 files changed, +2 −1"
        )),
        "{run}"
    );
    assert!(line_of(&run, "src/lib.rs").contains("applied"), "{run}");
    assert!(line_of(&run, "src/lib.rs").contains("+1 −1"), "{run}");
    assert!(line_of(&run, "src/extra.rs").contains("new file"), "{run}");
    assert!(line_of(&run, "logo.png").contains("binary"), "{run}");
    assert!(
        run.stdout.contains("Applied to the working tree of"),
        "{run}"
    );
    assert!(run.stdout.contains("git diff"), "{run}");
    assert_patched(&repo.path);
    // Nothing committed, nothing staged.
    assert_eq!(repo.git(&["rev-parse", "HEAD"]).trim(), repo.base);
    let status = repo.git(&["status", "--porcelain=v1", "--untracked-files=all"]);
    let mut status: Vec<&str> = status.lines().collect();
    status.sort_unstable();
    assert_eq!(
        status,
        [
            " M logo.png",
            " M src/lib.rs",
            "?? assets/icon.bin",
            "?? notes.txt",
            "?? src/extra.rs"
        ]
    );
    // The raw diff was asked for, not the JSON resource.
    assert_eq!(server.recorded().patch_gets, ["text/x-diff"]);
}

#[test]
fn binary_files_are_added_modified_and_deleted() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    repo.write("old.bin", blob(5, 200));
    repo.commit_all("a binary to delete");
    let base = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let repo = Repo { base, ..repo };
    let patch = repo.patch(|dir| {
        std::fs::write(dir.join("logo.png"), blob(42, 5000)).unwrap();
        std::fs::write(dir.join("new.bin"), blob(7, 100)).unwrap();
        std::fs::remove_file(dir.join("old.bin")).unwrap();
    });
    assert!(
        String::from_utf8_lossy(&patch).contains("GIT binary patch"),
        "a real binary patch"
    );
    let server = server_with(&repo, patch);
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(repo.read("logo.png"), blob(42, 5000));
    assert_eq!(repo.read("new.bin"), blob(7, 100));
    assert!(!repo.path.join("old.bin").exists());
    assert!(
        line_of(&run, "old.bin").contains("deleted, binary"),
        "{run}"
    );
    assert!(
        line_of(&run, "new.bin").contains("new file, binary"),
        "{run}"
    );
}

#[test]
fn works_from_a_subdirectory_of_a_repository_without_a_remote() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    assert_eq!(repo.git(&["remote"]), "");
    let server = server_with(&repo, repo.patch(usual_change));
    let run = pull(&home, &server, &repo.path.join("src"), &[]);
    assert_eq!(run.code, 0, "{run}");
    assert_patched(&repo.path);
    assert!(
        !repo.path.join("src/src").exists(),
        "applied at the top level"
    );
}

#[test]
fn an_uncommitted_conflict_touches_nothing_then_a_worktree_takes_the_patch() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    repo.write("src/lib.rs", LIB.replace("    1\n", "    -1\n"));
    let before = repo.snapshot();

    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 1, "{run}");
    let line = line_of(&run, "src/lib.rs");
    assert!(line.contains("conflicted"), "{run}");
    assert!(line.contains("uncommitted"), "{run}");
    assert!(
        line_of(&run, "src/extra.rs").contains("would apply"),
        "{run}"
    );
    assert!(run.stdout.contains("Nothing was changed"), "{run}");
    assert!(
        run.stdout
            .contains(&format!("ultraplan pull {SESSION_ID} --worktree")),
        "{run}"
    );
    assert!(
        run.stdout
            .contains(&format!("ultraplan pull {SESSION_ID} --stash")),
        "{run}"
    );
    assert_eq!(repo.snapshot(), before, "nothing touched");

    let run = pull(&home, &server, &repo.path, &["--worktree"]);
    assert_eq!(run.code, 0, "{run}");
    let worktree = repo
        .path
        .with_file_name(format!("repo.ultraplan-{SESSION_ID}"));
    assert!(
        run.stdout.contains(&worktree.display().to_string()),
        "{run}"
    );
    assert!(run.stdout.contains("ultraplan/sess-1"), "{run}");
    assert!(run.stdout.contains("the session's base commit"), "{run}");
    assert!(run.stdout.contains("cd "), "{run}");
    assert_patched(&worktree);
    assert_eq!(
        git_in(&worktree, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "ultraplan/sess-1"
    );
    assert_eq!(git_in(&worktree, &["rev-parse", "HEAD"]).trim(), repo.base);
    assert_eq!(
        repo.snapshot(),
        before,
        "the main working tree is untouched"
    );

    // A second worktree pull refuses clearly: the branch exists.
    let run = pull(&home, &server, &repo.path, &["--worktree"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("already exists"), "{run}");
}

#[test]
fn a_committed_conflict_touches_nothing_then_a_worktree_starts_at_the_base_commit() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    repo.write("src/lib.rs", LIB.replace("    1\n", "    -1\n"));
    repo.commit_all("meanwhile");
    let before = repo.snapshot();
    let head = repo.git(&["rev-parse", "HEAD"]);

    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 1, "{run}");
    assert!(line_of(&run, "src/lib.rs").contains("conflicted"), "{run}");
    assert!(
        !run.stdout.contains("--stash "),
        "stashing cannot help a clean tree\n{run}"
    );
    assert_eq!(repo.snapshot(), before);
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);

    let elsewhere = home.path().join("elsewhere");
    let run = pull(
        &home,
        &server,
        &repo.path,
        &["--worktree-dir", elsewhere.to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "{run}");
    assert_patched(&elsewhere);
    assert_eq!(git_in(&elsewhere, &["rev-parse", "HEAD"]).trim(), repo.base);
    assert_eq!(repo.snapshot(), before);
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
}

#[test]
fn without_the_base_commit_the_worktree_starts_at_head_and_keeps_conflict_markers() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let patch = repo.patch(usual_change);
    repo.write("src/lib.rs", LIB.replace("    1\n", "    -1\n"));
    repo.commit_all("meanwhile");
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            session_context: json!({"base": {"commit": "0123456789abcdef0123456789abcdef01234567"}}),
            executions: vec![finished()],
            patch,
            ..Config::default()
        },
        vec![],
    );
    let run = pull(&home, &server, &repo.path, &["--worktree"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stdout.contains("is not in this repository"), "{run}");
    assert!(run.stderr.contains("is it the right one"), "{run}");
    assert!(
        line_of(&run, "src/lib.rs").contains("conflict markers left"),
        "{run}"
    );
    let worktree = repo
        .path
        .with_file_name(format!("repo.ultraplan-{SESSION_ID}"));
    let lib = std::fs::read_to_string(worktree.join("src/lib.rs")).unwrap();
    assert!(lib.contains("<<<<<<<") && lib.contains(">>>>>>>"), "{lib}");
    assert_eq!(
        std::fs::read(worktree.join("logo.png")).unwrap(),
        blob(9, 700)
    );
}

#[test]
fn a_dirty_tree_is_left_alone_then_stash_apply_pop_keeps_both_changes() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    repo.write("README.md", "# demo\n\nMy local edit.\n");
    let before = repo.snapshot();

    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 1, "{run}");
    assert!(
        run.stdout.contains("uncommitted changes (README.md)"),
        "{run}"
    );
    assert!(line_of(&run, "src/lib.rs").contains("would apply"), "{run}");
    assert_eq!(repo.snapshot(), before);

    let run = pull(&home, &server, &repo.path, &["--stash"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("stashed"), "{run}");
    assert!(run.stdout.contains("popped back"), "{run}");
    assert_patched(&repo.path);
    assert_eq!(repo.text("README.md"), "# demo\n\nMy local edit.\n");
    assert_eq!(repo.text("notes.txt"), "untracked\n");
    assert_eq!(repo.git(&["stash", "list"]), "", "the stash was popped");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]).trim(), repo.base);
}

#[test]
fn stash_apply_pop_merges_local_changes_to_a_patched_file() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    repo.write("src/lib.rs", LIB.replace("    3\n", "    33\n"));
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 1, "dirty: refused\n{run}");
    assert!(line_of(&run, "src/lib.rs").contains("would apply"), "{run}");
    let run = pull(&home, &server, &repo.path, &["--stash"]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        repo.text("src/lib.rs"),
        LIB.replace("    3\n", "    33\n")
            .replace("    1\n", "    100\n")
    );
    assert_eq!(repo.git(&["diff", "--cached", "--name-only"]), "");
    assert_eq!(repo.git(&["stash", "list"]), "");
}

#[test]
fn stash_apply_pop_that_conflicts_keeps_the_stash_and_says_so() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    repo.write("src/lib.rs", LIB.replace("    1\n", "    -1\n"));
    let run = pull(&home, &server, &repo.path, &["--stash"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stdout.contains("popping your stashed changes"), "{run}");
    assert!(run.stdout.contains("kept in the stash"), "{run}");
    assert!(run.stdout.contains("src/lib.rs"), "{run}");
    assert_eq!(repo.git(&["stash", "list"]).lines().count(), 1);
    let lib = repo.text("src/lib.rs");
    assert!(lib.contains("<<<<<<<"), "{lib}");
    assert_eq!(repo.read("logo.png"), blob(9, 700), "the patch is applied");
}

#[test]
fn dry_run_touches_nothing() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    let before = repo.snapshot();
    let run = pull(&home, &server, &repo.path, &["--dry-run"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(line_of(&run, "src/lib.rs").contains("would apply"), "{run}");
    assert!(
        run.stdout.contains("Dry run: nothing was changed."),
        "{run}"
    );
    assert!(
        run.stdout.contains("would be applied to the working tree"),
        "{run}"
    );
    assert_eq!(repo.snapshot(), before);

    repo.write("README.md", "local\n");
    let before = repo.snapshot();
    for flags in [&["--dry-run", "--stash"][..], &["--dry-run", "--worktree"]] {
        let run = pull(&home, &server, &repo.path, flags);
        assert_eq!(run.code, 0, "{run}");
        assert_eq!(repo.snapshot(), before, "{flags:?}");
    }
    assert!(
        !repo
            .path
            .with_file_name(format!("repo.ultraplan-{SESSION_ID}"))
            .exists()
    );
    assert_eq!(repo.git(&["branch", "--list", "ultraplan/*"]), "");

    // A conflict makes a dry run fail too.
    repo.write("src/lib.rs", LIB.replace("    1\n", "    -1\n"));
    let before = repo.snapshot();
    let run = pull(&home, &server, &repo.path, &["--dry-run"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(line_of(&run, "src/lib.rs").contains("conflicted"), "{run}");
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn outside_a_git_repository_it_refuses() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    let plain = tempfile::TempDir::new().unwrap();
    let dir = plain.path().canonicalize().unwrap();
    let run = pull(&home, &server, &dir, &[]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("not a git repository"), "{run}");
    assert!(run.stderr.contains(&dir.display().to_string()), "{run}");
    assert!(server.recorded().patch_gets.is_empty(), "refused first");
}

#[test]
fn an_already_applied_patch_is_skipped() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    usual_change(&repo.path);
    repo.commit_all("applied by hand");
    let before = repo.snapshot();
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    for path in ["src/lib.rs", "src/extra.rs", "logo.png", "assets/icon.bin"] {
        assert!(line_of(&run, path).contains("skipped"), "{run}");
    }
    assert!(run.stdout.contains("Nothing to apply"), "{run}");
    assert_eq!(repo.snapshot(), before);
    let run = pull(&home, &server, &repo.path, &["--dry-run"]);
    assert_eq!(run.code, 0, "{run}");
    assert!(line_of(&run, "src/lib.rs").contains("would skip"), "{run}");
    assert!(run.stdout.contains("Nothing to apply"), "{run}");
}

#[test]
fn a_partly_applied_patch_applies_the_rest() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    repo.write("src/extra.rs", "pub const EXTRA: u8 = 7;\n");
    repo.commit_all("one file by hand");
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(line_of(&run, "src/extra.rs").contains("skipped"), "{run}");
    assert!(line_of(&run, "src/lib.rs").contains("applied"), "{run}");
    assert_patched(&repo.path);
}

#[test]
fn a_change_near_the_patch_merges_three_way_without_staging() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    // Inside the hunk's context, not next to its change: only a 3-way merge applies it.
    repo.write("src/lib.rs", LIB.replace("pub fn two", "pub fn second"));
    repo.commit_all("rename two");
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(line_of(&run, "src/lib.rs").contains("3-way merge"), "{run}");
    assert_eq!(
        repo.text("src/lib.rs"),
        LIB.replace("pub fn two", "pub fn second")
            .replace("    1\n", "    100\n")
    );
    let staged = repo.git(&["diff", "--cached", "--name-only"]);
    assert_eq!(staged, "", "the index is as it was");
}

#[test]
fn an_empty_patch_changed_nothing() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, Vec::new());
    let before = repo.snapshot();
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stdout.contains("The remote execution changed nothing."),
        "{run}"
    );
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn while_executing_no_wait_fails_clearly() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            executions: vec![executing()],
            patch: repo.patch(usual_change),
            ..Config::default()
        },
        vec![],
    );
    let before = repo.snapshot();
    let run = pull(&home, &server, &repo.path, &["--no-wait"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("still being executed"), "{run}");
    assert!(run.stderr.contains("--no-wait"), "{run}");
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn a_409_execution_running_with_no_wait_fails_clearly() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    // The resource already says finished, the patch endpoint still answers 409.
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            executions: vec![finished()],
            patch_running: true,
            ..Config::default()
        },
        vec![],
    );
    let run = pull(&home, &server, &repo.path, &["--no-wait"]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("still being executed"), "{run}");
    assert_eq!(server.recorded().patch_gets.len(), 1, "no waiting");
}

#[test]
fn it_waits_for_the_execution_to_finish() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            session_context: json!({"base": {"commit": repo.base}}),
            executions: vec![executing(), finished()],
            patch: repo.patch(usual_change),
            ..Config::default()
        },
        vec![],
    );
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(
        run.stderr
            .contains("Waiting for the remote execution of session sess-1"),
        "{run}"
    );
    assert_eq!(
        run.stderr.matches("Waiting").count(),
        1,
        "one status line\n{run}"
    );
    assert!(server.recorded().session_gets >= 2);
    assert_patched(&repo.path);
}

#[test]
fn a_session_with_nothing_to_pull_says_so() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = Server::start(Config::default(), vec![]);
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("nothing to pull"), "{run}");

    // Approved, but the server never executed it.
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            ..Config::default()
        },
        vec![],
    );
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 1, "{run}");
    assert!(run.stderr.contains("no remote execution"), "{run}");
    assert_eq!(server.recorded().archives, 0);
}

/// `pull` under a pseudo-terminal, as a person runs it.
fn pull_in_a_terminal(home: &Home, server: &Server, cwd: &Path) -> Pty {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ultraplan"));
    cmd.env_clear()
        .envs(home.envs())
        .env("TERM", "xterm-256color")
        .args(["--server", &server.url, "pull", SESSION_ID])
        .current_dir(cwd);
    Pty::spawn(cmd)
}

#[test]
fn in_a_terminal_it_asks_how_to_apply_to_a_dirty_tree() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    repo.write("README.md", "local\n");
    let before = repo.snapshot();

    let mut pty = pull_in_a_terminal(&home, &server, &repo.path);
    pty.wait_for("would apply");
    pty.wait_for("How do you want to apply the patch?");
    pty.wait_for("Cancel");
    pty.send("\x1b[B\x1b[B\r");
    pty.wait_for("Cancelled; nothing was changed.");
    assert_eq!(pty.exit_code(), 1, "{}", pty.output());
    assert_eq!(repo.snapshot(), before);

    let mut pty = pull_in_a_terminal(&home, &server, &repo.path);
    pty.wait_for("Stash, apply, pop");
    pty.wait_for("Cancel");
    pty.send("\r");
    pty.wait_for("Applied in a new worktree");
    assert_eq!(pty.exit_code(), 0, "{}", pty.output());
    assert_patched(
        &repo
            .path
            .with_file_name(format!("repo.ultraplan-{SESSION_ID}")),
    );
    assert_eq!(repo.snapshot(), before);
}

#[test]
fn ctrl_c_stops_waiting_and_changes_nothing() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            executions: vec![executing()],
            ..Config::default()
        },
        vec![],
    );
    let before = repo.snapshot();
    let mut pty = pull_in_a_terminal(&home, &server, &repo.path);
    pty.wait_for("Waiting for the remote execution");
    pty.send("\x03");
    pty.wait_for("Stopped waiting; nothing was changed.");
    assert_eq!(pty.exit_code(), 1, "{}", pty.output());
    assert_eq!(repo.snapshot(), before);
    assert!(server.recorded().patch_gets.is_empty());
}

#[test]
fn renames_modes_and_quoted_names_apply_and_are_reported_by_name() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    repo.write("run.sh", "#!/bin/sh\necho hi\n");
    repo.commit_all("a script");
    let base = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let repo = Repo { base, ..repo };
    let patch = repo.patch(|dir| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        std::fs::remove_file(dir.join("README.md")).unwrap();
        std::fs::write(dir.join("docs/read me.md"), format!("{readme}More.\n")).unwrap();
        std::fs::write(dir.join("café \"q\".txt"), "quoted\n").unwrap();
        let script = dir.join("run.sh");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    });
    let text = String::from_utf8_lossy(&patch);
    assert!(text.contains("rename from README.md"), "{text}");
    assert!(text.contains("\"b/caf\\303\\251 \\\"q\\\".txt\""), "{text}");
    let server = server_with(&repo, patch);
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert!(run.stdout.contains("docs/read me.md"), "{run}");
    assert!(run.stdout.contains("renamed from README.md"), "{run}");
    assert!(run.stdout.contains("café \"q\".txt"), "{run}");
    assert!(line_of(&run, "run.sh").contains("mode changed"), "{run}");
    assert!(!repo.path.join("README.md").exists());
    assert_eq!(repo.text("docs/read me.md"), "# demo\n\nA demo.\nMore.\n");
    assert_eq!(repo.text("café \"q\".txt"), "quoted\n");
    let mode = std::fs::metadata(repo.path.join("run.sh")).unwrap();
    assert_ne!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o111,
        0
    );

    // Pulled again: every file is already there.
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout.matches("skipped").count(), 3, "{run}");
    assert!(run.stdout.contains("Nothing to apply"), "{run}");
}

#[test]
fn patch_flags_on_a_teleported_plan_are_refused_and_change_nothing() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "teleported")],
            ..Config::default()
        },
        vec![],
    );
    let run = pull(&home, &server, &repo.path, &["--dry-run"]);
    assert_eq!(run.code, 2, "{run}");
    assert!(run.stderr.contains("--dry-run is for the patch"), "{run}");
    assert!(!repo.path.join(".ultraplan").exists());
    assert_eq!(server.recorded().archives, 0);
}

#[test]
fn help_documents_the_flags_and_exit_codes() {
    let home = Home::new();
    let out = home
        .cmd(home.path())
        .args(["pull", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--dry-run",
        "--worktree",
        "--worktree-dir",
        "--stash",
        "--no-wait",
        "Exit status",
        "2 usage",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}
