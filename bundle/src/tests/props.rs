//! Property test: random archives (hostile paths, links, duplicates, unicode, long names)
//! ingested, and checked against an independent oracle, GNU `tar` extracting the same tar into
//! a scratch dir.
//!
//! - accepted: every path in the bundle is inside it (every symlink that resolves resolves
//!   inside), and the tree equals the oracle's: the same paths, kinds, file bytes, exec bits
//!   and symlink targets;
//! - refused: nothing is left in the store (staging included) or anywhere around it;
//! - never a panic.
//!
//! `PROPTEST_CASES=N` runs more cases (see fuzz/README.md).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use tar::EntryType;

use super::super::bundle_dir;
use super::support::{CODECS, Codec, Env, Tar, walk};

/// Cases per run: `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

#[derive(Debug, Clone)]
enum Kind {
    File(Vec<u8>, u32),
    Dir,
    Symlink(String),
    /// Hard link to the path of entry `n` (modulo the entries before it), or to a free path.
    HardLink(Result<usize, String>),
}

#[derive(Debug, Clone)]
struct Entry {
    path: String,
    kind: Kind,
}

/// Path components, weighted towards ordinary names so that a fair share of archives pass.
fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        40 => prop::sample::select(vec!["a", "b", "c", "d", "e", "f"]).prop_map(str::to_owned),
        6 => prop::sample::select(vec!["é", "日本", "x y", "a\\b", "-", "..a", "Ω.txt"])
            .prop_map(str::to_owned),
        1 => Just("..".to_owned()),
        1 => Just(".".to_owned()),
        1 => Just(String::new()),
        1 => prop::sample::select(vec![".git", ".GIT", ".gitignore"]).prop_map(str::to_owned),
        1 => prop::sample::select(vec![60usize, 120, 254, 256])
            .prop_map(|n| "n".repeat(n)),
    ]
}

fn path() -> impl Strategy<Value = String> {
    (
        prop_oneof![12 => Just(""), 2 => Just("./"), 1 => Just("/"), 1 => Just("C:")],
        prop::collection::vec(component(), 1..4),
        prop_oneof![6 => Just(""), 1 => Just("/")],
    )
        .prop_map(|(prefix, comps, suffix)| format!("{prefix}{}{suffix}", comps.join("/")))
}

/// Symlink targets: mostly relative walks over the same names, `..` included.
fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(
            prop::sample::select(vec!["a", "b", "c", "d", "..", ".", "x"]),
            1..5,
        )
        .prop_map(|parts| parts.join("/")),
        1 => path(),
    ]
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        5 => (
            prop::collection::vec(any::<u8>(), 0..600),
            prop::sample::select(vec![0o644u32, 0o755, 0o4755, 0o600, 0o777]),
        )
            .prop_map(|(data, mode)| Kind::File(data, mode)),
        3 => Just(Kind::Dir),
        3 => target().prop_map(Kind::Symlink),
        2 => prop_oneof![
            3 => any::<usize>().prop_map(Ok),
            1 => path().prop_map(Err),
        ]
        .prop_map(Kind::HardLink),
    ]
}

fn archive() -> impl Strategy<Value = Vec<Entry>> {
    prop::collection::vec(
        (path(), kind()).prop_map(|(path, kind)| Entry { path, kind }),
        1..8,
    )
}

fn build(entries: &[Entry]) -> Vec<u8> {
    let mut tar = Tar::new();
    for (i, entry) in entries.iter().enumerate() {
        let name = entry.path.as_bytes();
        tar = match &entry.kind {
            // A regular entry named `dir/` is an old-style directory: GNU tar then ignores its
            // size field (and reads any data as the next header) while we skip the data, so
            // such an entry carries none here.
            Kind::File(_, mode) if name.ends_with(b"/") => {
                tar.raw(EntryType::Regular, name, b"", *mode, b"")
            }
            Kind::File(data, mode) => tar.raw(EntryType::Regular, name, b"", *mode, data),
            Kind::Dir => tar.raw(EntryType::Directory, name, b"", 0o755, b""),
            Kind::Symlink(target) => tar.symlink(&entry.path, target),
            Kind::HardLink(target) => {
                let target = match target {
                    Ok(n) if i > 0 => entries[n % i].path.clone(),
                    Ok(_) => "a".to_owned(),
                    Err(free) => free.clone(),
                };
                tar.hardlink(&entry.path, &target)
            }
        };
    }
    tar.finish()
}

