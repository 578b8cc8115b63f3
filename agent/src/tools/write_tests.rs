use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use super::*;
use crate::test_support::{symlink, tree};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn writes_create_and_overwrite_files() {
    let dir = tree(&[("src/lib.rs", b"old\n"), ("run.sh", b"#!/bin/sh\n")]);
    let root = dir.path();
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o750))
        .expect("chmod");
    let ws = Workspace::new(root).expect("workspace");
    let abs = format!("{}/abs.txt", root.display());
    // (file_path, content, expected report, file checked for the content)
    let cases: [(&str, &str, &str, &str); 5] = [
        ("new.txt", "hello\n", "Created new.txt (6 bytes)", "new.txt"),
        (
            "src/lib.rs",
            "pub fn f() {}\n",
            "Updated src/lib.rs (14 bytes)",
            "src/lib.rs",
        ),
        (
            "a/b/c/deep.md",
            "",
            "Created a/b/c/deep.md (0 bytes)",
            "a/b/c/deep.md",
        ),
        (&abs, "é", "Created abs.txt (2 bytes)", "abs.txt"),
        (
            "run.sh",
            "#!/bin/sh\necho hi\n",
            "Updated run.sh (18 bytes)",
            "run.sh",
        ),
    ];
    for (file_path, content, report, file) in cases {
        let out = run(&ws, json!({"file_path": file_path, "content": content}));
        assert_eq!(out.expect(file_path), report);
        let written = std::fs::read_to_string(root.join(file)).expect("read back");
        assert_eq!(written, content, "{file_path}");
    }
    assert_eq!(mode(&root.join("run.sh")), 0o750, "permissions kept");
}

#[test]
fn writes_outside_the_workspace_are_refused_and_write_nothing() {
    let outside = tree(&[("secret.txt", b"secret")]);
    let parent = tempfile::tempdir().expect("tempdir");
    let repo = parent.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    std::fs::write(repo.join("a.txt"), "a").expect("write");
    symlink(&repo, "dir_out", outside.path());
    symlink(&repo, "file_out", &outside.path().join("secret.txt"));
    symlink(&repo, "new_out", &outside.path().join("planted.txt"));
    std::fs::create_dir(repo.join("sub")).expect("mkdir");
    let ws = Workspace::new(&repo).expect("workspace");
    let cases = [
        ("../x.txt", "escapes the workspace root"),
        ("sub/../../x.txt", "escapes the workspace root"),
        ("/etc/passwd", "outside the workspace root"),
        ("dir_out/planted.txt", "symlink that points outside"),
        ("dir_out/deeper/planted.txt", "symlink that points outside"),
        ("file_out", "symlink that points outside"),
        ("new_out", "symlink that points outside"),
        ("sub", "is a directory"),
        (".", "is a directory"),
    ];
    for (file_path, needle) in cases {
        let err = run(&ws, json!({"file_path": file_path, "content": "pwned"}))
            .expect_err(file_path)
            .to_string();
        assert!(err.contains(needle), "{file_path}: {err}");
    }
    assert!(!parent.path().join("x.txt").exists());
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).expect("read"),
        "secret"
    );
    let outside_entries: Vec<_> = std::fs::read_dir(outside.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(outside_entries, ["secret.txt"], "nothing planted outside");
}

#[test]
fn inputs_are_validated() {
    let dir = tree(&[("a.txt", b"a")]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    let cases = [
        (json!({"file_path": "a.txt"}), "missing field `content`"),
        (json!({"content": "x"}), "missing field `file_path`"),
        (
            json!({"file_path": "a.txt", "content": 1}),
            "field `content`",
        ),
        (json!("a.txt"), "`file_path` and `content`"),
    ];
    for (input, needle) in cases {
        let err = run(&ws, input.clone()).expect_err("invalid").to_string();
        assert!(err.starts_with("Invalid input for Write"), "{input}: {err}");
        assert!(err.contains(needle), "{input}: {err}");
    }
}
