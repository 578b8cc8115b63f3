//! Incremental teleport with the real client and server: the first launch sends the tree's
//! manifest and every content; after one file is edited, the second sends a change to that
//! manifest and that file's bytes alone. The tree the server built is byte-identical (modes
//! and symlinks included) to the one a whole bundle of the same state unpacks to, the session
//! plans over it, and its archive reaches the blob store.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use ultraplan_tests::fake_models::{Reply, Script};
use ultraplan_tests::harness::plan_call;

use super::poller::{Terminal, server_with, text};

fn script() -> Script {
    Script::from_fn(|_| Reply::exit_plan_mode("# Plan\n1. Keep the tree"))
}

const LAUNCH: [&str; 5] = [
    "launch",
    "--yes",
    "--json",
    "--no-watch",
    "ultraplan tidy up",
];

/// A repository with a large incompressible file, an executable and a symlink.
fn populate(term: &Terminal) {
    let mut noise = std::fs::File::create(term.repo.join("data.bin")).expect("create");
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..(256 * 1024) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        noise.write_all(&state.to_le_bytes()).expect("write");
    }
    for i in 0..40 {
        let path = term.repo.join(format!("src/mod{i}.rs"));
        std::fs::write(path, format!("pub fn f{i}() -> u32 {{ {i} }}\n")).expect("write");
    }
    let script = term.repo.join("run.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::symlink("auth.rs", term.repo.join("src/login.rs")).expect("symlink");
    term.commit_all("tree");
}

/// The bundle id and the client's own account of what it sent.
fn launched(out: &Output) -> (String, String, Sent) {
    assert!(out.status.success(), "{}", text(out));
    let session: Value = serde_json::from_slice(&out.stdout).expect("session json");
    let id = session["id"].as_str().expect("id").to_owned();
    let bundle = session["bundle_id"].as_str().expect("bundle_id").to_owned();
    (
        id,
        bundle,
        Sent::from_log(&String::from_utf8_lossy(&out.stderr)),
    )
}

#[derive(Debug, Default)]
struct Sent {
    manifest_bytes: u64,
    contents_bytes: u64,
    delta: bool,
}

impl Sent {
    fn from_log(log: &str) -> Self {
        let log = without_colours(log);
        let line = log
            .lines()
            .find(|l| l.contains("incremental bundle sent"))
            .unwrap_or_else(|| panic!("no incremental bundle in the log:\n{log}"));
        let field = |name: &str| {
            let at = line.find(&format!("{name}=")).expect(name) + name.len() + 1;
            line[at..]
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_owned()
        };
        Sent {
            manifest_bytes: field("manifest_bytes").parse().expect("number"),
            contents_bytes: field("contents_bytes").parse().expect("number"),
            delta: field("delta") == "true",
        }
    }
}

/// `text` without ANSI colour sequences (`ESC [ … m`).
fn without_colours(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every path under `root` with its mode and bytes (a symlink: its target).
fn tree(root: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir").flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .expect("under")
                .display()
                .to_string();
            let meta = std::fs::symlink_metadata(&path).expect("lstat");
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).expect("readlink");
                out.insert(rel, (0, target.display().to_string().into_bytes()));
            } else if meta.is_dir() {
                out.insert(rel, (mode, Vec::new()));
                pending.push(path);
            } else {
                out.insert(rel, (mode, std::fs::read(&path).expect("read")));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_launch_after_one_edit_sends_only_that_file() {
    let (_fake, server) = server_with(script()).await;
    let (_, eligibility) = server.get("/v1/eligibility").await.expect("eligibility");
    assert_eq!(eligibility["incremental_bundles"], json!(true));
    let term = Terminal::new(&server.base_url, &server.token);
    populate(&term);

    let (_, first_bundle, first) = launched(&term.run(&LAUNCH));
    assert!(!first.delta, "{first:?}");
    assert!(
        first.contents_bytes > 2_000_000,
        "every content went: {first:?}"
    );

    let edited = term.repo.join("src/mod7.rs");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&edited)
        .expect("open");
    file.write_all(b"// edited\n").expect("edit");
    drop(file);
    std::fs::write(term.repo.join("notes.md"), "untracked\n").expect("write");
    let (session, bundle, second) = launched(&term.run(&LAUNCH));
    assert_ne!(bundle, first_bundle);
    assert!(second.delta, "{second:?}");
    // git status ran while the requests were out: the session still says what is uncommitted.
    let (_, resource) = server
        .get(&format!("/v1/sessions/{session}"))
        .await
        .expect("session");
    let manifest = &resource["session_context"]["manifest"];
    assert_eq!(
        (&manifest["dirty_files"], &manifest["untracked_files"]),
        (&json!(["src/mod7.rs"]), &json!(["notes.md"])),
        "{manifest}"
    );
    let sent = second.manifest_bytes + second.contents_bytes;
    let whole = first.manifest_bytes + first.contents_bytes;
    assert!(
        sent * 100 <= whole,
        "sent {sent} B of {whole} B: {second:?}"
    );

    // The same state as a whole bundle unpacks to the very same tree.
    let (_, whole_bundle, _) = {
        let out = term.run_whole(&LAUNCH);
        assert!(out.status.success(), "{}", text(&out));
        let session: Value = serde_json::from_slice(&out.stdout).expect("json");
        let id = session["bundle_id"].as_str().expect("bundle_id").to_owned();
        (String::new(), id, ())
    };
    assert_ne!(
        whole_bundle, bundle,
        "another id: the whole bundle is named by its bytes"
    );
    // The tree's files are linked, and its archive stored, after the answer.
    let blob = server
        .data_dir
        .join(format!("blobs/bundles/{bundle}.tar.zst"));
    for _ in 0..200 {
        if blob.is_file() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        blob.is_file(),
        "the archive reaches the blob store: {}",
        blob.display()
    );
    let bundles = server.data_dir.join("bundles");
    let built = tree(&bundles.join(&bundle));
    assert_eq!(built, tree(&bundles.join(&whole_bundle)), "trees differ");
    assert!(built["src/mod7.rs"].1.ends_with(b"// edited\n"));
    assert_eq!(built["run.sh"].0, 0o755);
    assert_eq!(built["src/login.rs"].1, b"auth.rs");

    let mut seen = Vec::new();
    server
        .wait_for(&session, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan over the materialised bundle");
}