/// What a tree holds, by relative path: enough to compare two extractions.
#[derive(Debug, PartialEq, Eq)]
enum Node {
    Dir,
    File { data: Vec<u8>, exec: bool },
    Symlink(PathBuf),
}

fn snapshot(root: &Path) -> BTreeMap<PathBuf, Node> {
    walk(root)
        .into_iter()
        .map(|path| {
            let meta = fs::symlink_metadata(&path).unwrap();
            let node = if meta.file_type().is_symlink() {
                Node::Symlink(fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                Node::Dir
            } else {
                assert!(meta.is_file(), "{} is not a file", path.display());
                Node::File {
                    data: fs::read(&path).unwrap(),
                    exec: meta.permissions().mode() & 0o111 != 0,
                }
            };
            (path.strip_prefix(root).unwrap().to_path_buf(), node)
        })
        .collect()
}

/// GNU tar's extraction of `tar_bytes` into a fresh scratch dir.
fn oracle(tar_bytes: &[u8], scratch: &Path) -> Result<BTreeMap<PathBuf, Node>, TestCaseError> {
    let archive = scratch.join("archive.tar");
    fs::write(&archive, tar_bytes).unwrap();
    let out = scratch.join("out");
    fs::create_dir(&out).unwrap();
    let status = Command::new("tar")
        .args(["-x", "--no-same-owner", "-f"])
        .arg(&archive)
        .arg("-C")
        .arg(&out)
        .output()
        .expect("GNU tar runs");
    prop_assert!(
        status.status.success(),
        "GNU tar refused an archive we accepted: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    Ok(snapshot(&out))
}

/// `Ok(true)` when the archive was accepted (and matched the oracle) through every codec;
/// the codecs must agree.
fn check(entries: &[Entry]) -> Result<bool, TestCaseError> {
    let tar_bytes = build(entries);
    let mut outcomes = Vec::new();
    for codec in CODECS {
        outcomes.push(check_codec(&tar_bytes, codec)?);
    }
    prop_assert!(
        outcomes.iter().all(|&o| o == outcomes[0]),
        "codecs disagree: {outcomes:?}"
    );
    Ok(outcomes[0])
}

fn check_codec(tar_bytes: &[u8], codec: Codec) -> Result<bool, TestCaseError> {
    let env = Env::new();
    let Ok(stats) = env.ingest(&codec.compress(tar_bytes)) else {
        // Refused: nothing may be left behind (assert_untouched walks the whole temp dir).
        env.assert_untouched("refused archive");
        return Ok(false);
    };
    let root = fs::canonicalize(bundle_dir(&env.store, &stats.sha256)).unwrap();
    for path in walk(&root) {
        let meta = fs::symlink_metadata(&path).unwrap();
        prop_assert!(path.starts_with(&root));
        if meta.file_type().is_symlink()
            && let Ok(resolved) = fs::canonicalize(&path)
        {
            prop_assert!(
                resolved.starts_with(&root),
                "{} resolves to {} outside the bundle",
                path.display(),
                resolved.display()
            );
        }
    }
    let canary = env.tmp.path().join("outside/canary.txt");
    prop_assert_eq!(fs::read(&canary).unwrap(), b"canary".to_vec());
    let scratch = tempfile::tempdir().unwrap();
    let theirs = oracle(tar_bytes, scratch.path())?;
    let ours = snapshot(&root);
    prop_assert_eq!(ours, theirs, "accepted tree differs from GNU tar's");
    Ok(true)
}

#[test]
fn random_archives_match_gnu_tar_or_leave_nothing() {
    let config = config(192);
    let cases = config.cases;
    let accepted = Cell::new(0u32);
    let mut runner = TestRunner::new(config);
    let result = runner.run(&archive(), |entries| {
        if check(&entries)? {
            accepted.set(accepted.get() + 1);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Both outcomes must be exercised for the property to mean anything.
    let accepted = accepted.get();
    assert!(
        accepted >= cases / 10 && accepted <= cases * 9 / 10,
        "{accepted} of {cases} archives accepted"
    );
}
