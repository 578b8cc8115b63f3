//! Keyless runners (`ultraplan-runner`) linked to a server that runs no agents itself
//! (`--no-local-runner`): they plan and execute its sessions holding no keys, and a runner that
//! dies or is stopped past its lease loses its sessions to another at once, whose agents resume
//! them from the log. The runners' own ledgers prove no session ever had two live agents.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_runner::{LedgerEntry, read_ledger};
use ultraplan_tests::harness::{ServerProcess, plan_call};
use ultraplan_tests::runners::{RunnerProcess, runner_token};

use crate::faults::assert_log_whole;

async fn fleet_server(lease_seconds: &str) -> ServerProcess {
    ServerProcess::start(&[
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "offline"),
        ("ULTRAPLAN_LEASE_SECONDS", lease_seconds),
    ])
    .await
    .expect("server")
}

async fn runner(server: &ServerProcess, token: &str, name: &str) -> RunnerProcess {
    RunnerProcess::start(&server.base_url, token, "ci", name, 2)
        .await
        .expect("runner")
}

/// A session waiting on its first plan: its id, the plan's tool_use_id and the events seen.
async fn planned(server: &ServerProcess, prompt: &str) -> (String, String, Vec<Event>) {
    let id = server.demo_session(prompt).await.expect("session");
    let mut seen = Vec::new();
    let plan = server
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan");
    let (tool_use_id, _) = plan_call(&plan).expect("plan call");
    (id, tool_use_id, seen)
}

fn runner_of(resource: &serde_json::Value) -> String {
    resource["runner"].as_str().unwrap_or_default().to_owned()
}

/// Reject through `server` and wait for the revised plan.
async fn revise(server: &ServerProcess, id: &str, tool_use_id: &str, seen: &mut Vec<Event>) {
    let decision = json!({"decision": "reject", "feedback": "Also cover the empty password."});
    let code = server
        .decide(id, tool_use_id, decision)
        .await
        .expect("decide");
    assert_eq!(code, 200);
    server
        .wait_for(id, seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != tool_use_id)
        })
        .await
        .expect("a revised plan");
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap())
        .unwrap()
}

/// Each session's agents in one runner's ledger, as (start, end) spans; an agent with no end
/// yet lives until `open_until` (when its runner was killed, or forever for a live one).
pub(super) fn agents_by_session(
    ledger: &[LedgerEntry],
    open_until: i64,
) -> BTreeMap<String, Vec<(i64, i64)>> {
    let mut open: BTreeMap<(String, i64), i64> = BTreeMap::new();
    let mut out: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for entry in ledger {
        let key = (entry.session_id.clone(), entry.epoch);
        match entry.event.as_str() {
            "start" => {
                assert!(
                    open.insert(key, entry.at_ms).is_none(),
                    "started twice: {entry:?}"
                );
            }
            _ => {
                let start = open.remove(&key).expect("an end without a start");
                out.entry(entry.session_id.clone())
                    .or_default()
                    .push((start, entry.at_ms));
            }
        }
    }
    for ((session, _), start) in open {
        out.entry(session).or_default().push((start, open_until));
    }
    out
}

/// No two agents of one session were alive at once, across every runner's ledger.
pub(super) fn assert_never_two_agents(ledgers: &[BTreeMap<String, Vec<(i64, i64)>>]) {
    let mut all: BTreeMap<&String, Vec<(i64, i64)>> = BTreeMap::new();
    for ledger in ledgers {
        for (session, spans) in ledger {
            all.entry(session)
                .or_default()
                .extend(spans.iter().copied());
        }
    }
    for (session, spans) in &mut all {
        spans.sort_unstable();
        for pair in spans.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "session {session} had two live agents: {pair:?}"
            );
        }
    }
}

fn environ(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    String::from_utf8_lossy(&raw).replace('\0', "\n")
}

