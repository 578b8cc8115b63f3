//! The incremental path end to end inside the bundle store: accept a manifest, receive the
//! missing contents, build the tree; and every refusal leaves nothing behind.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use ultraplan_protocol::api::{ManifestEntry, ManifestRequest};

use super::*;
use crate::{BundleEncoding, ingest_bundle_verified};

struct Env {
    _dir: tempfile::TempDir,
    store: PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("bundles");
    Env { _dir: dir, store }
}

fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

fn file(path: &str, bytes: &[u8], mode: u32) -> ManifestEntry {
    ManifestEntry {
        path: path.to_owned(),
        mode: Some(mode),
        size: Some(bytes.len() as u64),
        blake3: Some(digest(bytes)),
        target: None,
    }
}

fn link(path: &str, target: &str) -> ManifestEntry {
    ManifestEntry {
        path: path.to_owned(),
        mode: None,
        size: None,
        blake3: None,
        target: Some(target.to_owned()),
    }
}

/// A zstd'd tar of `(name, bytes)` entries.
fn contents(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        // Written raw, so hostile names reach the server as they are.
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_cksum();
        builder.append(&header, *bytes).unwrap();
    }
    zstd::encode_all(&builder.into_inner().unwrap()[..], 3).unwrap()
}

fn whole(entries: Vec<ManifestEntry>) -> ManifestRequest {
    ManifestRequest {
        base: None,
        entries,
        removed: Vec::new(),
    }
}

fn build(
    env: &Env,
    owner: &str,
    accepted: &Accepted,
    body: &[u8],
) -> Result<Materialised, BundleError> {
    let store = OwnerStore::new(&env.store, owner).unwrap();
    let limits = BundleLimits::default();
    ingest_contents(
        body,
        None,
        &accepted.manifest,
        &accepted.bundle_id,
        &env.store,
        &store,
        &limits,
    )
}

