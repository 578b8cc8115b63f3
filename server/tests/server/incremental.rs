//! Incremental bundles over HTTP: a manifest, then only the contents the caller's store
//! lacks; a delta against an earlier manifest; the tree's archive in the blob store, from
//! which another replica's cache is rebuilt. Every hostile manifest and contents upload is
//! refused with the codes a bundle upload gets, and leaves nothing behind.

use serde_json::{Value, json};

use crate::support::{Backend, TestServer, both, create_body, entries, head};

fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

fn file(path: &str, bytes: &[u8]) -> Value {
    json!({"path": path, "mode": 0o644, "size": bytes.len(), "blake3": digest(bytes)})
}

fn link(path: &str, target: &str) -> Value {
    json!({"path": path, "target": target})
}

/// A zstd'd tar of `(name, bytes)` entries, names written raw.
fn contents(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_cksum();
        builder.append(&header, *bytes).expect("append");
    }
    zstd::encode_all(&builder.into_inner().expect("tar")[..], 3).expect("zstd")
}

fn by_digest<'a>(items: &[&'a [u8]]) -> Vec<(String, &'a [u8])> {
    items.iter().map(|b| (digest(b), *b)).collect()
}

async fn put_contents(server: &TestServer, token: &str, id: &str, body: Vec<u8>) -> (u16, Value) {
    let r = server
        .http
        .put(server.url(&format!("/v1/manifests/{id}/contents")))
        .bearer_auth(token)
        .header("content-type", "application/zstd")
        .body(body)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// POST the manifest, PUT what is missing; the bundle id.
async fn send_tree(server: &TestServer, token: &str, manifest: Value, items: &[&[u8]]) -> String {
    let (status, answer) = server.post("/v1/manifests", token, &manifest).await;
    assert_eq!(status, 200, "{answer}");
    let id = answer["bundle_id"].as_str().expect("id").to_owned();
    let wanted: Vec<&str> = answer["missing"]
        .as_array()
        .expect("missing")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let items = by_digest(items);
    let body: Vec<(&str, &[u8])> = items
        .iter()
        .filter(|(d, _)| wanted.contains(&d.as_str()))
        .map(|(d, b)| (d.as_str(), *b))
        .collect();
    let (status, stored) = put_contents(server, token, &id, contents(&body)).await;
    assert_eq!(
        (status, stored["bundle_id"].as_str()),
        (200, Some(id.as_str())),
        "{stored}"
    );
    // Its archive is written after the answer: wait for it, so later checks see a quiet store.
    for _ in 0..100 {
        if head(server, token, &id).await == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        head(server, token, &id).await,
        200,
        "the archive reaches the blob store"
    );
    id
}

/// Regular files anywhere under `dir`.
fn files_under(dir: &std::path::Path) -> usize {
    let Ok(read) = std::fs::read_dir(dir) else {
        return 0;
    };
    read.flatten()
        .map(|e| {
            if e.path().is_dir() {
                files_under(&e.path())
            } else {
                1
            }
        })
        .sum()
}

#[tokio::test]
async fn a_manifest_then_a_delta_send_only_what_is_missing() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let (status, eligibility) = server.get("/v1/eligibility", &token).await;
    assert_eq!(
        (status, &eligibility["incremental_bundles"]),
        (200, &json!(true))
    );
    let (main, lib) = (
        b"fn main() {}\n".as_slice(),
        b"pub fn lib() {}\n".as_slice(),
    );
    let first = json!({"entries": [file("src/main.rs", main), file("src/lib.rs", lib), link("src/alias.rs", "lib.rs")]});
    let (_, answer) = server.post("/v1/manifests", &token, &first).await;
    assert_eq!(
        answer["missing"].as_array().map(Vec::len),
        Some(2),
        "{answer}"
    );
    let id = send_tree(&server, &token, first, &[main, lib]).await;
    let (status, session) = server
        .post("/v1/sessions", &token, &create_body(&id, "plan"))
        .await;
    assert_eq!(
        status, 201,
        "a materialised bundle starts a session: {session}"
    );

    // A delta names its base; only the edited file is missing; the same tree again is held.
    let edited = b"fn main() { run() }\n".as_slice();
    let delta =
        json!({"base": id, "entries": [file("src/main.rs", edited)], "removed": ["src/alias.rs"]});
    let (_, answer) = server.post("/v1/manifests", &token, &delta).await;
    assert_eq!(answer["missing"], json!([digest(edited)]), "{answer}");
    let second = send_tree(&server, &token, delta.clone(), &[edited]).await;
    let root = server.state.core.config.bundles_dir();
    assert_eq!(
        std::fs::read(root.join(&second).join("src/main.rs")).expect("built"),
        edited
    );
    assert!(!root.join(&second).join("src/alias.rs").exists());
    let (_, again) = server.post("/v1/manifests", &token, &delta).await;
    assert_eq!(
        (&again["held"], &again["missing"]),
        (&json!(true), &json!([])),
        "{again}"
    );

    // A change touching no link, on a base whose tree is here: answered once the changed
    // contents are found, the tree laid out after. Without them it is refused, leaving nothing.
    let (lib2, tool) = (
        b"pub fn lib() { 2 }\n".as_slice(),
        b"#!/bin/sh\n".as_slice(),
    );
    let on_base = json!({"base": second, "entries": [file("src/lib.rs", lib2), file("bin/tool", tool)],
        "removed": ["src/main.rs"]});
    let (_, answer) = server.post("/v1/manifests", &token, &on_base).await;
    let third_id = answer["bundle_id"].as_str().expect("id").to_owned();
    let (status, refused) = put_contents(&server, &token, &third_id, contents(&[])).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (409, Some("missing_content")),
        "{refused}"
    );
    assert!(!root.join(&third_id).exists());
    let third = send_tree(&server, &token, on_base, &[lib2, tool]).await;
    assert_eq!(third, third_id);
    let read = |p: &str| std::fs::read(root.join(&third).join(p)).ok();
    assert_eq!(
        (
            read("src/lib.rs").as_deref(),
            read("bin/tool").as_deref(),
            read("src/main.rs")
        ),
        (Some(lib2), Some(tool), None)
    );
    let (status, session) = server
        .post("/v1/sessions", &token, &create_body(&third, "plan"))
        .await;
    assert_eq!(status, 201, "{session}");

    // A replica without the tree rebuilds it from the blob store, checked against the tree's id.
    std::fs::remove_dir_all(root.join(&second)).expect("drop the cache");
    let blobs = server.state.core.config.blobs().expect("blobs");
    let limits = server.state.core.config.bundle_limits.clone();
    let rebuilt = ultraplan_server::blobs::ensure_bundle_tree(&blobs, &root, &second, &limits)
        .await
        .expect("rebuilt");
    assert_eq!(
        std::fs::read(rebuilt.join("src/main.rs")).expect("read"),
        edited
    );
}

