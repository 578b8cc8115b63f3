//! Session created → first model request, for the bwrap and Docker runners (docs/ARCHITECTURE.md
//! §8: bwrap < 1 s, docker < 2 s). Runs the real server binary against a fake Anthropic server.
//!
//!   scripts/build-agent dev && ULTRAPLAN_AGENT_BIN=… cargo bench -p ultraplan-tests --bench session_start
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use serde_json::json;
use ultraplan_tests::fake_models::{FAKE_ANTHROPIC_KEY, FakeAnthropic, Reply, Script};
use ultraplan_tests::harness::{ServerProcess, demo_repo};

const SESSIONS: usize = 20;

async fn measure(runner: &str) -> Vec<Duration> {
    let fake = FakeAnthropic::start(Script::always(Reply::text("done"))).await;
    let base = fake.base_url();
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", runner),
        ("ULTRAPLAN_MODEL", "anthropic:claude-bench"),
        ("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY),
        ("ANTHROPIC_BASE_URL", &base),
    ])
    .await
    .expect("server");
    let bundle = server.upload(&demo_repo()).await.expect("upload");
    let mut latencies = Vec::new();
    for i in 0..=SESSIONS {
        let before = fake.requests().len();
        let started = Instant::now();
        let id = server
            .create_session(&bundle, &format!("bench {i}"))
            .await
            .expect("create");
        let first = loop {
            let requests = fake.requests();
            if requests.len() > before {
                break requests[before].received_at;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        if i > 0 {
            // The first session pays one-off costs (image checks, page cache); skip it.
            latencies.push(first.duration_since(started));
        }
        server
            .post(&format!("/v1/sessions/{id}/archive"), &json!({}))
            .await
            .expect("archive");
    }
    latencies.sort();
    latencies
}

fn report(runner: &str, goal: Duration, latencies: &[Duration]) {
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "{runner:>6}: create → first model request over {} sessions: p50 {:?}, p95 {:?}, max {:?} \
         (goal < {goal:?}; p50 is {:.2}× the goal)",
        latencies.len(),
        at(0.5),
        at(0.95),
        at(1.0),
        at(0.5).as_secs_f64() / goal.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let bwrap = measure("bwrap").await;
    report("bwrap", Duration::from_secs(1), &bwrap);
    let docker = measure("docker").await;
    report("docker", Duration::from_secs(2), &docker);
}
