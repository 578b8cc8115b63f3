//! Large repositories and the real client. An upload through a link that drops mid-way
//! resumes: the server keeps what arrived, the client asks where the upload stands and sends
//! only the rest, and the session plans over the bundle (`bench/resume_upload.sh` runs this
//! with a 200 MB repository, `ULTRAPLAN_RESUME_MB`). A bundle over the server's limit is
//! refused whole with the largest files named, and `.ultraplanignore` leaves them out.

use std::io::Write;

use serde_json::{Value, json};
use ultraplan_tests::cut_proxy::CutOnceProxy;
use ultraplan_tests::fake_models::{Reply, Script};
use ultraplan_tests::harness::{ServerProcess, plan_call};

use super::poller::{Terminal, server_with, text};

fn script() -> Script {
    Script::from_fn(|_| Reply::exit_plan_mode("# Plan\n1. Keep data.bin"))
}

/// `megabytes` of incompressible bytes at `path`, committed.
fn add_noise(term: &Terminal, megabytes: usize) {
    let mut file = std::fs::File::create(term.repo.join("data.bin")).expect("create");
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut block = vec![0u8; 1024 * 1024];
    for _ in 0..megabytes {
        for word in block.chunks_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        file.write_all(&block).expect("write");
    }
    term.commit_all("data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_halfway_resumes_and_resends_little() {
    let megabytes: usize = std::env::var("ULTRAPLAN_RESUME_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let (_fake, server) = server_with(script()).await;
    let (_, eligibility) = server.get("/v1/eligibility").await.expect("eligibility");
    assert_eq!(eligibility["resumable_bundle_uploads"], json!(true));
    let archive = (megabytes * 1024 * 1024) as u64;
    let proxy = CutOnceProxy::start(&server.base_url, archive / 2)
        .await
        .expect("proxy");
    let term = Terminal::new(&proxy.base_url, &server.token);
    add_noise(&term, megabytes);

    let started = std::time::Instant::now();
    let out = term.run_whole(&[
        "launch",
        "--yes",
        "--json",
        "--no-watch",
        "ultraplan keep the data",
    ]);
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out));
    assert!(proxy.was_cut(), "the link dropped mid-upload");
    let session: Value = serde_json::from_slice(&out.stdout).expect("session json");
    let bundle = session["bundle_id"].as_str().expect("bundle_id");
    let stored = std::fs::metadata(
        server
            .data_dir
            .join("bundles")
            .join(format!("{bundle}.tar.zst")),
    )
    .expect("the archive is stored")
    .len();
    let sent = proxy.sent();
    let again = sent.saturating_sub(archive / 2);
    #[allow(clippy::cast_precision_loss)] // a ratio for the report
    let resent = again as f64 / stored as f64;
    eprintln!(
        "resumable upload: archive {stored} B, cut at {} B, {sent} B sent in all, {again} B \
         after the cut ({:.1} % of the archive), {took:?}",
        archive / 2,
        resent * 100.0
    );
    assert!(
        resent <= 0.6,
        "sent {:.1} % of the archive again",
        resent * 100.0
    );
    assert!(
        std::fs::metadata(
            server
                .data_dir
                .join("bundles")
                .join(bundle)
                .join("data.bin")
        )
        .is_ok_and(|m| m.len() == archive),
        "the whole file arrived"
    );
    let id = session["id"].as_str().expect("id");
    let mut seen = Vec::new();
    server
        .wait_for(id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan over the resumed bundle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_over_the_limit_is_refused_whole_until_ultraplanignore_leaves_data_out() {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_MODEL", "offline"),
        ("ULTRAPLAN_MAX_BUNDLE_BYTES", "1048576"),
    ])
    .await
    .expect("server");
    let term = Terminal::new(&server.base_url, &server.token);
    add_noise(&term, 3);
    let launch = [
        "launch",
        "--yes",
        "--json",
        "--no-watch",
        "ultraplan keep the data",
    ];
    let refused = term.run_whole(&launch);
    assert!(!refused.status.success(), "{}", text(&refused));
    let said = text(&refused);
    for needle in ["refused", ".ultraplanignore", "data.bin", "3.0 MB"] {
        assert!(said.contains(needle), "no {needle:?} in:\n{said}");
    }
    let (_, sessions) = server.get("/v1/sessions").await.expect("sessions");
    assert_eq!(sessions["data"], json!([]), "nothing was launched");

    std::fs::write(term.repo.join(".ultraplanignore"), "# large data\n*.bin\n").expect("write");
    let out = term.run_whole(&launch);
    assert!(out.status.success(), "{}", text(&out));
    let session: Value = serde_json::from_slice(&out.stdout).expect("session json");
    let tree = server
        .data_dir
        .join("bundles")
        .join(session["bundle_id"].as_str().expect("bundle_id"));
    assert!(tree.join("src/auth.rs").is_file(), "the code went");
    assert!(tree.join(".ultraplanignore").is_file());
    assert!(
        !tree.join("data.bin").exists(),
        "the tracked data file stayed out"
    );
}
