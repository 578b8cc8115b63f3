use std::path::Path;

use ultraplan_protocol::patch::FileChange;

use super::*;

fn write(root: &Path, path: &str, data: &[u8]) {
    let full = root.join(path);
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(full, data).expect("write");
}

fn bundle() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "src/lib.rs", b"fn one() {}\n");
    write(dir.path(), "README.md", b"hello\n");
    write(dir.path(), "old.txt", b"bye\n");
    write(dir.path(), ".gitignore", b"target/\n*.log\n");
    write(dir.path(), "kept.log", b"tracked though ignored\n");
    std::os::unix::fs::symlink("README.md", dir.path().join("link")).expect("symlink");
    dir
}

#[tokio::test]
async fn the_patch_is_the_change_of_the_tree_against_the_bundle() {
    let bundle = bundle();
    let root = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::at(root.path());
    assert!(!ws.is_prepared().await);
    ws.prepare(bundle.path(), None).await.expect("prepare");
    assert!(ws.is_prepared().await);
    assert!(
        !root.path().join("tree/.git").exists(),
        "git dir stays outside the tree"
    );
    let empty = ws.diff(MAX_PATCH_BYTES).await.expect("diff");
    assert!(empty.diff.is_empty() && empty.summary.is_empty());

    let tree = &ws.tree;
    write(tree, "src/lib.rs", b"fn one() {}\nfn two() {}\n");
    write(tree, "logo.png", &[0x89, b'P', b'N', b'G', 0, 1, 2, 255]);
    std::fs::remove_file(tree.join("old.txt")).expect("rm");
    write(tree, "target/debug/out", b"build output\n");
    write(tree, "new.log", b"ignored\n");
    write(tree, "kept.log", b"changed\n");
    std::fs::create_dir_all(tree.join(".git")).expect("agent-made .git");
    write(tree, ".git/HEAD", b"ref: refs/heads/evil\n");

    let patch = ws.diff(MAX_PATCH_BYTES).await.expect("diff");
    let files: Vec<(&str, FileChange, bool)> = patch
        .summary
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.change, f.binary))
        .collect();
    assert_eq!(
        files,
        vec![
            ("kept.log", FileChange::Modified, false),
            ("logo.png", FileChange::Added, true),
            ("old.txt", FileChange::Deleted, false),
            ("src/lib.rs", FileChange::Modified, false),
        ]
    );
    assert_eq!(patch.summary.additions, 2);
    assert_eq!(patch.summary.deletions, 2);
    let text = String::from_utf8_lossy(&patch.diff);
    assert!(text.contains("GIT binary patch"), "{text}");
    assert!(
        text.contains("diff --git a/src/lib.rs b/src/lib.rs"),
        "{text}"
    );

    // The patch applies to a copy of the bundle and reproduces the tree.
    let check = tempfile::tempdir().expect("tempdir");
    copy::copy_tree(bundle.path(), check.path()).expect("copy");
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(check.path())
        .status()
        .expect("git init");
    assert!(status.success());
    std::fs::write(check.path().join("p.diff"), &patch.diff).expect("write patch");
    let out = std::process::Command::new("git")
        .args(["apply", "p.diff"])
        .current_dir(check.path())
        .output()
        .expect("git apply");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for path in ["src/lib.rs", "logo.png", "kept.log"] {
        assert_eq!(
            std::fs::read(check.path().join(path)).expect("read"),
            std::fs::read(tree.join(path)).expect("read"),
            "{path}"
        );
    }
    assert!(!check.path().join("old.txt").exists());
}

#[tokio::test]
async fn preparing_again_starts_from_the_bundle() {
    let bundle = bundle();
    let root = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::at(root.path());
    ws.prepare(bundle.path(), None).await.expect("prepare");
    write(&ws.tree, "stray.txt", b"x\n");
    ws.prepare(bundle.path(), None)
        .await
        .expect("prepare again");
    assert!(!ws.tree.join("stray.txt").exists());
    assert!(
        ws.diff(MAX_PATCH_BYTES)
            .await
            .expect("diff")
            .summary
            .is_empty()
    );
}

/// A nested repository whose config would run commands when git looks into it.
fn plant_hostile_repo(dir: &Path, marker: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=x", "-c", "user.email=x@x"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    write(dir, "f.txt", b"x\n");
    write(dir, ".gitattributes", b"* filter=z\n");
    git(&["add", "-A"]);
    git(&["commit", "-qm", "x"]);
    let hook = dir.join("hook.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).expect("hook");
    let mut perms = std::fs::metadata(&hook).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).expect("chmod");
    git(&["config", "core.fsmonitor", &hook.display().to_string()]);
    git(&[
        "config",
        "filter.z.clean",
        &format!("touch {}", marker.display()),
    ]);
    write(dir, "f.txt", b"changed\n");
}