/// Nothing but the owners' stores and manifests is left in the bundle store.
fn leftovers(store: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(store)
        .map(|dir| {
            dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.retain(|n| n != ".manifests" && n != ".content");
    names.sort();
    names
}

#[test]
fn a_tree_is_built_from_a_manifest_and_its_contents() {
    let env = env();
    let limits = BundleLimits::default();
    let entries = vec![
        file("src/main.rs", b"fn main() {}\n", 0o644),
        file("run.sh", b"#!/bin/sh\n", 0o755),
        file("same.sh", b"fn main() {}\n", 0o755),
        link("src/alias.rs", "main.rs"),
    ];
    let accepted = accept(&env.store, "alice", whole(entries), &limits).unwrap();
    keep_manifest(&env.store, "alice", &accepted).unwrap();
    assert_eq!(accepted.missing.len(), 2, "two distinct contents");
    let body = contents(&[
        (&digest(b"fn main() {}\n"), b"fn main() {}\n"),
        (&digest(b"#!/bin/sh\n"), b"#!/bin/sh\n"),
    ]);
    let built = build(&env, "alice", &accepted, &body).unwrap();
    assert_eq!(built.files, 4);
    let tree = crate::bundle_dir(&env.store, &accepted.bundle_id);
    let on_disk = manifest_of_dir(&tree).unwrap();
    assert_eq!(
        on_disk.bundle_id(),
        accepted.bundle_id,
        "the tree is the manifest's"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| fs::metadata(tree.join(p)).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        (mode("src/main.rs"), mode("same.sh"), mode("src")),
        (0o644, 0o755, 0o755)
    );

    // Nothing is missing a second time, and the canonical archive unpacks to the same id.
    let again = accept(
        &env.store,
        "alice",
        whole(on_disk_entries(&on_disk)),
        &limits,
    )
    .unwrap();
    assert!(again.missing.is_empty());
    let archive = write_archive(&env.store, &accepted.bundle_id, &accepted.manifest).unwrap();
    let other = tempfile::tempdir().unwrap();
    let file = fs::File::open(&archive).unwrap();
    let stats = ingest_bundle_verified(
        file,
        Some(BundleEncoding::Zstd),
        &accepted.bundle_id,
        other.path(),
        &limits,
    )
    .unwrap();
    assert_eq!(stats.sha256, accepted.bundle_id);
    // An archive that is neither the id's bytes nor its tree is refused.
    let file = fs::File::open(&archive).unwrap();
    let wrong = "0".repeat(64);
    let refused = ingest_bundle_verified(file, None, &wrong, other.path(), &limits).unwrap_err();
    assert_eq!(refused.code(), "hash_mismatch");
}

fn on_disk_entries(manifest: &TreeManifest) -> Vec<ManifestEntry> {
    manifest
        .entries()
        .map(|(path, node)| match node {
            Node::File {
                executable,
                size,
                blake3,
            } => ManifestEntry {
                path: path.clone(),
                mode: Some(if *executable { 0o755 } else { 0o644 }),
                size: Some(*size),
                blake3: Some(hex::encode(blake3)),
                target: None,
            },
            Node::Symlink { target } => link(path, target),
        })
        .collect()
}

#[test]
fn a_delta_names_only_its_owners_base() {
    let env = env();
    let limits = BundleLimits::default();
    let first = accept(
        &env.store,
        "alice",
        whole(vec![file("a", b"1", 0o644)]),
        &limits,
    )
    .unwrap();
    let unkept = accept(
        &env.store,
        "alice",
        whole(vec![file("z", b"1", 0o644)]),
        &limits,
    )
    .unwrap();
    keep_manifest(&env.store, "alice", &first).unwrap();
    let delta = |base: &str| ManifestRequest {
        base: Some(base.to_owned()),
        entries: vec![file("b", b"2", 0o644)],
        removed: vec!["a".to_owned()],
    };
    let second = accept(&env.store, "alice", delta(&first.bundle_id), &limits).unwrap();
    let paths: Vec<_> = second.manifest.entries().map(|(p, _)| p.clone()).collect();
    assert_eq!(paths, ["b"]);
    let unknown = [
        ("mallory", first.bundle_id.as_str()),
        ("alice", unkept.bundle_id.as_str()),
        ("alice", &"1".repeat(64)),
        ("alice", "../x"),
    ];
    for (owner, base) in unknown {
        let refused = accept(&env.store, owner, delta(base), &limits).unwrap_err();
        assert_eq!(refused.code(), "unknown_base", "{owner} {base}");
    }
}

#[test]
fn hostile_contents_are_refused_and_leave_nothing_behind() {
    let env = env();
    let limits = BundleLimits::default();
    let secret = b"alice's secret";
    // Alice holds some content; Mallory names it in her own manifest.
    let alice = accept(
        &env.store,
        "alice",
        whole(vec![file("s", secret, 0o644)]),
        &limits,
    )
    .unwrap();
    build(
        &env,
        "alice",
        &alice,
        &contents(&[(&digest(secret), secret)]),
    )
    .unwrap();
    let before = leftovers(&env.store);
    let mallory = accept(
        &env.store,
        "mallory",
        whole(vec![file("s", secret, 0o644), file("t", b"x", 0o644)]),
        &limits,
    )
    .unwrap();
    assert_eq!(
        mallory.missing.len(),
        2,
        "another owner's content is missing to her"
    );
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "her store lacks it",
            contents(&[(&digest(b"x"), b"x")]),
            "missing_content",
        ),
        (
            "her guess at its bytes",
            contents(&[(&digest(secret), b"another secret"), (&digest(b"x"), b"x")]),
            "content_hash_mismatch",
        ),
        (
            "another size",
            contents(&[
                (&digest(secret), b"a much longer guess"),
                (&digest(b"x"), b"xx"),
            ]),
            "unexpected_content",
        ),
        (
            "same size, other bytes",
            contents(&[(&digest(b"x"), b"y")]),
            "content_hash_mismatch",
        ),
        (
            "not asked for",
            contents(&[(&digest(b"zz"), b"zz")]),
            "unexpected_content",
        ),
        (
            "a path, not a digest",
            contents(&[("../../etc/passwd", b"x")]),
            "unexpected_content",
        ),
        (
            "sent twice",
            contents(&[(&digest(b"x"), b"x"), (&digest(b"x"), b"x")]),
            "unexpected_content",
        ),
        ("not an archive", b"garbage".to_vec(), "malformed_archive"),
    ];
    for (name, body, code) in cases {
        let refused = build(&env, "mallory", &mallory, &body).unwrap_err();
        assert_eq!(refused.code(), code, "{name}: {refused}");
        assert_eq!(leftovers(&env.store), before, "{name}");
        assert!(
            !OwnerStore::new(&env.store, "mallory")
                .unwrap()
                .has(&parse_digest(&digest(b"x")).unwrap()),
            "{name}"
        );
    }
}

#[test]
fn a_link_escaping_through_the_real_tree_is_refused() {
    let env = env();
    let limits = BundleLimits::default();
    // Each link is inside lexically; together `d` resolves above the root.
    let entries = vec![
        link("a/b/c", "../.."),
        link("d", "a/b/c/.."),
        file("a/f", b"f", 0o644),
    ];
    let accepted = accept(&env.store, "alice", whole(entries), &limits).unwrap();
    let before = leftovers(&env.store);
    let refused = build(
        &env,
        "alice",
        &accepted,
        &contents(&[(&digest(b"f"), b"f")]),
    )
    .unwrap_err();
    assert_eq!(refused.code(), "link_escape", "{refused}");
    assert_eq!(leftovers(&env.store), before);
}

#[test]
fn limits_hold_for_manifests() {
    let env = env();
    let limits = BundleLimits {
        max_files: 2,
        ..BundleLimits::default()
    };
    let entries = vec![
        file("a", b"1", 0o644),
        file("b", b"2", 0o644),
        file("c", b"3", 0o644),
    ];
    let refused = accept(&env.store, "alice", whole(entries), &limits).unwrap_err();
    assert_eq!(refused.code(), "too_many_files");
    assert!(leftovers(&env.store).is_empty());
    assert!(
        !env.store.join(".manifests/alice").exists(),
        "a refused manifest is not kept"
    );
    let _ = BTreeMap::<u8, u8>::new();
}

