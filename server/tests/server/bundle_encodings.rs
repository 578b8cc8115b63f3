//! Bundle encodings over HTTP: eligibility advertises zstd and gzip, a zstd bundle is stored
//! under its own key and planned over, gzip from old clients still works, and a Content-Type
//! that contradicts the bytes is refused with nothing left behind.

use std::io::Write;

use serde_json::Value;
use sha2::{Digest, Sha256};
use ultraplan_bundle::BundleEncoding;

use crate::agents::{agent_server, is_plan, planner, wait_for};
use crate::support::{Backend, TestServer, create_body, entries, head, tarball};

/// The tar inside [`tarball`], zstd'd in two frames as the client writes it, and its sha256.
fn zstd_tarball(files: &[(&str, &[u8])]) -> (Vec<u8>, String) {
    let (gz, _) = tarball(files);
    let mut tar = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut tar)
        .expect("gunzip");
    let mut bytes = Vec::new();
    for part in tar.chunks(tar.len().div_ceil(2)) {
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).expect("zstd");
        enc.include_checksum(true).expect("checksum");
        enc.write_all(part).expect("zstd");
        bytes.extend(enc.finish().expect("zstd"));
    }
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

async fn put(
    server: &TestServer,
    token: &str,
    sha: &str,
    ct: &str,
    bytes: Vec<u8>,
) -> (u16, Value) {
    let r = server
        .http
        .put(server.url(&format!("/v1/bundles/{sha}")))
        .bearer_auth(token)
        .header("content-type", ct)
        .body(bytes)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn stored_as(server: &TestServer, sha: &str) -> Option<BundleEncoding> {
    let blobs = server.state.core.config.blobs().expect("blob store");
    blobs.find_bundle(sha).await.expect("blob store")
}

#[tokio::test]
async fn a_zstd_bundle_is_advertised_stored_and_planned_over() {
    let models = std::sync::Arc::new(planner());
    let (server, _orchestrator) = agent_server(models).await;
    let token = server.user("a").await;
    let (status, eligibility) = server.get("/v1/eligibility", &token).await;
    assert_eq!(status, 200, "{eligibility}");
    assert_eq!(
        eligibility["accepts_bundle_encodings"],
        serde_json::json!(["zstd", "gzip"])
    );

    let (bytes, sha) = zstd_tarball(&[
        ("README.md", b"# demo\n"),
        ("src/auth.rs", b"pub fn login() {}\n"),
    ]);
    assert_eq!(head(&server, &token, &sha).await, 404);
    let (status, body) = put(&server, &token, &sha, "application/zstd", bytes.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["bundle_id"].as_str(), body["files"].as_u64()),
        (Some(sha.as_str()), Some(2))
    );
    assert_eq!(
        head(&server, &token, &sha).await,
        200,
        "HEAD finds the .tar.zst"
    );
    assert_eq!(stored_as(&server, &sha).await, Some(BundleEncoding::Zstd));
    let root = server.state.core.config.bundles_dir();
    assert!(
        entries(&root).contains(&format!("{sha}.tar.zst")),
        "{:?}",
        entries(&root)
    );

    // The unpacked tree is a cache: without it the session unpacks the .tar.zst blob again.
    std::fs::remove_dir_all(root.join(&sha)).expect("drop the cached tree");
    let (status, session) = server
        .post(
            "/v1/sessions",
            &token,
            &create_body(&sha, "fix the login bug"),
        )
        .await;
    assert_eq!(status, 201, "{session}");
    let id = session["id"].as_str().expect("id");
    wait_for(&server, &token, id, is_plan("plan1")).await;
    assert_eq!(
        std::fs::read(root.join(&sha).join("src/auth.rs")).expect("unpacked again"),
        b"pub fn login() {}\n"
    );
}

#[tokio::test]
async fn old_clients_gzip_works_and_contradicting_types_are_refused() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let (gz, gz_sha) = tarball(&[("a.txt", b"gzip\n")]);
    let (zst, zst_sha) = zstd_tarball(&[("a.txt", b"zstd\n")]);
    let root = server.state.core.config.bundles_dir();

    // Declared the other way round: refused, nothing kept.
    for (ct, bytes, sha) in [
        ("application/zstd", gz.clone(), &gz_sha),
        ("application/gzip", zst.clone(), &zst_sha),
    ] {
        let (status, body) = put(&server, &token, sha, ct, bytes).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("encoding_mismatch")),
            "{ct}: {body}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("declared")),
            "{body}"
        );
        assert_eq!(head(&server, &token, sha).await, 404);
    }
    let left: Vec<String> = entries(&root)
        .into_iter()
        .filter(|e| e != ".staging")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let (status, body) = put(&server, &token, &gz_sha, "text/plain", gz.clone()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("unsupported_media_type")),
        "{body}"
    );

    // An old client: application/gzip, as before.
    let (status, body) = server.put_bundle(&token, &gz_sha, gz).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        stored_as(&server, &gz_sha).await,
        Some(BundleEncoding::Gzip)
    );
    assert_eq!(head(&server, &token, &gz_sha).await, 200);
    // No declared encoding: the magic bytes decide.
    let (status, body) = put(&server, &token, &zst_sha, "application/octet-stream", zst).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        stored_as(&server, &zst_sha).await,
        Some(BundleEncoding::Zstd)
    );
    let mut names = entries(&root);
    names.retain(|e| e != ".staging");
    names.sort();
    let mut want = vec![
        gz_sha.clone(),
        format!("{gz_sha}.tar.gz"),
        zst_sha.clone(),
        format!("{zst_sha}.tar.zst"),
    ];
    want.sort();
    assert_eq!(names, want);
}
