//! The bundler against real temporary git repositories.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use flate2::read::MultiGzDecoder;
use tempfile::TempDir;
use ultraplan::bundle::{self, Bundle, Codec, Options, SkipReason};

/// What an archive entry holds: file bytes and mode, or a link target.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    File(Vec<u8>, u32),
    Link(PathBuf),
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn repo() -> TempDir {
    let dir = TempDir::new().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    dir
}

fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn commit_all(root: &Path) {
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "c"]);
}

fn bundle_of(root: &Path, options: &Options) -> (Bundle, Vec<u8>) {
    let mut out = Vec::new();
    let bundle = bundle::create(root, options, &mut out).unwrap();
    (bundle, out)
}

fn items(gz: &[u8]) -> BTreeMap<String, Item> {
    let mut archive = tar::Archive::new(MultiGzDecoder::new(gz));
    let mut items = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let item = match entry.link_name().unwrap() {
            Some(target) => Item::Link(target.into_owned()),
            None => {
                let mut data = Vec::new();
                entry.read_to_end(&mut data).unwrap();
                Item::File(data, entry.header().mode().unwrap())
            }
        };
        items.insert(path, item);
    }
    items
}

fn bundled(root: &Path) -> (Bundle, BTreeMap<String, Item>) {
    let (bundle, gz) = bundle_of(root, &Options::default());
    (bundle, items(&gz))
}

fn names(items: &BTreeMap<String, Item>) -> Vec<&str> {
    items.keys().map(String::as_str).collect()
}

fn text(s: &str) -> Item {
    Item::File(s.as_bytes().to_vec(), 0o644)
}

#[test]
fn gitignore_is_respected() {
    let dir = repo();
    let root = dir.path();
    write(root, ".gitignore", "target/\n*.log\n");
    write(root, "src/main.rs", "fn main() {}");
    write(root, "target/debug/app", "binary");
    write(root, "run.log", "noise");
    write(root, "src/deep/trace.log", "noise");
    commit_all(root);
    let (_, items) = bundled(root);
    assert_eq!(names(&items), [".gitignore", "src/main.rs"]);
}

#[test]
fn untracked_and_dirty_files_are_included_and_listed() {
    let dir = repo();
    let root = dir.path();
    write(root, "a.txt", "old");
    write(root, "b.txt", "same");
    write(root, "gone.txt", "bye");
    commit_all(root);
    let head = git(root, &["rev-parse", "HEAD"]);
    write(root, "a.txt", "new");
    write(root, "notes/todo.md", "untracked");
    std::fs::remove_file(root.join("gone.txt")).unwrap();
    let (bundle, items) = bundled(root);
    assert_eq!(items["a.txt"], text("new"));
    assert_eq!(items["notes/todo.md"], text("untracked"));
    assert_eq!(names(&items), ["a.txt", "b.txt", "notes/todo.md"]);
    let m = &bundle.manifest;
    assert_eq!(m.base_commit.as_deref(), Some(head.as_str()));
    assert_eq!(m.branch.as_deref(), Some("main"));
    assert_eq!(m.dirty_files, ["a.txt", "gone.txt"]);
    assert_eq!(m.untracked_files, ["notes/todo.md"]);
    assert_eq!(m.files, 3);
}

#[test]
fn secrets_are_excluded_and_reported() {
    let dir = repo();
    let root = dir.path();
    for name in [
        ".env",
        ".env.local",
        "tls/server.pem",
        "id_ed25519",
        "credentials.json",
        "a.key",
    ] {
        write(root, name, "secret");
    }
    for name in [".env.example", "id_ed25519.pub", "src/key.rs"] {
        write(root, name, "public");
    }
    write(root, "tracked/.env", "tracked secret");
    commit_all(root);
    let (bundle, items) = bundled(root);
    assert_eq!(
        names(&items),
        [".env.example", "id_ed25519.pub", "src/key.rs"]
    );
    let skipped: Vec<(&str, SkipReason)> = bundle
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), s.reason))
        .collect();
    let expected = [
        ".env",
        ".env.local",
        "a.key",
        "credentials.json",
        "id_ed25519",
        "tls/server.pem",
        "tracked/.env",
    ];
    assert_eq!(skipped, expected.map(|p| (p, SkipReason::Secret)));
}

