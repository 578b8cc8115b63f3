//! The real client against the real server: the server advertises zstd, so `ultraplan launch`
//! uploads a zstd bundle, the server keeps it as `<sha>.tar.zst`, and the session plans over
//! it. (Against a server that advertises nothing the client sends gzip: the client suite's
//! scripted old server checks that.)

use serde_json::{Value, json};
use ultraplan_tests::fake_models::{Reply, Script};
use ultraplan_tests::harness::plan_call;

use super::poller::{Terminal, server_with, text};

/// Look at the tree, then plan.
fn script() -> Script {
    Script::from_fn(|req| match req.tool_results().last() {
        None => Reply::tool_use("Glob", json!({"pattern": "**/*.rs"})),
        Some(_) => Reply::exit_plan_mode("# Plan\n1. Reject empty users"),
    })
}

#[tokio::test]
async fn launch_sends_zstd_to_a_server_that_accepts_it_and_the_session_plans() {
    let (_fake, server) = server_with(script()).await;
    let (status, eligibility) = server.get("/v1/eligibility").await.expect("eligibility");
    assert_eq!(status, 200, "{eligibility}");
    assert_eq!(
        eligibility["accepts_bundle_encodings"],
        json!(["zstd", "gzip"])
    );

    let term = Terminal::new(&server.base_url, &server.token);
    let out = term.run_whole(&[
        "launch",
        "--yes",
        "--json",
        "--no-watch",
        "ultraplan harden login",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let session: Value = serde_json::from_slice(&out.stdout).expect("session json");
    let id = session["id"].as_str().expect("id");
    let bundle = session["bundle_id"].as_str().expect("bundle_id");
    let bundles = server.data_dir.join("bundles");
    let archive = std::fs::read(bundles.join(format!("{bundle}.tar.zst"))).unwrap_or_else(|e| {
        panic!(
            "no .tar.zst for {bundle} ({e}); the store holds {:?}",
            std::fs::read_dir(&bundles)
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        )
    });
    assert!(archive.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]), "zstd bytes");
    assert!(
        !bundles.join(format!("{bundle}.tar.gz")).exists(),
        "one id, one encoding"
    );
    assert!(
        std::fs::read_to_string(bundles.join(bundle).join("src/auth.rs"))
            .expect("unpacked")
            .contains("pub fn login")
    );
    let mut seen = Vec::new();
    server
        .wait_for(id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan over the zstd bundle");
}