#[tokio::test]
async fn nested_repositories_never_run_anything_on_the_server() {
    let bundle = bundle();
    let marker_dir = tempfile::tempdir().expect("tempdir");
    let marker = marker_dir.path().join("PWNED");
    // One planted before the base commit (an old bundle), one by the agent afterwards.
    plant_hostile_repo(&bundle.path().join("vendor/old"), &marker);
    let root = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::at(root.path());
    ws.prepare(bundle.path(), None).await.expect("prepare");
    plant_hostile_repo(&ws.tree.join("vendor/new"), &marker);
    std::os::unix::fs::symlink("vendor/new", ws.tree.join(".GIT")).expect("symlink");
    let first = ws.diff(MAX_PATCH_BYTES).await.expect("diff");
    plant_hostile_repo(&ws.tree.join("vendor/again"), &marker);
    let second = ws.diff(MAX_PATCH_BYTES).await.expect("diff again");
    assert!(
        !marker.exists(),
        "a nested repository's config ran a command"
    );
    for name in [
        "vendor/old/.git",
        "vendor/new/.git",
        "vendor/again/.git",
        ".GIT",
    ] {
        assert!(!ws.tree.join(name).exists(), "{name} was left in the tree");
    }
    for patch in [&first, &second] {
        let text = String::from_utf8_lossy(&patch.diff);
        assert!(!text.contains("Subproject commit"), "{text}");
        assert!(!text.contains(".git/"), "{text}");
    }
    let paths: Vec<&str> = second
        .summary
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert!(paths.contains(&"vendor/again/f.txt"), "{paths:?}");
}

#[tokio::test]
async fn large_new_files_stay_out_and_oversized_diffs_are_refused() {
    let bundle = bundle();
    let root = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::at(root.path());
    ws.prepare(bundle.path(), None).await.expect("prepare");
    let big = usize::try_from(super::MAX_NEW_FILE_BYTES).expect("size") + 1;
    let blob: Vec<u8> = (0..big).map(|i| (i % 251) as u8).collect();
    write(&ws.tree, "out/dump [1].bin", &blob);
    write(&ws.tree, "src/lib.rs", b"fn one() {}\nfn two() {}\n");
    let patch = ws.diff(MAX_PATCH_BYTES).await.expect("diff");
    let paths: Vec<&str> = patch
        .summary
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["src/lib.rs"]);
    let left: Vec<(&str, u64)> = patch
        .summary
        .left_out
        .iter()
        .map(|f| (f.path.as_str(), f.bytes))
        .collect();
    assert_eq!(left, [("out/dump [1].bin", big as u64)]);
    // Once it is small enough it is carried again (the exclusion is rewritten each time).
    write(&ws.tree, "out/dump [1].bin", b"small now\n");
    let patch = ws.diff(MAX_PATCH_BYTES).await.expect("diff");
    assert!(patch.summary.left_out.is_empty());
    assert!(
        patch
            .summary
            .files
            .iter()
            .any(|f| f.path == "out/dump [1].bin")
    );
    // A diff over the cap is refused without holding it.
    let refused = ws.diff(64).await;
    assert!(
        matches!(refused, Err(WorkspaceError::TooLarge(64))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn escaping_symlinks_stay_out_of_the_patch_and_are_listed() {
    use ultraplan_protocol::patch::LeftOutReason;
    let bundle = bundle();
    write(bundle.path(), "docs/guide.md", b"guide\n");
    write(bundle.path(), "notes.txt", b"user notes\n");
    // The user's own link into .git: unchanged, it is not the agent's and stays.
    std::os::unix::fs::symlink("../.git", bundle.path().join("docs/own")).expect("symlink");
    let root = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::at(root.path());
    ws.prepare(bundle.path(), None).await.expect("prepare");
    let tree = &ws.tree;
    let link = |target: &str, path: &str| {
        std::os::unix::fs::symlink(target, tree.join(path)).expect("symlink");
    };
    link("/etc/shadow", "leak");
    link("../.git", "docs/assets");
    link("../../outside", "x");
    link("..", "up");
    link("up/secret", "via_up");
    link("src/lib.rs", "inside");
    // A file of the bundle replaced by a refused link comes back as it was.
    std::fs::remove_file(tree.join("notes.txt")).expect("rm");
    link("/etc/passwd", "notes.txt");
    write(tree, "src/new.rs", b"fn new() {}\n");

    let patch = super::patch_of(root.path(), MAX_PATCH_BYTES)
        .await
        .expect("patch");
    let text = String::from_utf8_lossy(&patch.diff);
    for refused in [
        "/etc/shadow",
        "/etc/passwd",
        "outside",
        "../.git",
        "up/secret",
    ] {
        assert!(!text.contains(refused), "{refused} in the patch:\n{text}");
    }
    let paths: Vec<&str> = patch
        .summary
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["inside", "src/new.rs"]);
    let left: Vec<(&str, LeftOutReason, Option<&str>)> = patch
        .summary
        .left_out
        .iter()
        .map(|l| (l.path.as_str(), l.reason, l.target.as_deref()))
        .collect();
    assert_eq!(
        left,
        [
            (
                "docs/assets",
                LeftOutReason::SymlinkIntoGit,
                Some("../.git")
            ),
            ("leak", LeftOutReason::SymlinkAbsolute, Some("/etc/shadow")),
            (
                "notes.txt",
                LeftOutReason::SymlinkAbsolute,
                Some("/etc/passwd")
            ),
            ("up", LeftOutReason::SymlinkEscapes, Some("..")),
            ("via_up", LeftOutReason::SymlinkEscapes, Some("up/secret")),
            ("x", LeftOutReason::SymlinkEscapes, Some("../../outside")),
        ]
    );
    assert_eq!(
        std::fs::read(tree.join("notes.txt")).expect("restored"),
        b"user notes\n"
    );
    assert!(
        tree.join("docs/own").symlink_metadata().is_ok(),
        "the bundle's own link stays"
    );
}