#[tokio::test]
async fn keyless_runners_plan_and_execute_a_servers_sessions() {
    let server = fleet_server("30").await;
    let token = runner_token(&server, "ci").await.expect("token");
    let listed = server.admin(&["runner-token", "list"]).await.expect("list");
    assert!(listed.contains("ci"), "{listed}");
    let r1 = runner(&server, &token, "r1").await;
    let r2 = runner(&server, &token, "r2").await;
    let metrics = reqwest::get(format!("{}/metrics", server.base_url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(metrics.contains("ultraplan_runners_linked 2"), "{metrics}");

    let sessions = futures_util::future::join_all((0..4).map(|i| {
        planned(
            &server,
            if i % 2 == 0 {
                "fix the login bug"
            } else {
                "tidy auth"
            },
        )
    }))
    .await;
    let mut holders = Vec::new();
    for (id, _, _) in &sessions {
        let resource = server.session(id).await.expect("resource");
        holders.push(runner_of(&resource));
    }
    for holder in &holders {
        assert!(
            [&r1.lease_name, &r2.lease_name].contains(&holder),
            "{holders:?}"
        );
    }

    let (id, tool_use_id, mut seen) = sessions.into_iter().next().expect("a session");
    let code = server
        .decide(&id, &tool_use_id, json!({"decision": "approve"}))
        .await
        .expect("approve");
    assert_eq!(code, 200);
    let finished = server
        .wait_for(&id, &mut seen, |e| {
            matches!(&e.body, EventBody::Result(r) if r.result.as_deref().is_some_and(|t| t.starts_with("Remote execution finished")))
        })
        .await
        .expect("the runner executed the plan and sent its patch");
    assert!(
        matches!(&finished.body, EventBody::Result(r) if !r.is_error),
        "{finished:?}"
    );
    let resource = server.session(&id).await.expect("resource");
    assert_eq!(resource["execution"]["state"], "finished", "{resource}");
    assert_log_whole(&server, &id).await;

    for runner in [&r1, &r2] {
        let env = environ(runner.pid().expect("pid"));
        for secret in ["API_KEY", "DATABASE_URL", "ULTRAPLAN_ADMIN"] {
            assert!(!env.contains(secret), "a runner holds {secret}");
        }
    }
    // A user's token opens no runner link, and a runner's token reads no session.
    let (code, _) = server.get("/v1/runner/bundles/0").await.expect("bundle");
    assert_eq!(code, 401);
}

#[tokio::test]
async fn a_killed_runner_hands_its_sessions_to_another_at_once() {
    let server = fleet_server("30").await;
    let token = runner_token(&server, "ci").await.expect("token");
    let mut r1 = runner(&server, &token, "r1").await;
    let mut waiting = Vec::new();
    for prompt in ["fix the login bug", "check the password"] {
        waiting.push(planned(&server, prompt).await);
    }
    for (id, _, _) in &waiting {
        let resource = server.session(id).await.expect("resource");
        assert_eq!(runner_of(&resource), r1.lease_name);
    }
    let r2 = runner(&server, &token, "r2").await;
    r1.kill9().await.expect("kill -9");
    let killed_at = now_ms();

    // Well within the 30 s lease: the link's end hands the sessions back at once.
    for (id, tool_use_id, seen) in &mut waiting {
        revise(&server, id, tool_use_id, seen).await;
        let resource = server.session(id).await.expect("resource");
        assert_eq!(runner_of(&resource), r2.lease_name, "{resource}");
        let log = assert_log_whole(&server, id).await;
        assert!(
            log.iter()
                .any(|e| matches!(&e.body, EventBody::System(s) if s.subtype == "resumed")),
            "the log says the session was resumed"
        );
    }
    let first = agents_by_session(&read_ledger(&r1.data_dir).expect("r1 ledger"), killed_at);
    let second = agents_by_session(&read_ledger(&r2.data_dir).expect("r2 ledger"), i64::MAX);
    for (id, _, _) in &waiting {
        assert!(
            first.contains_key(id) && second.contains_key(id),
            "both runners ran {id}"
        );
    }
    assert_never_two_agents(&[first, second]);
}

#[tokio::test]
async fn a_runner_stopped_past_its_lease_is_cut_off_and_its_agent_dies() {
    let server = fleet_server("3").await;
    let token = runner_token(&server, "ci").await.expect("token");
    let r1 = runner(&server, &token, "r1").await;
    let (id, tool_use_id, mut seen) = planned(&server, "fix the login bug").await;
    let r2 = runner(&server, &token, "r2").await;
    let pid = r1.pid().expect("pid").to_string();
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([format!("-{sig}"), pid.clone()])
            .status()
            .expect("kill(1)");
        assert!(status.success());
    };
    signal("STOP");
    // Cut off after a lease of silence; the other runner resumes the session.
    let mut taken = false;
    for _ in 0..300 {
        let resource = server.session(&id).await.expect("resource");
        if runner_of(&resource) == r2.lease_name {
            taken = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(taken, "r2 never took the session:\n{}", server.log());
    revise(&server, &id, &tool_use_id, &mut seen).await;
    signal("CONT");
    // Woken, the stopped runner finds its link dead and kills its agent.
    let mut ended = false;
    for _ in 0..300 {
        let ledger = read_ledger(&r1.data_dir).expect("r1 ledger");
        if ledger
            .iter()
            .any(|e| e.session_id == id && e.event == "end")
        {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        ended,
        "the stopped runner's agent never ended:\n{}",
        r1.log()
    );
    assert_log_whole(&server, &id).await;
    let first = agents_by_session(&read_ledger(&r1.data_dir).expect("ledger"), i64::MAX);
    let second = agents_by_session(&read_ledger(&r2.data_dir).expect("ledger"), i64::MAX);
    // Its agent outlived the link only as long as the runner was frozen: it could write
    // nothing (the server holds no route for its lease), and it was killed on waking.
    assert!(first.contains_key(&id) && second.contains_key(&id));
    assert!(
        server.log().contains("silent for"),
        "the server cut the stopped runner off for its silence"
    );
}

#[tokio::test]
async fn sigterm_drains_a_runner_and_another_resumes_its_session_at_once() {
    let server = fleet_server("30").await;
    let token = runner_token(&server, "ci").await.expect("token");
    let mut r1 = runner(&server, &token, "r1").await;
    let (id, tool_use_id, mut seen) = planned(&server, "fix the login bug").await;
    let r2 = runner(&server, &token, "r2").await;
    let pid = r1.pid().expect("pid").to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill(1)");
    assert!(status.success());
    let exit = tokio::time::timeout(Duration::from_secs(20), r1.wait())
        .await
        .expect("the runner stops promptly on SIGTERM")
        .expect("wait");
    assert!(exit.success(), "{exit:?}:\n{}", r1.log());
    // Its agent is gone with it, and well within the 30 s lease another runner answers.
    let ledger = read_ledger(&r1.data_dir).expect("r1 ledger");
    assert!(
        ledger
            .iter()
            .any(|e| e.session_id == id && e.event == "end")
    );
    revise(&server, &id, &tool_use_id, &mut seen).await;
    let resource = server.session(&id).await.expect("resource");
    assert_eq!(runner_of(&resource), r2.lease_name, "{resource}");
    assert_log_whole(&server, &id).await;
}

/// Archive a session as soon as its plan is up; its remote agent stops and the lease goes.
async fn archive_stops_the_remote_agent(server: &ServerProcess) {
    let token = runner_token(server, "ci").await.expect("token");
    let r1 = runner(server, &token, "r1").await;
    for round in 0..3 {
        let (id, _, _) = planned(server, &format!("fix the login bug {round}")).await;
        let (code, _) = server
            .post(&format!("/v1/sessions/{id}/archive"), &json!({}))
            .await
            .expect("archive");
        assert_eq!(code, 200);
        let mut released = false;
        for _ in 0..200 {
            let resource = server.session(&id).await.expect("resource");
            if resource["runner"].is_null() {
                released = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            released,
            "round {round}: the archived session's lease was never released:\n{}\n{}",
            server.log(),
            r1.log()
        );
        let ledger = read_ledger(&r1.data_dir).expect("ledger");
        assert!(
            ledger
                .iter()
                .any(|e| e.session_id == id && e.event == "end"),
            "the remote agent ended"
        );
    }
}

#[tokio::test]
async fn archiving_stops_a_remote_agent_on_sqlite() {
    archive_stops_the_remote_agent(&fleet_server("30").await).await;
}

#[tokio::test]
async fn archiving_stops_a_remote_agent_on_postgres() {
    let pg = ultraplan_tests::faults::Postgres::launch()
        .await
        .expect("postgres");
    let server = ServerProcess::start(&[
        ("DATABASE_URL", pg.url.as_str()),
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "offline"),
        ("ULTRAPLAN_PARK_AFTER_SECONDS", "1"),
    ])
    .await
    .expect("server");
    archive_stops_the_remote_agent(&server).await;
}
