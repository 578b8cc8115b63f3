//! `ultraplan pull` against hostile patches: a symlink out of the repository with a hidden
//! section written through it (in a worktree), a symlink into `.git` from an earlier pull,
//! absolute and escaping symlinks, paths into `.git` in every spelling, moved and retargeted
//! symlinks. Each is refused with a non-zero exit, and nothing at all is touched: working
//! tree, index, `.git` (hooks included), stash, worktrees, branches, and the directory
//! around the repository.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::pull::{LIB, Repo, Run, line_of, pull, server_with, usual_change};
use crate::support::Home;
use crate::support::server::{Config, Server, finished, plan};

/// Everything a pull could change, `.git` included (its index as git lists it, since a
/// read-only `git status` may refresh the file's stat data).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Everything {
    files: Vec<(PathBuf, String)>,
    index: String,
    status: String,
    stashes: String,
    worktrees: String,
    branches: String,
    /// The names next to the repository (a worktree, or a file written outside).
    around: Vec<String>,
}

pub(crate) fn everything(repo: &Repo) -> Everything {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if rel == Path::new(".git/index") {
                continue;
            }
            let meta = path.symlink_metadata().unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.push((rel, format!("-> {}", target.display())));
            } else if meta.is_dir() {
                out.push((rel, "dir".into()));
                walk(&path, root, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
                out.push((rel, format!("{mode:o} {}", String::from_utf8_lossy(&bytes))));
            }
        }
    }
    let mut files = Vec::new();
    walk(&repo.path, &repo.path, &mut files);
    files.sort();
    let mut around: Vec<String> = std::fs::read_dir(repo.path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    around.sort();
    Everything {
        files,
        index: repo.git(&["ls-files", "-s"]),
        status: repo.git(&["status", "--porcelain=v1", "--untracked-files=all"]),
        stashes: repo.git(&["stash", "list"]),
        worktrees: repo.git(&["worktree", "list", "--porcelain"]),
        branches: repo.git(&["branch", "-a", "-v"]),
        around,
    }
}

/// The hooks git put there (samples only), and nothing else.
fn assert_no_hooks(repo: &Repo) {
    for entry in std::fs::read_dir(repo.path.join(".git/hooks")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(name.ends_with(".sample"), "a hook appeared: {name}");
    }
}

fn blob_id(content: &str) -> String {
    let mut child = std::process::Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

const ZERO: &str = "0000000000000000000000000000000000000000";

/// A `diff --git` section that creates a symlink.
fn symlink_section(path: &str, target: &str) -> String {
    format!(
        "diff --git a/{path} b/{path}\nnew file mode 120000\nindex {ZERO}..{}\n--- /dev/null\n\
         +++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n",
        blob_id(target)
    )
}

/// A `diff --git` section that creates an executable file; `a`/`b` are the names as the
/// header spells them (quoted or not, prefix included).
fn hook_section(a: &str, b: &str) -> String {
    let body = "#!/bin/sh\ntouch pwned\n";
    format!(
        "diff --git {a} {b}\nnew file mode 100755\nindex {ZERO}..{}\n--- /dev/null\n+++ {b}\n\
         @@ -0,0 +1,2 @@\n+#!/bin/sh\n+touch pwned\n",
        blob_id(body)
    )
}

fn refused(run: &Run, path: &str, why: &str) {
    let line = line_of(run, path);
    assert!(line.contains("refused"), "{path}: {run}");
    assert!(line.contains(why), "{path} lacks {why:?}: {run}");
}

fn assert_untouched(repo: &Repo, before: &Everything, run: &Run) {
    assert_ne!(run.code, 0, "{run}");
    assert!(run.stdout.contains("Nothing was changed."), "{run}");
    assert_eq!(&everything(repo), before, "something was touched\n{run}");
    assert_no_hooks(repo);
}

#[test]
fn a_worktree_pull_with_a_hidden_section_through_an_escaping_symlink_is_refused() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let lib = String::from_utf8(repo.patch(|dir| {
        std::fs::write(dir.join("src/lib.rs"), LIB.replace("    1\n", "    100\n")).unwrap();
    }))
    .unwrap();
    // The local branch moved on, and the session's base is unknown here: the worktree
    // starts at HEAD and src/lib.rs conflicts (a 3-way merge would be tried for it).
    repo.write("src/lib.rs", LIB.replace("    1\n", "    -1\n"));
    repo.commit_all("meanwhile");
    let hidden = "--- /dev/null\n+++ b/link/post-merge\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n\
                  +touch \"$HOME/pwned\"\n";
    let patch = format!(
        "{}{lib}{hidden}",
        symlink_section("link", "../repo/.git/hooks")
    );
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            session_context: json!({"base": {"commit": ZERO.replace('0', "1")}}),
            executions: vec![finished()],
            patch: patch.into_bytes(),
            ..Config::default()
        },
        vec![],
    );
    let before = everything(&repo);
    for flags in [&["--worktree"][..], &["--worktree", "--dry-run"], &[]] {
        let run = pull(&home, &server, &repo.path, flags);
        assert_untouched(&repo, &before, &run);
        refused(&run, "link", "leaves the repository");
        refused(&run, "link/post-merge", "hidden in the patch");
        assert!(run.stdout.contains("Refused:"), "{run}");
    }
    assert!(!home.path().join("pwned").exists());
}