#[test]
fn retention_keeps_linked_contents_and_fresh_manifests() {
    let env = env();
    let limits = BundleLimits::default();
    let entries = vec![file("a", b"linked", 0o644)];
    let accepted = accept(&env.store, "alice", whole(entries), &limits).unwrap();
    keep_manifest(&env.store, "alice", &accepted).unwrap();
    build(
        &env,
        "alice",
        &accepted,
        &contents(&[(&digest(b"linked"), b"linked")]),
    )
    .unwrap();
    let store = OwnerStore::new(&env.store, "alice").unwrap();
    let held = parse_digest(&digest(b"linked")).unwrap();
    // Nothing is old enough yet; with no age limit, only what no tree links goes.
    assert_eq!(sweep(&env.store, TTL), 0);
    assert_eq!(
        sweep(&env.store, std::time::Duration::ZERO),
        1,
        "the manifest"
    );
    assert!(store.has(&held));
    fs::remove_dir_all(crate::bundle_dir(&env.store, &accepted.bundle_id)).unwrap();
    assert_eq!(
        sweep(&env.store, std::time::Duration::ZERO),
        1,
        "the content"
    );
    assert!(!store.has(&held));
}

/// A change on a base built here: answered from the changed contents alone, then laid out to
/// the same tree the whole path builds; a changed content that is nowhere is refused first.
#[test]
fn a_change_on_a_built_base_is_answered_from_its_changed_contents() {
    let env = env();
    let limits = BundleLimits::default();
    let base = accept(
        &env.store,
        "alice",
        whole(vec![
            file("src/a.rs", b"a", 0o644),
            file("src/b.rs", b"b", 0o644),
            link("src/alias.rs", "a.rs"),
        ]),
        &limits,
    )
    .unwrap();
    assert_eq!(base.on_base, None, "a whole manifest has no base");
    keep_manifest(&env.store, "alice", &base).unwrap();
    let body = contents(&[(&digest(b"a"), b"a"), (&digest(b"b"), b"b")]);
    build(&env, "alice", &base, &body).unwrap();

    let change = ManifestRequest {
        base: Some(base.bundle_id.clone()),
        entries: vec![
            file("src/a.rs", b"a2", 0o644),
            file("src/new/c.rs", b"c", 0o755),
        ],
        removed: vec!["src/b.rs".to_owned()],
    };
    let accepted = accept(&env.store, "alice", change, &limits).unwrap();
    keep_manifest(&env.store, "alice", &accepted).unwrap();
    let on_base = on_base_of(&env.store, "alice", &accepted.bundle_id).unwrap();
    assert_eq!(on_base.base, base.bundle_id);
    assert_eq!(on_base.changed, ["src/a.rs", "src/new/c.rs"]);
    let owner = OwnerStore::new(&env.store, "alice").unwrap();
    let receive = |body: &[u8]| {
        receive_contents(
            body,
            None,
            &accepted.manifest,
            &accepted.bundle_id,
            &env.store,
            &owner,
            &limits,
        )
        .unwrap()
    };

    // Without c's content the change is refused before anything is laid out.
    let partial = receive(&contents(&[(&digest(b"a2"), b"a2")]));
    let refused = partial
        .check_present(&accepted.manifest, &on_base.changed)
        .unwrap_err();
    assert_eq!(refused.code(), "missing_content");
    drop(partial);

    let incoming = receive(&contents(&[(&digest(b"a2"), b"a2"), (&digest(b"c"), b"c")]));
    incoming
        .check_present(&accepted.manifest, &on_base.changed)
        .unwrap();
    let answered = stats_of(&accepted.manifest, incoming.archive_bytes());
    let pending = Pending::Received {
        incoming,
        manifest: accepted.manifest.clone(),
        limits: limits.clone(),
    };
    let built = pending.finish(&env.store).unwrap();
    assert_eq!(built, answered, "the answer counts what the build made");
    let tree = crate::bundle_dir(&env.store, &accepted.bundle_id);
    assert_eq!(
        manifest_of_dir(&tree).unwrap().bundle_id(),
        accepted.bundle_id
    );
    assert!(
        leftovers(&env.store)
            .iter()
            .all(|n| !n.starts_with(".staging"))
    );

    // A change that adds a link has no record: it is checked whole before its answer.
    let with_link = ManifestRequest {
        base: Some(accepted.bundle_id.clone()),
        entries: vec![link("out", "../../etc")],
        removed: Vec::new(),
    };
    let refused = accept(&env.store, "alice", with_link, &limits).unwrap_err();
    assert_eq!(refused.code(), "link_escape");
    let with_link = ManifestRequest {
        base: Some(accepted.bundle_id.clone()),
        entries: vec![link("src/alias2.rs", "a.rs")],
        removed: Vec::new(),
    };
    let linked = accept(&env.store, "alice", with_link, &limits).unwrap();
    keep_manifest(&env.store, "alice", &linked).unwrap();
    assert_eq!(linked.on_base, None);
    assert_eq!(on_base_of(&env.store, "alice", &linked.bundle_id), None);
}
