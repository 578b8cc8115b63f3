//! Server replicas on one PostgreSQL, each with its own runner, sharing a blob store. A replica
//! that dies, freezes past its lease or shuts down loses its waiting session to another; the
//! decision posted there is answered by that replica's agent, resumed from the event log, and
//! the frozen one can never write again. A replica without a runner leaves its sessions to
//! those with one.

use serde_json::json;
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, plan_call};

use crate::faults::all_events;

/// Short enough for the test, long enough for heartbeats on a busy machine.
const LEASE_SECONDS: &str = "4";

/// A throwaway PostgreSQL and blob store the replicas share.
struct Shared {
    pg: Postgres,
    blob_url: String,
    _blobs: tempfile::TempDir,
}

impl Shared {
    async fn new() -> Self {
        let pg = Postgres::launch().await.expect("throwaway postgres");
        let blobs = tempfile::tempdir().expect("blob dir");
        let blob_url = format!("file://{}", blobs.path().display());
        Shared {
            pg,
            blob_url,
            _blobs: blobs,
        }
    }

    /// A replica's environment: runner `name`, leases of `lease` seconds.
    fn env<'a>(&'a self, name: &'a str, lease: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("DATABASE_URL", self.pg.url.as_str()),
            ("ULTRAPLAN_BLOB_STORE", self.blob_url.as_str()),
            ("ULTRAPLAN_RUNNER", "bwrap"),
            ("ULTRAPLAN_MODEL", "offline"),
            ("ULTRAPLAN_RUNNER_NAME", name),
            ("ULTRAPLAN_LEASE_SECONDS", lease),
        ]
    }
}

/// A session whose first plan waits for its decision, as `server` saw it.
struct Waiting {
    id: String,
    tool_use_id: String,
    plan: Event,
    seen: Vec<Event>,
}

async fn waiting_session(server: &ServerProcess) -> Waiting {
    let id = server
        .demo_session("Fix the login bug: passwords are never checked")
        .await
        .expect("session");
    let mut seen = Vec::new();
    let plan = server
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan");
    let (tool_use_id, _) = plan_call(&plan).expect("plan call");
    Waiting {
        id,
        tool_use_id,
        plan,
        seen,
    }
}

/// Reject the plan through `server` and wait there for the revision.
async fn reject_and_revise(server: &ServerProcess, session: &mut Waiting) -> Event {
    let decision = json!({"decision": "reject", "feedback": "Also cover the empty password case."});
    let code = server
        .decide(&session.id, &session.tool_use_id, decision)
        .await
        .expect("decide");
    assert_eq!(code, 200);
    let first = session.tool_use_id.clone();
    server
        .wait_for(&session.id, &mut session.seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != first)
        })
        .await
        .expect("the holder's agent revises the plan")
}

fn plans(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(plan_call)
        .map(|(id, _)| id)
        .collect()
}

fn resumed_notes(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::System(s) if s.subtype == "resumed" => s.message.clone(),
            _ => None,
        })
        .collect()
}

/// Every event, with ids 1..n without gaps or repeats.
async fn whole_log(server: &ServerProcess, id: &str) -> Vec<Event> {
    let all = all_events(server, id).await;
    let ids: Vec<i64> = all.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    all
}

