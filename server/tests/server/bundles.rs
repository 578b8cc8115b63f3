//! Bundles over HTTP: upload, dedupe by hash, ownership, and hostile uploads refused whole.

use crate::support::{Backend, TestServer, entries, head, tarball};

#[tokio::test]
async fn upload_dedupe_and_ownership() {
    let server = TestServer::start(Backend::Sqlite).await;
    let a = server.user("a").await;
    let b = server.user("b").await;
    let (bytes, sha) = tarball(&[("a.txt", b"hello\n"), ("dir/b.txt", b"world\n")]);
    assert_eq!(head(&server, &a, &sha).await, 404);
    let (status, body) = server.put_bundle(&a, &sha, bytes.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["bundle_id"], sha.as_str());
    assert_eq!(body["files"], 2);
    assert_eq!(body["bytes"], bytes.len());
    assert_eq!(
        head(&server, &a, &sha).await,
        200,
        "an unchanged repo is not uploaded twice"
    );
    assert_eq!(
        head(&server, &b, &sha).await,
        404,
        "B must prove it holds the bytes"
    );
    let (status, _) = server.put_bundle(&a, &sha, bytes).await;
    assert_eq!(status, 200, "re-upload is idempotent");
    let dir = server.state.core.config.bundles_dir().join(&sha);
    assert_eq!(
        std::fs::read(dir.join("dir/b.txt")).expect("unpacked"),
        b"world\n"
    );
}

#[tokio::test]
async fn hostile_uploads_leave_nothing_behind() {
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.bundle_limits.max_archive_bytes = 64 * 1024;
    })
    .await;
    let token = server.user("a").await;
    let (bytes, sha) = tarball(&[("a.txt", b"hello\n")]);
    let wrong = "0".repeat(64);
    let (status, body) = server.put_bundle(&token, &wrong, bytes).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("hash_mismatch"))
    );
    let (status, body) = server.put_bundle(&token, "ABC", Vec::new()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_sha256"))
    );
    let (status, body) = server
        .put_bundle(&token, &sha, vec![0x1f, 0x8b, 0x08])
        .await;
    assert_eq!(status, 400, "{body}");
    let big = vec![7_u8; 100 * 1024];
    let (status, body) = server.put_bundle(&token, &sha, big).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("too_large"))
    );
    let root = server.state.core.config.bundles_dir();
    let left: Vec<String> = entries(&root)
        .into_iter()
        .filter(|e| e != ".staging")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(entries(&root.join(".staging")).is_empty());
    assert_eq!(head(&server, &token, &sha).await, 404);
}
