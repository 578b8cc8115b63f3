//! Thousands of idle sessions polled the way the terminal client polls them (docs/ARCHITECTURE.md
//! §8: p99 under 50 ms per poll on 2 cores; memory per idle session in kilobytes). Every session is
//! polled every 3 s, first with two requests (the session, then the events after the last id), then
//! with the client's one (`include=session`); no agent runs, so every poll is the idle case. Then a
//! second server holds REVIEW sessions awaiting review, each with its live agent in a bwrap
//! sandbox (offline planner), polled the same way: memory per session on the server and in the
//! agents. Runs the release server binary.
//!
//!   bench/idle_pollers.sh [SESSIONS] [SECONDS] [REVIEW]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use ultraplan_tests::harness::{ServerProcess, demo_repo};

const POLL_EVERY: Duration = Duration::from_secs(3);

fn arg(n: usize, default: u64) -> u64 {
    std::env::args()
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// Resident memory of a process in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU seconds a process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    ticks / 100.0
}

/// How the client polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// The session, then the events after the last id.
    TwoRequests,
    /// The events with `include=session`.
    OneRequest,
}

async fn get(http: &reqwest::Client, url: String, token: &str) {
    let response = http.get(url).bearer_auth(token).send().await.expect("get");
    assert!(response.status().is_success(), "{}", response.status());
    let _ = response.bytes().await;
}

async fn poll(
    http: &reqwest::Client,
    (base, token): (&str, &str),
    id: &str,
    after: i64,
    style: Style,
) -> Duration {
    let started = Instant::now();
    let events = format!("{base}/v1/sessions/{id}/events?after_id={after}");
    match style {
        Style::TwoRequests => {
            get(http, format!("{base}/v1/sessions/{id}"), token).await;
            get(http, events, token).await;
        }
        Style::OneRequest => get(http, format!("{events}&include=session"), token).await,
    }
    started.elapsed()
}

#[tokio::main]
async fn main() {
    let sessions = arg(1, 2000) as usize;
    let seconds = arg(2, 30);
    // No agent can start: every session stays idle.
    let (server, bundle) =
        offline_server(("ULTRAPLAN_AGENT_BIN", "/nonexistent/ultraplan-agent")).await;
    let pid = server.pid().expect("pid");
    let rss_before = rss_kib(pid);
    let mut ids = Vec::with_capacity(sessions);
    for i in 0..sessions {
        ids.push(
            server
                .create_session(&bundle, &format!("idle {i}"))
                .await
                .expect("create"),
        );
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(sessions)
        .build()
        .expect("client");
    for style in [Style::TwoRequests, Style::OneRequest] {
        let cpu_before = cpu_seconds(pid);
        let all = run_pollers(&http, &server, &ids, seconds, style).await;
        let cpu = cpu_seconds(pid) - cpu_before;
        let at = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize];
        println!(
            "{style:?}: {sessions} idle sessions, each polled every {POLL_EVERY:?} for {seconds} s: \
             {} polls, p50 {:?}, p99 {:?}, max {:?}; goal p99 < 50 ms, p99 is {:.2}× the goal; \
             server CPU {:.1} s ({:.0}% of one core)",
            all.len(),
            at(0.5),
            at(0.99),
            all[all.len() - 1],
            at(0.99).as_secs_f64() / 0.050,
            cpu,
            cpu / seconds as f64 * 100.0,
        );
    }
    let rss_after = rss_kib(pid);
    println!(
        "RSS {rss_before} KiB before the sessions, {rss_after} KiB after: {:.1} KiB per idle \
         polled session",
        rss_after.saturating_sub(rss_before) as f64 / sessions as f64
    );
    drop(server);
    awaiting_review(arg(3, 100) as usize, seconds).await;
}

/// Sessions whose plan waits for review hold a live agent: what each costs, on the server and
/// in its sandbox, while they are polled like the idle ones.
async fn awaiting_review(sessions: usize, seconds: u64) {
    if sessions == 0 {
        return;
    }
    let cap = (sessions + 8).to_string();
    let (server, bundle) = offline_server(("ULTRAPLAN_MAX_RUNNING", &cap)).await;
    let pid = server.pid().expect("pid");
    let (agents_before, _) = agents_rss_kib();
    let rss_before = rss_kib(pid);
    let mut ids = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let prompt = format!("review {i}: reject empty passwords in login");
        ids.push(
            server
                .create_session(&bundle, &prompt)
                .await
                .expect("create"),
        );
    }
    for id in &ids {
        wait_for_review(&server, id).await;
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(sessions)
        .build()
        .expect("client");
    let all = run_pollers(&http, &server, &ids, seconds, Style::OneRequest).await;
    let at = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize];
    let (agents, agent_kib) = agents_rss_kib();
    let server_kib = rss_kib(pid).saturating_sub(rss_before);
    println!(
        "awaiting review: {sessions} sessions with live agents ({} agent processes), polled every \
         {POLL_EVERY:?} for {seconds} s: p50 {:?}, p99 {:?}; server {:.1} KiB per session, agents \
         {:.1} KiB per session ({:.0} KiB RSS each)",
        agents - agents_before,
        at(0.5),
        at(0.99),
        server_kib as f64 / sessions as f64,
        agent_kib as f64 / sessions as f64,
        agent_kib as f64 / (agents - agents_before).max(1) as f64,
    );
}

/// A release server on the offline planner in bwrap, unthrottled, with one more setting, and
/// the demo bundle uploaded.
async fn offline_server(extra: (&str, &str)) -> (ServerProcess, String) {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_RATE_LIMIT", "0"),
        ("ULTRAPLAN_READ_RATE_LIMIT", "0"),
        ("ULTRAPLAN_LOG", "warn"),
        ("ULTRAPLAN_MODEL", "offline"),
        extra,
    ])
    .await
    .expect("server");
    let bundle = server.upload(&demo_repo()).await.expect("upload");
    (server, bundle)
}

/// Waits (bounded) until the session's plan waits for review.
async fn wait_for_review(server: &ServerProcess, id: &str) {
    for _ in 0..1200 {
        let session = server.session(id).await.expect("session");
        if session["phase"] == "plan_ready" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("session {id} never reached its plan");
}

/// How many agent processes run on this machine, and their resident memory in KiB.
fn agents_rss_kib() -> (usize, u64) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return (0, 0);
    };
    let agents: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "ultraplan-agent")
        })
        .collect();
    (agents.len(), agents.iter().map(|pid| rss_kib(*pid)).sum())
}

/// Every session polled every [`POLL_EVERY`] (staggered) for `seconds`; the sorted poll times.
async fn run_pollers(
    http: &reqwest::Client,
    server: &ServerProcess,
    ids: &[String],
    seconds: u64,
    style: Style,
) -> Vec<Duration> {
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let stagger = POLL_EVERY / u32::try_from(ids.len().max(1)).unwrap_or(u32::MAX);
    let mut pollers = Vec::new();
    for (i, id) in ids.iter().cloned().enumerate() {
        let (http, base, token, latencies) = (
            http.clone(),
            server.base_url.clone(),
            server.token.clone(),
            latencies.clone(),
        );
        let start = tokio::time::Instant::now() + stagger * u32::try_from(i).unwrap_or(0);
        pollers.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(start, POLL_EVERY);
            while Instant::now() < deadline {
                ticks.tick().await;
                let took = poll(&http, (&base, &token), &id, 2, style).await;
                latencies.lock().await.push(took);
            }
        }));
    }
    for poller in pollers {
        poller.await.expect("poller");
    }
    let mut all = latencies.lock().await.clone();
    all.sort();
    all
}
