//! Well-formed bundles: what lands on disk, multi-member gzip and multi-frame zstd, idempotent
//! and racing uploads.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::super::{
    BundleEncoding, BundleLimits, archive_path, bundle_dir, bundle_exists, ingest_bundle,
    is_valid_sha256,
};
use super::support::{Env, Tar, gz, gz_members, sha, walk, zst, zst_frames};

const LONG_DIR: &str =
    "a-directory-name-long-enough-that-the-whole-path-needs-a-gnu-long-name-entry-to-be-stored";

fn repo_tar() -> Vec<u8> {
    Tar::new()
        .pax(
            true,
            &[("comment", b"0123456789abcdef0123456789abcdef01234567")],
        )
        .dir("./")
        .dir("src/")
        .file("src/main.rs", b"fn main() {}\n")
        .file("src/deep/nested/mod.rs", b"// nested\n")
        .file_mode("bin/run.sh", b"#!/bin/sh\necho hi\n", 0o755)
        .file_mode("setuid", b"s", 0o4777)
        .file_mode("private", b"p", 0o600)
        .raw(tar::EntryType::Directory, b"locked/", b"", 0o000, b"")
        .file("locked/inner.txt", b"inner")
        .file("./dotted/file.txt", b"dotted")
        .symlink("link_to_main", "src/main.rs")
        .symlink("src/deep/up", "../main.rs")
        .symlink("src/deep/root", "../..")
        .symlink("dangling", "not/there/yet")
        .symlink("via_chain", "src/deep/root/link_to_main")
        .symlink("long_link", &format!("{LONG_DIR}/{LONG_DIR}/file.txt"))
        .hardlink("src/main_copy.rs", "src/main.rs")
        .file(&format!("{LONG_DIR}/{LONG_DIR}/file.txt"), b"long")
        .pax(false, &[("path", "pax/named/\u{e9}t\u{e9}.txt".as_bytes())])
        .file("ignored-name", b"pax")
        .finish()
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn well_formed_bundle_is_extracted_faithfully() {
    let cases = [
        (gz_members(&repo_tar(), 2), BundleEncoding::Gzip),
        (zst_frames(&repo_tar(), 3), BundleEncoding::Zstd),
    ];
    for (upload, encoding) in cases {
        extracted_faithfully(&upload, encoding);
    }
}

fn extracted_faithfully(upload: &[u8], encoding: BundleEncoding) {
    let env = Env::new();
    let digest = sha(upload);
    let stats = env.ingest(upload).unwrap();
    assert_eq!(stats.sha256, digest);
    assert_eq!(stats.encoding, encoding);
    let archive = archive_path(&env.store, &digest);
    assert_eq!(
        archive.file_name().unwrap().to_str().unwrap(),
        format!("{digest}.{}", encoding.extension())
    );
    assert_eq!(stats.archive_bytes, upload.len() as u64);
    // 9 files + 6 symlinks + 1 hard link.
    assert_eq!(stats.files, 16);
    assert_eq!(stats.unpacked_bytes, 13 + 10 + 18 + 1 + 1 + 5 + 6 + 4 + 3);

    let root = bundle_dir(&env.store, &digest);
    assert!(bundle_exists(&env.store, &digest));
    assert_eq!(fs::read(archive_path(&env.store, &digest)).unwrap(), upload);
    let store_entries: BTreeSet<PathBuf> = fs::read_dir(&env.store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let want = BTreeSet::from([root.clone(), archive_path(&env.store, &digest)]);
    assert_eq!(store_entries, want, "no staging left");

    let read = |p: &str| fs::read_to_string(root.join(p)).unwrap();
    assert_eq!(read("src/main.rs"), "fn main() {}\n");
    assert_eq!(read("src/deep/nested/mod.rs"), "// nested\n");
    assert_eq!(read("dotted/file.txt"), "dotted");
    assert_eq!(read(&format!("{LONG_DIR}/{LONG_DIR}/file.txt")), "long");
    assert_eq!(read("pax/named/\u{e9}t\u{e9}.txt"), "pax");
    assert!(!root.join("ignored-name").exists());
    assert!(!root.join("pax_global_header").exists());

    // Modes: 0644/0755 only, never setuid, directories always traversable.
    assert_eq!(mode(&root.join("src/main.rs")), 0o644);
    assert_eq!(mode(&root.join("bin/run.sh")), 0o755);
    assert_eq!(mode(&root.join("setuid")), 0o755);
    assert_eq!(mode(&root.join("private")), 0o644);
    for dir in [
        "src",
        "src/deep",
        "src/deep/nested",
        "bin",
        "locked",
        "pax/named",
    ] {
        assert_eq!(mode(&root.join(dir)), 0o755, "{dir}");
    }
    assert_eq!(read("locked/inner.txt"), "inner");

    // Links stay links, and stay inside.
    assert_eq!(
        fs::read_link(root.join("link_to_main")).unwrap(),
        Path::new("src/main.rs")
    );
    assert_eq!(read("link_to_main"), "fn main() {}\n");
    assert_eq!(read("src/deep/up"), "fn main() {}\n");
    assert_eq!(read("src/deep/root/src/main.rs"), "fn main() {}\n");
    assert_eq!(read("via_chain"), "fn main() {}\n");
    assert_eq!(read("long_link"), "long");
    assert!(
        fs::symlink_metadata(root.join("dangling"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let ino = |p: &str| fs::metadata(root.join(p)).unwrap().ino();
    assert_eq!(ino("src/main_copy.rs"), ino("src/main.rs"));

    // Everything is under the store.
    let outside: Vec<_> = walk(env.tmp.path())
        .into_iter()
        .filter(|p| !p.starts_with(&env.store) && !p.starts_with(env.tmp.path().join("outside")))
        .collect();
    assert_eq!(outside, Vec::<PathBuf>::new());
}

#[test]
fn reingesting_the_same_bundle_is_idempotent() {
    let env = Env::new();
    let upload = gz(&repo_tar());
    let digest = sha(&upload);
    let first = env.ingest(&upload).unwrap();
    let before = walk(&env.store);
    let second = env.ingest(&upload).unwrap();
    assert_eq!(first, second);
    assert_eq!(
        walk(&env.store),
        before,
        "the existing copy is kept untouched"
    );
    assert!(bundle_exists(&env.store, &digest));
}

#[test]
fn a_missing_archive_is_restored_by_a_reupload() {
    let env = Env::new();
    let upload = gz(&repo_tar());
    let digest = sha(&upload);
    env.ingest(&upload).unwrap();
    fs::remove_file(archive_path(&env.store, &digest)).unwrap();
    assert!(!bundle_exists(&env.store, &digest));
    env.ingest(&upload).unwrap();
    assert!(bundle_exists(&env.store, &digest));
    assert_eq!(fs::read(archive_path(&env.store, &digest)).unwrap(), upload);
}

#[test]
fn concurrent_uploads_of_one_bundle_all_succeed() {
    let env = Env::new();
    let upload = gz(&repo_tar());
    let digest = sha(&upload);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    ingest_bundle(
                        upload.as_slice(),
                        &digest,
                        &env.store,
                        &BundleLimits::default(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for result in results {
        assert_eq!(result.unwrap().sha256, digest);
    }
    let names: BTreeSet<_> = fs::read_dir(&env.store)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([digest.clone(), format!("{digest}.tar.gz")])
    );
    assert_eq!(
        fs::read_to_string(bundle_dir(&env.store, &digest).join("src/main.rs")).unwrap(),
        "fn main() {}\n"
    );
}

#[test]
fn empty_tar_is_an_empty_bundle() {
    for upload in [gz(&Tar::new().finish()), zst(&Tar::new().finish())] {
        let env = Env::new();
        let stats = env.ingest(&upload).unwrap();
        assert_eq!((stats.files, stats.unpacked_bytes), (0, 0));
        assert!(bundle_exists(&env.store, &stats.sha256));
    }
}

#[test]
fn helpers() {
    let digest = sha(b"x");
    assert!(is_valid_sha256(&digest));
    assert!(!is_valid_sha256(&digest.to_uppercase()));
    assert!(!is_valid_sha256(&digest[1..]));
    assert!(!is_valid_sha256(&format!("{}g", &digest[1..])));
    let env = Env::new();
    assert!(!bundle_exists(&env.store, &digest));
    assert!(!bundle_exists(&env.store, ".."));
}