#[tokio::test]
async fn hostile_manifests_are_refused_and_leave_nothing_behind() {
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.bundle_limits.max_files = 8;
        c.bundle_limits.max_unpacked_bytes = 1024;
    })
    .await;
    let a = server.user("a").await;
    let b = server.user("b").await;
    let ok = file("ok.txt", b"ok");
    let alice = send_tree(&server, &a, json!({"entries": [ok.clone()]}), &[b"ok"]).await;
    let root = server.state.core.config.bundles_dir();
    let before = (
        entries(&root),
        files_under(&root.join(".manifests")),
        files_under(&root.join(".content")),
    );
    let many: Vec<Value> = (0..9).map(|i| file(&format!("f{i}"), &[i])).collect();
    let cases: Vec<(&str, Value, u16, &str)> = vec![
        (
            "dot-dot",
            json!({"entries": [file("../x", b"x")]}),
            400,
            "path_traversal",
        ),
        (
            "absolute",
            json!({"entries": [file("/etc/passwd", b"x")]}),
            400,
            "absolute_path",
        ),
        (
            ".git",
            json!({"entries": [file("a/.git/config", b"x")]}),
            400,
            "invalid_path",
        ),
        (
            "absolute link",
            json!({"entries": [link("l", "/etc")]}),
            400,
            "link_escape",
        ),
        (
            "link climbing out",
            json!({"entries": [link("d/l", "../../x")]}),
            400,
            "link_escape",
        ),
        (
            "too many files",
            json!({"entries": many}),
            400,
            "too_many_files",
        ),
        (
            "too many bytes",
            json!({"entries": [file("big", &[0; 2000])]}),
            413,
            "too_large",
        ),
        (
            "a path under a file",
            json!({"entries": [ok.clone(), file("ok.txt/x", b"x")]}),
            400,
            "path_conflict",
        ),
        (
            "malformed entry",
            json!({"entries": [{"path": "a", "size": 1}]}),
            400,
            "invalid_manifest",
        ),
        (
            "not a manifest",
            json!({"entries": 7}),
            400,
            "invalid_manifest",
        ),
        (
            "unknown base",
            json!({"base": "1".repeat(64), "entries": []}),
            409,
            "unknown_base",
        ),
        (
            "another owner's base",
            json!({"base": alice, "entries": []}),
            409,
            "unknown_base",
        ),
    ];
    for (name, manifest, status, code) in cases {
        let (got, body) = server.post("/v1/manifests", &b, &manifest).await;
        assert_eq!(
            (got, body["error"]["code"].as_str()),
            (status, Some(code)),
            "{name}: {body}"
        );
    }
    let after = (
        entries(&root),
        files_under(&root.join(".manifests")),
        files_under(&root.join(".content")),
    );
    assert_eq!(after, before, "nothing of a refused manifest is kept");
}