#[test]
fn symlinks_are_stored_and_escapes_skipped() {
    let dir = repo();
    let outside = TempDir::new().unwrap();
    write(outside.path(), "private.txt", "not yours");
    let root = dir.path();
    write(root, "src/lib.rs", "pub fn f() {}");
    symlink("src/lib.rs", root.join("inside")).unwrap();
    symlink("missing", root.join("dangling")).unwrap();
    symlink(outside.path().join("private.txt"), root.join("absolute")).unwrap();
    symlink("../../etc/passwd", root.join("src/climb")).unwrap();
    symlink("..", root.join("src/up")).unwrap();
    symlink("src/up/..", root.join("chained")).unwrap();
    let (bundle, items) = bundled(root);
    assert_eq!(items["inside"], Item::Link("src/lib.rs".into()));
    assert_eq!(items["dangling"], Item::Link("missing".into()));
    assert_eq!(items["src/up"], Item::Link("..".into()));
    let escaped: Vec<&str> = bundle
        .skipped
        .iter()
        .filter(|s| s.reason == SkipReason::SymlinkEscapes)
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(escaped, ["absolute", "chained", "src/climb"]);
    assert!(!items.contains_key("absolute"));
}

#[test]
fn an_empty_repository_without_commits_bundles() {
    let dir = repo();
    let root = dir.path();
    let (bundle, items) = bundled(root);
    assert!(items.is_empty());
    assert_eq!(bundle.manifest.base_commit, None);
    assert_eq!(bundle.manifest.branch.as_deref(), Some("main"));
    write(root, "first.rs", "x");
    let (bundle, items) = bundled(root);
    assert_eq!(names(&items), ["first.rs"]);
    assert_eq!(bundle.manifest.untracked_files, ["first.rs"]);
    assert_eq!(bundle.manifest.base_commit, None);
}

#[test]
fn the_same_tree_gives_the_same_sha() {
    let fill = |root: &Path| {
        write(root, "a.txt", "alpha");
        write(root, "dir/b.txt", &"beta\n".repeat(400_000));
        std::fs::set_permissions(root.join("a.txt"), PermissionsExt::from_mode(0o600)).unwrap();
    };
    let (one, two) = (repo(), repo());
    fill(one.path());
    commit_all(one.path());
    fill(two.path());
    let single = Options {
        threads: Some(1),
        ..Options::default()
    };
    let many = Options {
        threads: Some(8),
        ..Options::default()
    };
    let (a, gz) = bundle_of(one.path(), &single);
    let (b, _) = bundle_of(two.path(), &many);
    let (c, _) = bundle_of(one.path(), &many);
    assert_eq!(a.sha256, b.sha256);
    assert_eq!(a.sha256, c.sha256);
    assert_eq!(a.sha256.len(), 64);
    assert_eq!(a.manifest.bytes, gz.len() as u64);
    let level6 = Options {
        level: 6,
        ..Options::default()
    };
    assert_ne!(bundle_of(one.path(), &level6).0.sha256, a.sha256);
}

#[test]
fn outside_git_gitignore_still_applies() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(root, ".gitignore", "build/\n");
    write(root, "build/out.o", "obj");
    write(root, "main.c", "int main;");
    let (bundle, items) = bundled(root);
    assert_eq!(names(&items), [".gitignore", "main.c"]);
    assert_eq!(bundle.manifest.base_commit, None);
    assert_eq!(bundle.manifest.branch, None);
    assert!(bundle.manifest.untracked_files.is_empty());
}

#[test]
fn git_internals_are_excluded_and_hidden_files_included() {
    let dir = repo();
    let root = dir.path();
    write(root, ".github/workflows/ci.yml", "on: push");
    write(root, ".hidden", "h");
    write(root, "vendor/lib/.git", "gitdir: ../../.git/modules/lib");
    write(root, "vendor/lib/x.c", "x");
    commit_all(root);
    let (_, items) = bundled(root);
    assert_eq!(
        names(&items),
        [".github/workflows/ci.yml", ".hidden", "vendor/lib/x.c"]
    );
}

#[test]
fn tracked_files_stay_even_when_ignored_later() {
    let dir = repo();
    let root = dir.path();
    write(root, "generated/schema.json", "{}");
    commit_all(root);
    write(root, ".gitignore", "generated/\n");
    let (_, items) = bundled(root);
    assert_eq!(names(&items), [".gitignore", "generated/schema.json"]);
}

