//! The disk: a data dir that fills up, and an upload cut off half way.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use ultraplan_tests::fake_models::FakeAnthropic;
use ultraplan_tests::faults::Tmpfs;
use ultraplan_tests::harness::{ServerProcess, demo_repo, plan_call, tarball};

use super::*;

/// Bytes of `n` hex characters that gzip cannot shrink much.
pub(super) fn noise(n: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut out = String::with_capacity(n + 64);
    let mut block = Sha256::digest(b"seed");
    while out.len() < n {
        out.push_str(&hex::encode(block));
        block = Sha256::digest(block);
    }
    out.truncate(n);
    out
}

fn staged_or_stored(bundles: &Path, sha: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for name in [sha.to_owned(), format!("{sha}.tar.gz")] {
        if bundles.join(&name).exists() {
            found.push(name);
        }
    }
    if let Ok(entries) = std::fs::read_dir(bundles.join(".staging")) {
        found.extend(entries.flatten().map(|e| e.path().display().to_string()));
    }
    found
}

#[tokio::test]
async fn a_client_killed_mid_upload_leaves_nothing_behind() {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
    ])
    .await
    .expect("server");
    let big = noise(6 * 1024 * 1024);
    let mut files = demo_repo();
    files.push(("assets/blob.txt", big.as_str()));
    let (bytes, sha) = tarball(&files).expect("tarball");
    let bundles = server.data_dir.join("bundles");

    let addr = server.base_url.trim_start_matches("http://").to_owned();
    let mut conn = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let head = format!(
        "PUT /v1/bundles/{sha} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/gzip\r\nContent-Length: {}\r\n\r\n",
        server.token,
        bytes.len()
    );
    conn.write_all(head.as_bytes()).await.expect("head");
    conn.write_all(&bytes[..bytes.len() / 2])
        .await
        .expect("half");
    conn.flush().await.expect("flush");
    eventually(
        "the server staging the upload",
        || !staged_or_stored(&bundles, &sha).is_empty(),
        Duration::from_secs(30),
    )
    .await;
    drop(conn);

    eventually(
        "the half upload's files going away",
        || staged_or_stored(&bundles, &sha).is_empty(),
        Duration::from_secs(30),
    )
    .await;
    let head = reqwest::Client::new()
        .head(format!("{}/v1/bundles/{sha}", server.base_url))
        .bearer_auth(&server.token)
        .send()
        .await
        .expect("head");
    assert_eq!(head.status().as_u16(), 404, "no bundle is recorded");

    let stored = server
        .upload(&files)
        .await
        .expect("the full upload succeeds");
    assert_eq!(stored, sha);
    let id = server
        .create_session(&sha, "fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan over the bundle");
}

/// Fill a filesystem: write 1 MiB pieces until it refuses.
fn fill(path: &Path) -> u64 {
    use std::io::Write;
    let mut file = std::fs::File::create(path).expect("filler");
    let chunk = vec![0u8; 1024 * 1024];
    let mut written = 0;
    while let Ok(n) = file.write(&chunk) {
        if n == 0 {
            break;
        }
        written += n as u64;
    }
    written
}

#[tokio::test]
async fn a_full_data_dir_gives_clear_errors_and_recovers_once_space_returns() {
    let fake = FakeAnthropic::start(paced_script(Duration::ZERO)).await;
    let mut server = fake_anthropic_server(&fake.base_url(), "bwrap", &[]).await;
    let before = server
        .demo_session("before the disk fills")
        .await
        .expect("session");
    let (subtype, _, _) = plan_or_clear_failure(&server, &before, "teleport").await;
    assert_eq!(subtype, "success");
    server.kill9().await.expect("stop");

    // Move the data dir onto a 64 MiB tmpfs and start the server there.
    let saved = tempfile::tempdir().expect("tmp");
    let copy = |from: &Path, to: &Path| {
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", from.display()))
            .arg(to)
            .status()
            .expect("cp");
        assert!(status.success());
    };
    copy(&server.data_dir, saved.path());
    let _tmpfs = Tmpfs::mount(&server.data_dir, 64 * 1024 * 1024).expect("tmpfs");
    copy(saved.path(), &server.data_dir);
    // The server's log stays off the tmpfs, so it can say what went wrong once it is full.
    let log = saved.path().join("server.log");
    std::fs::remove_file(server.data_dir.join("server.log")).expect("log");
    std::os::unix::fs::symlink(&log, server.data_dir.join("server.log")).expect("symlink");
    server.restart().await.expect("start on the tmpfs");
    let bundle = server
        .upload(&demo_repo())
        .await
        .expect("upload before full");

    let filler = server.data_dir.join("filler");
    assert!(fill(&filler) > 0);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client");
    let big = noise(2 * 1024 * 1024);
    let mut files = demo_repo();
    files.push(("assets/blob.txt", big.as_str()));
    let (bytes, sha) = tarball(&files).expect("tarball");
    let r = http
        .put(format!("{}/v1/bundles/{sha}", server.base_url))
        .bearer_auth(&server.token)
        .header("content-type", "application/gzip")
        .body(bytes.clone())
        .send()
        .await
        .unwrap_or_else(|e| panic!("the upload gets an answer: {e}\n{}", server.log()));
    let status = r.status().as_u16();
    let body = r.text().await.unwrap_or_default();
    assert_eq!(
        status, 507,
        "a full disk refuses the upload, saying why: {body}"
    );
    assert!(
        body.contains("storage_full") && body.contains("disk space"),
        "{body}"
    );
    eprintln!("upload on a full disk: {status} {body}");

    let (status, body) = server
        .post(
            "/v1/sessions",
            &json!({
                "title": "on a full disk", "bundle_id": bundle,
                "events": [{"type":"user","message":{"role":"user","content":"fix it"}}],
                "session_context": {"base": {"commit": null, "branch": "main", "dirty": false}}
            }),
        )
        .await
        .expect("create answers");
    eprintln!("create on a full disk: {status} {body}");
    // Either the session is made (its first event fit) or it is refused, saying why.
    let during = body["id"].as_str().map(str::to_owned);
    if during.is_none() {
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (507, Some("storage_full")),
            "{body}"
        );
    }
    let (health, _) = server.get("/healthz").await.expect("healthz");
    assert_eq!(health, 200, "the server stays up");
    assert_log_whole(&server, &before).await;

    std::fs::remove_file(&filler).expect("free the space");
    if let Some(during) = &during {
        server
            .wait_for(during, &mut Vec::new(), |e| {
                plan_call(e).is_some() || is_result(e)
            })
            .await
            .expect("the session made on a full disk moves or ends");
        assert_log_whole(&server, during).await;
    }
    let stored = server
        .upload(&files)
        .await
        .unwrap_or_else(|e| panic!("upload once space returns: {e}\n{}", problems(&server)));
    assert_eq!(stored, sha);
    let after = server
        .create_session(&stored, "after")
        .await
        .expect("session");
    let (subtype, is_error, _) = plan_or_clear_failure(&server, &after, "approve").await;
    assert_eq!((subtype.as_str(), is_error), ("success", false));
    assert_log_whole(&server, &after).await;
    assert_log_whole(&server, &before).await;
}