#[test]
fn a_symlink_into_git_from_an_earlier_pull_is_never_written_through() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let first = symlink_section("docs/assets", "../.git");
    let server = server_with(&repo, first.into_bytes());
    let before = everything(&repo);
    let run = pull(&home, &server, &repo.path, &[]);
    assert_untouched(&repo, &before, &run);
    refused(&run, "docs/assets", "target is in .git");

    // As an older client would have left it: the link is there, untracked, then committed.
    std::fs::create_dir_all(repo.path.join("docs")).unwrap();
    std::os::unix::fs::symlink("../.git", repo.path.join("docs/assets")).unwrap();
    let second = hook_section(
        "a/docs/assets/hooks/pre-commit",
        "b/docs/assets/hooks/pre-commit",
    );
    for committed in [false, true] {
        let mut base = repo.base.clone();
        if committed {
            repo.commit_all("the link");
            base = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
        }
        let server = Server::start(
            Config {
                plans: vec![plan("t1", 1, "approved")],
                session_context: json!({"base": {"commit": base}}),
                executions: vec![finished()],
                patch: second.clone().into_bytes(),
                ..Config::default()
            },
            vec![],
        );
        let before = everything(&repo);
        for flags in [&[][..], &["--dry-run"], &["--stash"], &["--worktree"]] {
            if !committed && flags == ["--worktree"] {
                continue; // the worktree starts at the session's base, without the link
            }
            let run = pull(&home, &server, &repo.path, flags);
            assert_untouched(&repo, &before, &run);
            refused(
                &run,
                "docs/assets/hooks/pre-commit",
                "written through the existing symlink docs/assets",
            );
        }
    }
    assert!(!repo.path.join(".git/hooks/pre-commit").exists());
}

#[test]
fn escaping_symlinks_and_paths_into_git_in_any_spelling_are_refused() {
    // (patch, the refused path as reported, why)
    let cases: Vec<(String, &str, &str)> = vec![
        (
            symlink_section("leak", "/etc/shadow"),
            "leak",
            "absolute target",
        ),
        (
            symlink_section("up", "../../outside"),
            "up",
            "leaves the repository",
        ),
        (
            symlink_section("docs/up", "../../x"),
            "docs/up",
            "leaves the repository",
        ),
        (symlink_section("g", ".git/hooks"), "g", "target is in .git"),
        (
            symlink_section("G", "src/../.GIT"),
            "G",
            "target is in .git",
        ),
        (
            hook_section("a/.git/hooks/post-merge", "b/.git/hooks/post-merge"),
            ".git/hooks/post-merge",
            "",
        ),
        (
            hook_section("a/.GIT/hooks/post-merge", "b/.GIT/hooks/post-merge"),
            ".GIT/hooks/post-merge",
            "",
        ),
        (
            hook_section("a/a/../.git/hooks/x", "b/a/../.git/hooks/x"),
            "a/../.git/hooks/x",
            "",
        ),
        (
            hook_section("a/./.git/hooks/x", "b/./.git/hooks/x"),
            "./.git/hooks/x",
            "",
        ),
        (
            hook_section("\"a/.git /hooks/x\"", "\"b/.git /hooks/x\""),
            ".git",
            "",
        ),
        (
            hook_section("\"a/\\056git/hooks/x\"", "\"b/\\056git/hooks/x\""),
            ".git/hooks/x",
            "",
        ),
    ];
    for (patch, path, why) in cases {
        let home = Home::new();
        let repo = Repo::new(home.path());
        // A good file first: one bad file refuses the whole patch.
        let good = String::from_utf8(repo.patch(usual_change)).unwrap();
        let server = server_with(&repo, format!("{good}{patch}").into_bytes());
        let before = everything(&repo);
        for flags in [&[][..], &["--dry-run"], &["--worktree"]] {
            let run = pull(&home, &server, &repo.path, flags);
            assert_untouched(&repo, &before, &run);
            let line = run
                .stdout
                .lines()
                .find(|l| l.contains("refused") && l.contains(path))
                .unwrap_or_else(|| panic!("{path} not refused:\n{run}"));
            assert!(line.contains(why), "{path}: {why}\n{run}");
            assert!(!line.contains("src/lib.rs"), "{run}");
        }
        assert!(!home.path().join("outside").exists());
        assert!(!home.path().join("x").exists());
    }
}