/// Send a signal to a process (SIGSTOP, SIGCONT, SIGTERM) with kill(1).
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
async fn a_killed_replicas_session_is_resumed_by_the_other_and_takes_its_decision() {
    let shared = Shared::new().await;
    let mut first = ServerProcess::start(&shared.env("runner-a", LEASE_SECONDS))
        .await
        .expect("first replica");
    let mut session = waiting_session(&first).await;
    let resource = first.session(&session.id).await.expect("resource");
    assert_eq!(resource["session_status"], "requires_action");
    assert_eq!(resource["runner"], "runner-a", "{resource}");

    let second = ServerProcess::start_replica(&shared.env("runner-b", LEASE_SECONDS), &first.token)
        .await
        .expect("second replica");
    first.kill9().await.expect("kill -9");
    let revised = reject_and_revise(&second, &mut session).await;
    assert!(revised.id > session.plan.id);

    // The log is whole, with one resume naming the new runner.
    let all = whole_log(&second, &session.id).await;
    let resumed = resumed_notes(&all);
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert!(resumed[0].contains("runner-b"), "{resumed:?}");
    assert_eq!(
        plans(&all).len(),
        2,
        "one plan, one revision: {:?}",
        plans(&all)
    );

    let resource = second.session(&session.id).await.expect("resource");
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

#[tokio::test]
async fn a_frozen_replica_past_its_lease_can_never_write_again() {
    let shared = Shared::new().await;
    let first = ServerProcess::start(&shared.env("runner-a", LEASE_SECONDS))
        .await
        .expect("first replica");
    let mut session = waiting_session(&first).await;
    let second = ServerProcess::start_replica(&shared.env("runner-b", LEASE_SECONDS), &first.token)
        .await
        .expect("second replica");

    // Freeze the first replica (its agent stays alive, waiting) until its lease lapses and the
    // second takes the session over; decide there; then let the first run again.
    let pid = first.pid().expect("pid");
    signal(pid, "STOP");
    wait_runner(&second, &session.id, "runner-b").await;
    let code = second
        .decide(
            &session.id,
            &session.tool_use_id,
            json!({"decision": "reject", "feedback": "Also cover the empty password case."}),
        )
        .await
        .expect("decide");
    assert_eq!(code, 200);
    signal(pid, "CONT");
    let first_call = session.tool_use_id.clone();
    let revised = second
        .wait_for(&session.id, &mut session.seen, |e| {
            plan_call(e).is_some_and(|(call, _)| call != first_call)
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
    let resource = second.session(&session.id).await.expect("resource");
    assert_eq!(resource["runner"], "runner-b", "{resource}");
    let all = whole_log(&second, &session.id).await;
    assert_eq!(
        plans(&all),
        vec![
            session.tool_use_id.clone(),
            plan_call(&revised).expect("call").0
        ],
        "only the holder's agent wrote after the takeover"
    );
    assert_eq!(resumed_notes(&all).len(), 1);
}

#[tokio::test]
async fn a_replica_shutting_down_hands_its_sessions_back_at_once() {
    let shared = Shared::new().await;
    // Leases far longer than the test: only a hand-back lets the other replica in.
    let first = ServerProcess::start(&shared.env("runner-a", "3600"))
        .await
        .expect("first");
    let mut session = waiting_session(&first).await;
    let second = ServerProcess::start_replica(&shared.env("runner-b", "3600"), &first.token)
        .await
        .expect("second");
    signal(first.pid().expect("pid"), "TERM");
    wait_runner(&second, &session.id, "runner-b").await;
    reject_and_revise(&second, &mut session).await;
    assert!(first.log().contains("runner drained"), "{}", first.log());
    let notes = resumed_notes(&session.seen);
    let note = notes.first().expect("a resumed note");
    assert!(
        note.contains("stopped") && note.contains("runner-b"),
        "{note}"
    );
}

#[tokio::test]
async fn replicas_without_a_runner_leave_sessions_to_those_with_one() {
    let shared = Shared::new().await;
    let mut front_env = shared.env("front", LEASE_SECONDS);
    front_env.push(("ULTRAPLAN_LOCAL_RUNNER", "off"));
    let front = ServerProcess::start(&front_env).await.expect("front");
    let (_, eligibility) = front.get("/v1/eligibility").await.expect("eligibility");
    assert_eq!(eligibility["eligible"], true, "{eligibility}");
    let worker = ServerProcess::start_replica(&shared.env("worker", LEASE_SECONDS), &front.token)
        .await
        .expect("worker");
    let session = waiting_session(&front).await;
    let resource = front.session(&session.id).await.expect("resource");
    assert_eq!(resource["runner"], "worker", "{resource}");
    drop(worker);
}
