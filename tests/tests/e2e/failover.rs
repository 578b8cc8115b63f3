//! Two server replicas on one PostgreSQL, each with its own runner, sharing a blob store. A
//! replica killed with `kill -9` while its session waits for a decision loses the session to
//! the other one once its lease lapses: the decision, posted to the survivor, is answered by
//! the survivor's agent, resumed from the event log.

use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, plan_call};

/// Short enough for the test, long enough for heartbeats on a busy machine.
const LEASE_SECONDS: &str = "4";

fn env<'a>(pg: &'a str, blobs: &'a str, name: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("DATABASE_URL", pg),
        ("ULTRAPLAN_BLOB_STORE", blobs),
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
        ("ULTRAPLAN_RUNNER_NAME", name),
        ("ULTRAPLAN_LEASE_SECONDS", LEASE_SECONDS),
    ]
}

fn plans(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(plan_call)
        .map(|(id, _)| id)
        .collect()
}

#[tokio::test]
async fn a_killed_replicas_session_is_resumed_by_the_other_and_takes_its_decision() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let mut first = ServerProcess::start(&env(&pg.url, &blob_url, "runner-a"))
        .await
        .expect("first replica");
    let id = first
        .demo_session("Fix the login bug: passwords are never checked")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let plan = first
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan");
    let (tool_use_id, _) = plan_call(&plan).expect("plan call");
    let resource = first.session(&id).await.expect("resource");
    assert_eq!(resource["session_status"], "requires_action");
    assert_eq!(resource["runner"], "runner-a", "{resource}");

    let second = ServerProcess::start_replica(&env(&pg.url, &blob_url, "runner-b"), &first.token)
        .await
        .expect("second replica");
    first.kill9().await.expect("kill -9");

    let rejected = second
        .decide(
            &id,
            &tool_use_id,
            serde_json::json!({"decision": "reject", "feedback": "Also cover the empty password case."}),
        )
        .await
        .expect("decide");
    assert_eq!(rejected, 200);
    let revised = second
        .wait_for(&id, &mut seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != tool_use_id)
        })
        .await
        .expect("the survivor's agent revises the plan");
    assert!(revised.id > plan.id);

    // The log is whole: ids 1..n, no duplicates, one resume naming the new runner.
    let mut all: Vec<Event> = Vec::new();
    loop {
        let after = all.last().map_or(0, |e| e.id);
        let page = second.events(&id, after, 0).await.expect("events");
        let more = page.has_more;
        all.extend(page.data);
        if !more {
            break;
        }
    }
    let ids: Vec<i64> = all.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    let resumed: Vec<_> = all
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::System(s) if s.subtype == "resumed" => s.message.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert!(resumed[0].contains("runner-b"), "{resumed:?}");
    assert_eq!(
        plans(&all).len(),
        2,
        "one plan, one revision: {:?}",
        plans(&all)
    );

    let resource = second.session(&id).await.expect("resource");
    assert_eq!(resource["runner"], "runner-b", "{resource}");
    assert!(resource["requeued_at"].is_string(), "{resource}");
    let metrics = reqwest::get(format!("{}/metrics", second.base_url))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("ultraplan_lease_expiries_total 1"),
        "{metrics}"
    );
}

/// Send a signal to a process (SIGSTOP / SIGCONT) with kill(1).
fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .expect("kill(1)");
    assert!(status.success(), "kill -{sig} {pid}");
}