#[test]
fn a_benign_patch_with_a_symlink_inside_the_repository_still_applies() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let patch = repo.patch(|dir| {
        usual_change(dir);
        std::fs::create_dir_all(dir.join("docs")).unwrap();
        std::os::unix::fs::symlink("../logo.png", dir.join("docs/logo.png")).unwrap();
    });
    let server = server_with(&repo, patch);
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    let line = line_of(&run, "docs/logo.png");
    assert!(line.contains("applied"), "{run}");
    assert!(line.contains("new file, symlink to ../logo.png"), "{run}");
    let target = std::fs::read_link(repo.path.join("docs/logo.png")).unwrap();
    assert_eq!(target, Path::new("../logo.png"));
}

#[test]
fn moving_a_symlink_without_its_target_in_the_patch_is_refused() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    std::fs::create_dir_all(repo.path.join("a/b")).unwrap();
    std::os::unix::fs::symlink("../x", repo.path.join("a/b/up")).unwrap();
    repo.commit_all("a link inside");
    let base = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let repo = Repo { base, ..repo };
    // Renamed to the top, `../x` would lead out of the repository.
    let patch = repo.patch(|dir| {
        std::fs::rename(dir.join("a/b/up"), dir.join("up")).unwrap();
    });
    assert!(String::from_utf8_lossy(&patch).contains("rename from a/b/up"));
    let server = server_with(&repo, patch);
    let before = everything(&repo);
    for flags in [&[][..], &["--worktree"]] {
        let run = pull(&home, &server, &repo.path, flags);
        assert_untouched(&repo, &before, &run);
        refused(&run, "up", "moves or copies the symlink a/b/up");
    }
}

#[test]
fn retargeting_an_existing_symlink_is_checked_however_its_mode_is_spelled() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    std::fs::create_dir_all(repo.path.join("docs")).unwrap();
    std::os::unix::fs::symlink("../logo.png", repo.path.join("docs/logo")).unwrap();
    repo.commit_all("a link inside");
    let base = repo.git(&["rev-parse", "HEAD"]).trim().to_owned();
    let repo = Repo { base, ..repo };
    let old = blob_id("../logo.png");
    let new = blob_id("/etc/shadow");
    // (the mode as the index line spells it, why)
    for (mode, why) in [
        ("120000", "absolute target"),
        ("0120000", "absolute target"),
        ("100644", "changes the existing symlink"),
    ] {
        let patch = format!(
            "diff --git a/docs/logo b/docs/logo\nindex {old}..{new} {mode}\n--- a/docs/logo\n\
             +++ b/docs/logo\n@@ -1 +1 @@\n-../logo.png\n\\ No newline at end of file\n\
             +/etc/shadow\n\\ No newline at end of file\n"
        );
        let server = server_with(&repo, patch.into_bytes());
        let before = everything(&repo);
        for flags in [&[][..], &["--worktree"]] {
            let run = pull(&home, &server, &repo.path, flags);
            assert_untouched(&repo, &before, &run);
            refused(&run, "docs/logo", why);
        }
    }
    let target = std::fs::read_link(repo.path.join("docs/logo")).unwrap();
    assert_eq!(target, Path::new("../logo.png"));
}

#[test]
fn a_new_file_is_never_merged_over_one_already_there() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let server = server_with(&repo, repo.patch(usual_change));
    // An empty file where the patch creates one: a 3-way merge from an empty base would
    // "cleanly" write over it.
    repo.write("src/extra.rs", "");
    repo.commit_all("an empty file in the way");
    let before = everything(&repo);
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 1, "{run}");
    let line = line_of(&run, "src/extra.rs");
    assert!(line.contains("conflicted"), "{run}");
    assert!(line.contains("already exists"), "{run}");
    assert!(!run.stdout.contains("3-way"), "{run}");
    assert_eq!(everything(&repo), before);
}