#[tokio::test]
async fn hostile_contents_are_refused_and_leave_nothing_behind() {
    let server = TestServer::start(Backend::Sqlite).await;
    let a = server.user("a").await;
    let b = server.user("b").await;
    let secret = b"a's secret".as_slice();
    send_tree(
        &server,
        &a,
        json!({"entries": [file("s", secret)]}),
        &[secret],
    )
    .await;
    let root = server.state.core.config.bundles_dir();
    let content_before = files_under(&root.join(".content"));
    let bundles_before: Vec<String> = entries(&root);

    // b names a's content: to b it is missing, and naming it is no way to get it.
    let mine = b"b's own".as_slice();
    let manifest = json!({"entries": [file("s", secret), file("t", mine)]});
    let (status, answer) = server.post("/v1/manifests", &b, &manifest).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["missing"].as_array().map(Vec::len),
        Some(2),
        "{answer}"
    );
    let id = answer["bundle_id"].as_str().expect("id").to_owned();
    let (ds, dm) = (digest(secret), digest(mine));
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "without a's content",
            contents(&[(&dm, mine)]),
            409,
            "missing_content",
        ),
        (
            "a guess at its bytes",
            contents(&[(&ds, b"b's guess!"), (&dm, mine)]),
            400,
            "content_hash_mismatch",
        ),
        (
            "not asked for",
            contents(&[(&digest(b"zz"), b"zz")]),
            400,
            "unexpected_content",
        ),
        (
            "a path for a name",
            contents(&[("../../etc/passwd", mine)]),
            400,
            "unexpected_content",
        ),
        (
            "not an archive",
            b"garbage".to_vec(),
            400,
            "malformed_archive",
        ),
    ];
    for (name, body, status, code) in cases {
        let (got, answer) = put_contents(&server, &b, &id, body).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str()),
            (status, Some(code)),
            "{name}: {answer}"
        );
    }
    let (status, answer) = put_contents(&server, &a, &id, contents(&[])).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (404, Some("unknown_manifest")),
        "{answer}"
    );

    // Links that are inside one by one but escape together, found on the real tree.
    let f = b"f".as_slice();
    let escaping =
        json!({"entries": [link("a/b/c", "../.."), link("d", "a/b/c/.."), file("a/f", f)]});
    let (_, answer) = server.post("/v1/manifests", &b, &escaping).await;
    let escaping_id = answer["bundle_id"].as_str().expect("id").to_owned();
    let (status, answer) =
        put_contents(&server, &b, &escaping_id, contents(&[(&digest(f), f)])).await;
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (400, Some("link_escape")),
        "{answer}"
    );

    assert_eq!(
        files_under(&root.join(".content")),
        content_before,
        "no content was kept"
    );
    let left: Vec<String> = entries(&root)
        .into_iter()
        .filter(|e| !bundles_before.contains(e))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(entries(&root.join(".staging")).is_empty());
}

both!(
    manifests_over_the_quota_are_refused,
    |backend: Backend| async move {
        let server =
            TestServer::start_with(backend, |c| c.retention.bundle_quota_bytes = 64 * 1024).await;
        let a = server.user("a").await;
        let big = vec![7_u8; 100 * 1024];
        let (status, body) = server
            .post(
                "/v1/manifests",
                &a,
                &json!({"entries": [file("big", &big)]}),
            )
            .await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (413, Some("quota_exceeded")),
            "{body}"
        );
        let root = server.state.core.config.bundles_dir();
        assert_eq!(files_under(&root.join(".manifests")), 0);
    }
);