/// Until the session's resource names `runner` (bounded).
async fn wait_runner(server: &ServerProcess, id: &str, runner: &str) {
    for _ in 0..300 {
        let resource = server.session(id).await.expect("resource");
        if resource["runner"] == runner {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("{runner} never took the session over:\n{}", server.log());
}

#[tokio::test]
async fn a_frozen_replica_past_its_lease_can_never_write_again() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let first = ServerProcess::start(&env(&pg.url, &blob_url, "runner-a"))
        .await
        .expect("first replica");
    let id = first
        .demo_session("Fix the login bug: passwords are never checked")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let plan = first
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan");
    let (tool_use_id, _) = plan_call(&plan).expect("plan call");
    let second = ServerProcess::start_replica(&env(&pg.url, &blob_url, "runner-b"), &first.token)
        .await
        .expect("second replica");

    // Freeze the first replica (its agent stays alive, waiting) until its lease lapses and the
    // second takes the session over; decide there; then let the first run again.
    let pid = first.pid().expect("pid");
    signal(pid, "STOP");
    wait_runner(&second, &id, "runner-b").await;
    let rejected = second
        .decide(
            &id,
            &tool_use_id,
            serde_json::json!({"decision": "reject", "feedback": "Also cover the empty password case."}),
        )
        .await
        .expect("decide");
    assert_eq!(rejected, 200);
    signal(pid, "CONT");
    let revised = second
        .wait_for(&id, &mut seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != tool_use_id)
        })
        .await
        .expect("the new holder's agent revises the plan");

    // The thawed replica finds its lease gone and stops its agent, writing nothing.
    for _ in 0..300 {
        if first.log().contains("the lease was lost") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        first.log().contains("the lease was lost"),
        "the first replica noticed:\n{}",
        first.log()
    );
    let resource = second.session(&id).await.expect("resource");
    assert_eq!(resource["runner"], "runner-b", "{resource}");
    let mut all: Vec<Event> = Vec::new();
    loop {
        let after = all.last().map_or(0, |e| e.id);
        let page = second.events(&id, after, 0).await.expect("events");
        let more = page.has_more;
        all.extend(page.data);
        if !more {
            break;
        }
    }
    let ids: Vec<i64> = all.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    assert_eq!(
        plans(&all),
        vec![tool_use_id.clone(), plan_call(&revised).expect("call").0],
        "only the holder's agent wrote after the takeover"
    );
    let resumed = all
        .iter()
        .filter(|e| matches!(&e.body, EventBody::System(s) if s.subtype == "resumed"))
        .count();
    assert_eq!(resumed, 1);
}

#[tokio::test]
async fn a_replica_shutting_down_hands_its_sessions_back_at_once() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    // Leases far longer than the test: only a hand-back lets the other replica in.
    let long = |name| {
        let mut e = env(&pg.url, &blob_url, name);
        e.retain(|(k, _)| *k != "ULTRAPLAN_LEASE_SECONDS");
        e.push(("ULTRAPLAN_LEASE_SECONDS", "3600"));
        e
    };
    let first = ServerProcess::start(&long("runner-a"))
        .await
        .expect("first");
    let id = first
        .demo_session("Fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let plan = first
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan");
    let (tool_use_id, _) = plan_call(&plan).expect("plan call");
    let second = ServerProcess::start_replica(&long("runner-b"), &first.token)
        .await
        .expect("second");
    signal(first.pid().expect("pid"), "TERM");
    wait_runner(&second, &id, "runner-b").await;
    let code = second
        .decide(
            &id,
            &tool_use_id,
            serde_json::json!({"decision": "reject", "feedback": "Smaller."}),
        )
        .await
        .expect("decide");
    assert_eq!(code, 200);
    second
        .wait_for(&id, &mut seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != tool_use_id)
        })
        .await
        .expect("revised on the other replica");
    assert!(first.log().contains("runner drained"), "{}", first.log());
    let note = seen
        .iter()
        .find_map(|e| match &e.body {
            EventBody::System(s) if s.subtype == "resumed" => s.message.clone(),
            _ => None,
        })
        .expect("a resumed note");
    assert!(
        note.contains("stopped") && note.contains("runner-b"),
        "{note}"
    );
}

#[tokio::test]
async fn replicas_without_a_runner_leave_sessions_to_those_with_one() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let mut front_env = env(&pg.url, &blob_url, "front");
    front_env.push(("ULTRAPLAN_LOCAL_RUNNER", "off"));
    let front = ServerProcess::start(&front_env).await.expect("front");
    let (_, eligibility) = front.get("/v1/eligibility").await.expect("eligibility");
    assert_eq!(eligibility["eligible"], true, "{eligibility}");
    let worker = ServerProcess::start_replica(&env(&pg.url, &blob_url, "worker"), &front.token)
        .await
        .expect("worker");
    let id = front
        .demo_session("Fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    front
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("the worker's agent plans a session created on the front");
    let resource = front.session(&id).await.expect("resource");
    assert_eq!(resource["runner"], "worker", "{resource}");
    drop(worker);

    // SQLite belongs to one process: a server with no runner of its own refuses to start.
    let data = tempfile::tempdir().expect("data dir");
    let out = std::process::Command::new(
        ultraplan_tests::harness::workspace_bin("ultraplan-server").expect("server binary"),
    )
    .args(["serve", "--no-local-runner", "--bind", "127.0.0.1:0"])
    .env("ULTRAPLAN_DATA_DIR", data.path())
    .env_remove("DATABASE_URL")
    .output()
    .expect("run the server");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--no-local-runner needs a PostgreSQL"),
        "{stderr}"
    );
}