#[test]
fn a_subdirectory_bundles_the_whole_repository() {
    let dir = repo();
    let root = dir.path();
    write(root, "top.txt", "t");
    write(root, "sub/inner.txt", "i");
    let (bundle, items) = bundled(&root.join("sub"));
    assert_eq!(names(&items), ["sub/inner.txt", "top.txt"]);
    assert_eq!(bundle.root, root.canonicalize().unwrap());
}

#[test]
fn executable_bits_and_special_files() {
    let dir = repo();
    let root = dir.path();
    write(root, "run.sh", "#!/bin/sh");
    std::fs::set_permissions(root.join("run.sh"), PermissionsExt::from_mode(0o775)).unwrap();
    let fifo = Command::new("mkfifo")
        .arg(root.join("pipe"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let (bundle, items) = bundled(root);
    assert_eq!(items["run.sh"], Item::File(b"#!/bin/sh".to_vec(), 0o755));
    assert_eq!(bundle.skipped.len(), 1);
    assert_eq!(bundle.skipped[0].reason, SkipReason::SpecialFile);
}

#[test]
fn the_output_file_is_never_bundled() {
    let dir = repo();
    let root = dir.path().canonicalize().unwrap();
    write(&root, "a.txt", "a");
    write(&root, "bundle.tar.gz", "stale");
    let options = Options {
        exclude: vec![root.join("bundle.tar.gz")],
        ..Options::default()
    };
    let (_, gz) = bundle_of(&root, &options);
    assert_eq!(names(&items(&gz)), ["a.txt"]);
}

#[test]
fn system_tar_extracts_a_multi_member_bundle() {
    let dir = repo();
    let root = dir.path();
    let big: String = (0..700_000u32)
        .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
        .collect();
    write(root, "big.txt", &big.repeat(5));
    for i in 0..300 {
        write(root, &format!("many/{i:03}.txt"), &format!("file {i}\n"));
    }
    let long = format!("{}name.txt", "long-directory-name/".repeat(8));
    write(root, &long, "deep");
    let (_, gz) = bundle_of(root, &Options::default());
    let out = TempDir::new().unwrap();
    let archive = out.path().join("b.tar.gz");
    std::fs::write(&archive, &gz).unwrap();
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&archive)
        .arg("-C")
        .arg(out.path())
        .status();
    assert!(status.unwrap().success());
    for rel in ["big.txt", "many/000.txt", "many/299.txt", long.as_str()] {
        let original = std::fs::read(root.join(rel)).unwrap();
        assert_eq!(
            std::fs::read(out.path().join(rel)).unwrap(),
            original,
            "{rel}"
        );
    }
    assert_eq!(items(&gz).len(), 302);
}

/// zstd holds the very tar stream gzip does, is as deterministic across thread counts, and
/// has its own id (the sha256 of other bytes).
#[test]
fn zstd_bundles_hold_the_same_tar_deterministically() {
    let root = repo();
    write(root.path(), "a.txt", "alpha");
    write(root.path(), "dir/b.txt", &"beta\n".repeat(400_000));
    commit_all(root.path());
    let zstd = |threads| Options {
        codec: Codec::Zstd,
        level: Codec::Zstd.default_level(),
        threads: Some(threads),
        ..Options::default()
    };
    let (gz_bundle, gz) = bundle_of(root.path(), &Options::default());
    let (one, zst) = bundle_of(root.path(), &zstd(1));
    let (many, _) = bundle_of(root.path(), &zstd(8));
    assert_eq!(one.sha256, many.sha256, "deterministic");
    assert_ne!(one.sha256, gz_bundle.sha256);
    assert_eq!(one.encoding, Codec::Zstd);
    assert_eq!(one.manifest.bytes, zst.len() as u64);
    assert!(zst.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]));
    let mut gz_tar = Vec::new();
    MultiGzDecoder::new(gz.as_slice())
        .read_to_end(&mut gz_tar)
        .unwrap();
    let zst_tar = zstd::decode_all(zst.as_slice()).unwrap();
    assert!(zst_tar == gz_tar, "the same tar inside");
    let bad = Options {
        codec: Codec::Zstd,
        level: 20,
        ..Options::default()
    };
    assert!(bundle::create(root.path(), &bad, Vec::new()).is_err());
}
