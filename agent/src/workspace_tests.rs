use std::path::{Path, PathBuf};

use super::*;
use crate::test_support::{symlink, tree};

/// What a resolution is expected to give.
#[derive(Debug)]
enum Want {
    /// Resolves to this path relative to the root (`""` for the root).
    Ok(&'static str),
    Escapes,
    OutsideRoot,
    SymlinkEscape,
    NotFound,
    BrokenSymlink,
    Io,
}

/// Checks what `ws.resolve(input)` or `ws.resolve_for_write(input)` gave.
fn check(ws: &Workspace, input: &str, got: Result<PathBuf, WorkspaceError>, want: &Want) {
    match (want, &got) {
        (Want::Ok(rel), Ok(path)) => assert_eq!(path, &ws.root().join(rel), "input {input:?}"),
        (Want::Escapes, Err(WorkspaceError::Escapes { .. }))
        | (Want::OutsideRoot, Err(WorkspaceError::OutsideRoot { .. }))
        | (Want::SymlinkEscape, Err(WorkspaceError::SymlinkEscape { .. }))
        | (Want::NotFound, Err(WorkspaceError::NotFound { .. }))
        | (Want::BrokenSymlink, Err(WorkspaceError::BrokenSymlink { .. }))
        | (Want::Io, Err(WorkspaceError::Io { .. })) => {}
        _ => panic!("input {input:?}: wanted {want:?}, got {got:?}"),
    }
}

#[test]
fn resolves_and_refuses_paths() {
    let outside = tree(&[("secret.txt", b"s")]);
    let dir = tree(&[
        ("src/main.rs", b"fn main() {}"),
        ("dir é/ünï.txt", b"unicode"),
    ]);
    let root = dir.path();
    symlink(root, "link_out", outside.path());
    symlink(root, "file_out", &outside.path().join("secret.txt"));
    symlink(root, "link_in", Path::new("src/main.rs"));
    symlink(root, "dangling_out", Path::new("/nonexistent-ultraplan/x"));
    symlink(root, "src/up", Path::new("../../"));
    let ws = Workspace::new(root).expect("workspace");
    let abs_main = format!("{}/src/main.rs", root.display());
    let abs_escape = format!("{}/../x", root.display());

    let cases: Vec<(&str, Want)> = vec![
        ("", Want::Ok("")),
        (".", Want::Ok("")),
        ("src/main.rs", Want::Ok("src/main.rs")),
        ("./src/../src/main.rs", Want::Ok("src/main.rs")),
        ("  src/main.rs  ", Want::Ok("src/main.rs")),
        (&abs_main, Want::Ok("src/main.rs")),
        ("dir é/ünï.txt", Want::Ok("dir é/ünï.txt")),
        ("link_in", Want::Ok("src/main.rs")),
        ("..", Want::Escapes),
        ("../outside", Want::Escapes),
        ("src/../../x", Want::Escapes),
        (&abs_escape, Want::Escapes),
        ("/etc/passwd", Want::OutsideRoot),
        ("/", Want::OutsideRoot),
        ("link_out", Want::SymlinkEscape),
        ("link_out/secret.txt", Want::SymlinkEscape),
        ("file_out", Want::SymlinkEscape),
        ("dangling_out", Want::SymlinkEscape),
        ("src/up", Want::SymlinkEscape),
        ("missing.txt", Want::NotFound),
        ("src/missing/deeper.rs", Want::NotFound),
    ];
    for (input, want) in &cases {
        check(&ws, input, ws.resolve(input), want);
    }
}

#[test]
fn write_paths_are_confined_like_reads() {
    let outside = tree(&[("secret.txt", b"s")]);
    let dir = tree(&[("src/main.rs", b"fn main() {}"), ("README.md", b"r")]);
    let root = dir.path();
    symlink(root, "link_out", outside.path());
    symlink(root, "file_out", &outside.path().join("secret.txt"));
    symlink(root, "new_out", &outside.path().join("new.txt"));
    symlink(root, "link_in", Path::new("src"));
    symlink(root, "dangling_in", Path::new("nowhere"));
    let ws = Workspace::new(root).expect("workspace");
    let abs_new = format!("{}/src/new.rs", root.display());

    let cases: Vec<(&str, Want)> = vec![
        ("src/main.rs", Want::Ok("src/main.rs")),
        ("src/new.rs", Want::Ok("src/new.rs")),
        ("a/b/c/new.txt", Want::Ok("a/b/c/new.txt")),
        ("./src/../notes.md", Want::Ok("notes.md")),
        (&abs_new, Want::Ok("src/new.rs")),
        ("link_in/lib.rs", Want::Ok("src/lib.rs")),
        ("link_in/main.rs", Want::Ok("src/main.rs")),
        ("", Want::Io),
        (".", Want::Io),
        ("README.md/x", Want::Io),
        ("../x", Want::Escapes),
        ("src/../../x", Want::Escapes),
        ("/etc/passwd", Want::OutsideRoot),
        ("/tmp/x", Want::OutsideRoot),
        ("link_out/new.txt", Want::SymlinkEscape),
        ("link_out/secret.txt", Want::SymlinkEscape),
        ("file_out", Want::SymlinkEscape),
        ("new_out", Want::SymlinkEscape),
        ("dangling_in", Want::BrokenSymlink),
        ("dangling_in/x", Want::BrokenSymlink),
    ];
    for (input, want) in &cases {
        check(&ws, input, ws.resolve_for_write(input), want);
    }
}

#[test]
fn root_given_through_a_symlink_accepts_both_spellings() {
    let dir = tree(&[("a.txt", b"a")]);
    let holder = tempfile::tempdir().expect("tempdir");
    symlink(holder.path(), "repo", dir.path());
    let given = holder.path().join("repo");
    let ws = Workspace::new(&given).expect("workspace");
    let via_given = format!("{}/a.txt", given.display());
    check(&ws, &via_given, ws.resolve(&via_given), &Want::Ok("a.txt"));
    let via_real = format!("{}/a.txt", dir.path().display());
    check(&ws, &via_real, ws.resolve(&via_real), &Want::Ok("a.txt"));
}

#[test]
fn errors_explain_themselves() {
    let dir = tree(&[("a.txt", b"a")]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    let cases = [
        ("../x", "escapes the workspace root"),
        ("/etc/passwd", "outside the workspace root"),
        ("nope.txt", "does not exist"),
    ];
    for (input, needle) in cases {
        let message = ws.resolve(input).expect_err(input).to_string();
        assert!(message.contains(needle), "{input}: {message}");
        assert!(message.contains(input), "{input}: {message}");
    }
}

#[test]
fn bad_roots_are_refused() {
    let dir = tree(&[("file.txt", b"x")]);
    assert!(matches!(
        Workspace::new(dir.path().join("file.txt")),
        Err(WorkspaceError::RootNotDir(_))
    ));
    assert!(matches!(
        Workspace::new(dir.path().join("missing")),
        Err(WorkspaceError::BadRoot { .. })
    ));
}

#[test]
fn display_is_root_relative() {
    let dir = tree(&[("src/lib.rs", b"")]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    assert_eq!(ws.display(ws.root()), ".");
    assert_eq!(ws.display(&ws.root().join("src/lib.rs")), "src/lib.rs");
}

#[test]
fn reads_reach_the_read_only_tree_by_absolute_path_and_writes_never_do() {
    let repo = tree(&[("src/a.rs", b"fn a() {}\n")]);
    let env = tree(&[
        ("venv/lib/pkg/__init__.py", b"x = 1\n"),
        ("home/.cache/f", b"c"),
    ]);
    symlink(env.path(), "escape", Path::new("/etc/hostname"));
    symlink(env.path(), "inside", Path::new("venv/lib/pkg"));
    let ws = Workspace::new(repo.path())
        .expect("workspace")
        .with_read_only_root(env.path());
    let root = std::fs::canonicalize(env.path()).expect("canonical");
    let e = |rel: &str| format!("{}/{rel}", env.path().display());
    let cases = [
        (
            e("venv/lib/pkg/__init__.py"),
            Ok(root.join("venv/lib/pkg/__init__.py")),
        ),
        (
            e("inside/__init__.py"),
            Ok(root.join("venv/lib/pkg/__init__.py")),
        ),
        (e("venv/../home/.cache/f"), Ok(root.join("home/.cache/f"))),
        (e("escape"), Err("symlink")),
        (e("missing.py"), Err("not found")),
        (e("../outside"), Err("outside")),
    ];
    for (input, want) in cases {
        let got = ws.resolve(&input);
        match (want, &got) {
            (Ok(path), Ok(p)) => assert_eq!(p, &path, "{input}"),
            (Err("symlink"), Err(WorkspaceError::SymlinkEscape { .. }))
            | (Err("not found"), Err(WorkspaceError::NotFound { .. }))
            | (Err("outside"), Err(WorkspaceError::OutsideRoot { .. })) => {}
            (want, got) => panic!("{input}: wanted {want:?}, got {got:?}"),
        }
    }
    // Relative paths still mean the repository; writes never reach the read-only tree.
    assert_eq!(
        ws.resolve("src/a.rs").expect("repo"),
        ws.root().join("src/a.rs")
    );
    assert!(matches!(
        ws.resolve_for_write(&e("venv/new.py")),
        Err(WorkspaceError::OutsideRoot { .. })
    ));
    // Without the tree, the same absolute path is outside the workspace.
    let plain = Workspace::new(repo.path()).expect("workspace");
    assert!(matches!(
        plain.resolve(&e("venv/lib/pkg/__init__.py")),
        Err(WorkspaceError::OutsideRoot { .. })
    ));
}
