//! The verifier's workspace copy: what is copied, what is left out, the caps, the removal.

use std::path::Path;

use super::*;
use crate::test_support::{symlink, tree};

fn listing(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).expect("list").flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).expect("under root").display();
            let meta = fs::symlink_metadata(&path).expect("meta");
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).expect("link");
                out.push(format!("{relative} -> {}", target.display()));
            } else if meta.is_dir() {
                out.push(format!("{relative}/"));
                pending.push(path);
            } else {
                let text = fs::read_to_string(&path).unwrap_or_default();
                out.push(format!("{relative} = {text}"));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn copies_files_dirs_and_links_as_they_are_without_git() {
    let repo = tree(&[
        ("src/a.rs", b"fn a() {}"),
        ("README.md", b"readme"),
        (".git/HEAD", b"ref: refs/heads/main"),
        ("vendor/sub/.git", b"gitdir: ../../.git/modules/sub"),
        ("vendor/sub/lib.rs", b"lib"),
        (".ultraplan/environment.toml", b"[verify]"),
    ]);
    symlink(repo.path(), "link_to_a", Path::new("src/a.rs"));
    symlink(repo.path(), "dangling", Path::new("nowhere/at/all"));
    let outside = tree(&[("secret.txt", b"outside")]);
    symlink(repo.path(), "escape", &outside.path().join("secret.txt"));
    let base = tempfile::tempdir().expect("base");

    let copy = copy_workspace(repo.path(), base.path(), CopyLimits::default()).expect("copy");
    assert!(copy.path().starts_with(base.path()));
    let escape = format!("escape -> {}", outside.path().join("secret.txt").display());
    let mut want = vec![
        ".ultraplan/",
        ".ultraplan/environment.toml = [verify]",
        "README.md = readme",
        "dangling -> nowhere/at/all",
        escape.as_str(),
        "link_to_a -> src/a.rs",
        "src/",
        "src/a.rs = fn a() {}",
        "vendor/",
        "vendor/sub/",
        "vendor/sub/lib.rs = lib",
    ];
    want.sort_unstable();
    assert_eq!(listing(copy.path()), want);

    fs::write(copy.path().join("src/a.rs"), "changed").expect("write");
    let original = fs::read_to_string(repo.path().join("src/a.rs")).expect("read");
    assert_eq!(original, "fn a() {}", "the copy is separate");

    let path = copy.path().to_path_buf();
    drop(copy);
    assert!(!path.exists(), "dropping the copy removes it");
}

#[test]
fn refuses_over_the_caps_before_writing_anything() {
    let repo = tree(&[
        ("a.txt", b"12345"),
        ("b.txt", b"67890"),
        ("d/c.txt", b"x"),
        (".git/objects/big", &[0_u8; 4096]),
    ]);
    let base = tempfile::tempdir().expect("base");
    let cases = [
        // (max_bytes, max_entries, refused with)
        (11, 4, None),
        (10, 4, Some("more than 10 bytes")),
        (11, 3, Some("more than 3 files, directories and links")),
    ];
    for (max_bytes, max_entries, refused) in cases {
        let limits = CopyLimits {
            max_bytes,
            max_entries,
        };
        let got = copy_workspace(repo.path(), base.path(), limits);
        match (refused, got) {
            (None, Ok(copy)) => assert_eq!(listing(copy.path()).len(), 4),
            (Some(want), Err(e)) => assert!(e.to_string().contains(want), "{e}"),
            (want, got) => panic!("{max_bytes}/{max_entries}: want {want:?}, got {got:?}"),
        }
        assert_eq!(
            fs::read_dir(base.path()).expect("list").count(),
            0,
            "nothing is left behind"
        );
    }
    let missing = copy_workspace(
        &repo.path().join("nope"),
        base.path(),
        CopyLimits::default(),
    );
    assert!(matches!(missing, Err(CopyError::Io { .. })), "{missing:?}");
}
