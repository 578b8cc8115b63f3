//! The real `ultraplan launch` killed with SIGKILL half way through its bundle upload. A proxy
//! paces the upload so the kill lands mid-body. The bundle is large, so it goes as a resumable
//! upload (whole bundles here; incremental bundles are tested in `incremental_bundle`): the server keeps the bytes that arrived as its owner's partial upload and nothing
//! else (no staged files, no bundle, no session), goes on serving, and a fresh launch of the
//! same repository sends only the rest.

use std::path::Path;
use std::time::Duration;

use ultraplan_tests::faults::ThrottlingProxy;
use ultraplan_tests::harness::{ServerProcess, plan_call};

use super::eventually;
use super::storage::noise;
use crate::poller::{Terminal, text};

/// Upload pace while the client is to be killed: a few seconds for the whole bundle.
const SLOW: u64 = 512 * 1024;
/// Bytes the server must have received before the kill.
const PART: u64 = 1024 * 1024;

/// Every file under the bundle store, staging area included.
fn leftovers(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(leftovers(&path));
        } else {
            found.push(path.display().to_string());
        }
    }
    found
}

/// Staging directories of uploads in progress (or left behind).
fn staging_dirs(bundles: &Path) -> Vec<String> {
    std::fs::read_dir(bundles.join(".staging"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A repository whose bundle is far larger, even compressed, than what the client's socket
/// buffers can hold, so the kill leaves most of it unsent.
fn big_repo(term: &Terminal) {
    let repo = &term.repo;
    std::fs::create_dir_all(repo.join("assets")).expect("assets");
    std::fs::write(repo.join("assets/blob.txt"), noise(16 * 1024 * 1024)).expect("blob");
    term.commit_all("blob");
}

// The proxy runs on the test's runtime while the test waits on the client: two threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_client_killed_mid_upload_leaves_only_its_partial_upload_and_resumes() {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
    ])
    .await
    .expect("server");
    let proxy = ThrottlingProxy::start(&server.base_url, SLOW)
        .await
        .expect("proxy");
    let term = Terminal::new(&proxy.base_url, &server.token);
    big_repo(&term);
    let bundles = server.data_dir.join("bundles");
    let launch = [
        "launch",
        "--yes",
        "--json",
        "--no-watch",
        "fix the login bug",
    ];

    let mut client = term
        .command(&launch)
        .env("ULTRAPLAN_INCREMENTAL", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ultraplan");
    eventually(
        "the server receiving part of the upload",
        || proxy.uploaded() >= PART && !leftovers(&bundles).is_empty(),
        Duration::from_secs(120),
    )
    .await;
    assert!(
        client.try_wait().expect("client").is_none(),
        "the client is still uploading"
    );
    client.kill().expect("kill -9");
    let status = client.wait().expect("reap");
    assert!(!status.success(), "{status:?}");
    let at_kill = proxy.uploaded();
    // What the dead client's kernel still held is delivered, then the connection ends.
    proxy.set_rate(u64::MAX);

    let partial_only = || {
        let left = leftovers(&bundles);
        !left.is_empty() && left.iter().all(|f| f.contains("/.partial/"))
    };
    eventually(
        "everything but the partial upload going away",
        || partial_only() && staging_dirs(&bundles).is_empty(),
        Duration::from_secs(60),
    )
    .await;
    let kept: u64 = leftovers(&bundles)
        .iter()
        .filter(|f| f.ends_with(".part"))
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    assert!(kept > 0, "the bytes that arrived are kept for the resume");
    let sent = proxy.uploaded();
    eprintln!("killed at {at_kill} upload bytes through the proxy; {sent} once drained");
    let (code, list) = server.get("/v1/sessions").await.expect("sessions");
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["data"], serde_json::json!([]), "no session: {list}");
    let health = reqwest::get(format!("{}/healthz", server.base_url))
        .await
        .expect("healthz");
    assert!(health.status().is_success(), "the server still serves");

    // A fresh launch sends only what the server lacks, and plans.
    let out = term.run_whole(&launch);
    assert!(out.status.success(), "{}", text(&out));
    let rest = proxy.uploaded() - sent;
    let session: serde_json::Value = serde_json::from_slice(&out.stdout).expect("session json");
    let id = session["id"].as_str().expect("id");
    let resource = server.session(id).await.expect("session");
    let sha = resource["bundle_id"].as_str().expect("bundle_id");
    let archive = std::fs::metadata(bundles.join(format!("{sha}.tar.zst")))
        .expect("the archive is stored")
        .len();
    eprintln!("the fresh launch sent {rest} bytes; {kept} of the {archive} were kept");
    assert!(
        rest < archive - kept + 64 * 1024,
        "the fresh launch sent {rest} bytes for the {} the server lacked",
        archive - kept
    );
    assert!(
        leftovers(&bundles)
            .iter()
            .all(|f| !f.contains("/.partial/")),
        "the finished upload's partial is gone"
    );
    let head = reqwest::Client::new()
        .head(format!("{}/v1/bundles/{sha}", server.base_url))
        .bearer_auth(&server.token)
        .send()
        .await
        .expect("head");
    assert_eq!(head.status().as_u16(), 200, "the bundle is stored now");
    assert!(
        staging_dirs(&bundles).is_empty(),
        "{:?}",
        leftovers(&bundles)
    );
    let mut seen = Vec::new();
    server
        .wait_for(id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan over the bundle");
}
