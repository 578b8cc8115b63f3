//! Thousands of sessions polled the way the terminal client polls them (docs/ARCHITECTURE.md §8:
//! p99 under 50 ms per poll on 2 cores, at most 100 µs of server CPU per idle poll, memory per
//! idle session in kilobytes). Every session is polled every 3 s with the client's request
//! (`after_id` = the newest event it has, `include=session`); no agent runs. First every session
//! is idle; then ACTIVE % of them get a message every interval, halfway between two of their
//! polls, and each message must reach its poller within one interval (the cache in front of the
//! store stays fresh). The active sessions are every n-th one, so their polls are spread through
//! the interval as independent terminals' are; `ULTRAPLAN_BENCH_BUNCHED=1` takes the first ones
//! instead, so all their polls fall in one tenth of the interval (a burst). Then a second server
//! holds REVIEW sessions awaiting review, each with its live agent in a bwrap sandbox (offline
//! planner): memory per session on the server and in the agents. Runs the release server binary,
//! on SQLite, or on the PostgreSQL that `ULTRAPLAN_BENCH_DATABASE_URL` names.
//!
//!   bench/idle_pollers.sh [SESSIONS] [SECONDS] [REVIEW] [ACTIVE]
//!
//! With `ULTRAPLAN_BENCH_REPLICAS=N` (`bench/replica_polls.sh`) the sessions are spread over N
//! `serve --no-local-runner` replicas on the PostgreSQL `ULTRAPLAN_BENCH_DATABASE_URL` names,
//! and each replica's CPU is reported per poll and per 1,000 polling sessions.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "idle_pollers/follow.rs"]
mod follow;
#[path = "idle_pollers/replicas.rs"]
mod replicas;

use std::time::Duration;

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

#[tokio::main]
async fn main() {
    let sessions = arg(1, 2000) as usize;
    let seconds = arg(2, 30);
    // `bench/replica_polls.sh`: the sessions spread over server replicas on PostgreSQL.
    if let Some(replicas) = std::env::var("ULTRAPLAN_BENCH_REPLICAS")
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
        .filter(|r| *r > 0)
    {
        let verdict = replicas::bench(replicas, sessions, seconds, arg(4, 10)).await;
        if verdict != 0 {
            println!("FAIL: messages were missed or late");
        }
        std::process::exit(i32::from(verdict));
    }
    let active = sessions * arg(4, 10) as usize / 100;
    let database = std::env::var("ULTRAPLAN_BENCH_DATABASE_URL").ok();
    println!(
        "database: {}",
        database.as_deref().map_or("sqlite", |_| "postgresql")
    );
    // No agent can start: every session stays idle.
    let (server, bundle) = offline_server(&[
        ("ULTRAPLAN_AGENT_BIN", "/nonexistent/ultraplan-agent"),
        ("DATABASE_URL", database.as_deref().unwrap_or("")),
    ])
    .await;
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
    let target = (server.base_url.as_str(), server.token.as_str());
    let mut verdict = 0;
    for share in [0, active] {
        let heads = follow::heads(&http, &[target.0], target.1, &ids).await;
        let cpu_before = cpu_seconds(pid);
        let run = follow::run(&http, (&[target.0], target.1), &ids, heads, share, seconds).await;
        let cpu = cpu_seconds(pid) - cpu_before;
        verdict = verdict.max(report(sessions, share, seconds, cpu, &run));
    }
    let rss_after = rss_kib(pid);
    println!(
        "RSS {rss_before} KiB before the sessions, {rss_after} KiB after: {:.1} KiB per polled \
         session",
        rss_after.saturating_sub(rss_before) as f64 / sessions as f64
    );
    drop(server);
    awaiting_review(arg(3, 100) as usize, seconds).await;
    if verdict != 0 {
        println!(
            "FAIL: {}",
            [
                "",
                "messages were missed or late",
                "p99 over the 50 ms goal"
            ][usize::from(verdict)]
        );
        std::process::exit(i32::from(verdict));
    }
}

/// Print a run's figures; 1 when a posted message never reached its poller within one poll
/// interval, 2 when p99 is over the goal, else 0.
fn report(sessions: usize, active: usize, seconds: u64, cpu: f64, run: &follow::Run) -> u8 {
    let polls = &run.polls;
    let at = |q: f64| polls[((polls.len() - 1) as f64 * q).round() as usize];
    println!(
        "{sessions} sessions ({active} getting a message every {POLL_EVERY:?}), each polled every \
         {POLL_EVERY:?} for {seconds} s: {} polls, p50 {:?}, p99 {:?}, max {:?}; p99 is {:.2}× \
         the 50 ms goal; server CPU {cpu:.1} s ({:.0}% of one core), {:.0} µs per poll",
        polls.len(),
        at(0.5),
        at(0.99),
        polls[polls.len() - 1],
        at(0.99).as_secs_f64() / 0.050,
        cpu / seconds as f64 * 100.0,
        cpu * 1e6 / polls.len().max(1) as f64,
    );
    if active > 0 {
        let lags = &run.lags;
        let lag = |q: f64| lags.get(((lags.len().max(1) - 1) as f64 * q).round() as usize);
        println!(
            "  messages: {} posted, {} seen by their pollers ({} missed); post → seen p50 {:?}, \
             p99 {:?}, max {:?} (goal: within one poll interval, {POLL_EVERY:?})",
            run.posted,
            lags.len(),
            run.posted - lags.len(),
            lag(0.5),
            lag(0.99),
            lags.last(),
        );
    }
    if !run.all_in_time() {
        1
    } else if at(0.99) > Duration::from_millis(50) {
        2
    } else {
        0
    }
}

/// Sessions whose plan waits for review hold a live agent: what each costs, on the server and
/// in its sandbox, while they are polled like the idle ones.
async fn awaiting_review(sessions: usize, seconds: u64) {
    if sessions == 0 {
        return;
    }
    let cap = (sessions + 8).to_string();
    let (server, bundle) = offline_server(&[("ULTRAPLAN_MAX_RUNNING", &cap)]).await;
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
    let target = (server.base_url.as_str(), server.token.as_str());
    let heads = follow::heads(&http, &[target.0], target.1, &ids).await;
    let all = follow::run(&http, (&[target.0], target.1), &ids, heads, 0, seconds)
        .await
        .polls;
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
async fn offline_server(extra: &[(&str, &str)]) -> (ServerProcess, String) {
    let mut env = vec![
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_RATE_LIMIT", "0"),
        ("ULTRAPLAN_READ_RATE_LIMIT", "0"),
        ("ULTRAPLAN_LOG", "warn"),
        ("ULTRAPLAN_MODEL", "offline"),
    ];
    env.extend(extra.iter().filter(|(_, v)| !v.is_empty()));
    let server = ServerProcess::start(&env).await.expect("server");
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
