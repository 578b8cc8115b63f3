//! The scriptable session CLI against the real server (bwrap sandbox): `ultraplan wait`
//! returns 0 once the offline planner's plan is ready, `logs -f` prints the events of a running
//! session and returns when it ends, and `message` reaches the agent (the fake model receives
//! it) and is reported delivered with the id of the stored event.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use ultraplan_tests::fake_models::{FakeAnthropic, Reply, Script};
use ultraplan_tests::harness::{ServerProcess, workspace_bin};

/// The client binary with a throwaway HOME, pointed at `server`.
fn client(server: &ServerProcess, home: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(workspace_bin("ultraplan").expect("client"));
    cmd.args(args)
        .current_dir(home)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_STATE_HOME", home.join(".state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".data"))
        .env("ULTRAPLAN_SERVER", &server.base_url)
        .env("ULTRAPLAN_TOKEN", &server.token)
        .env("ULTRAPLAN_POLL_INTERVAL_MS", "100")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs the client to completion (bounded: a hung client fails the test, it does not hang it).
async fn run(server: &ServerProcess, home: &Path, args: &[&str]) -> Output {
    let output = client(server, home, args).output();
    tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .unwrap_or_else(|_| panic!("ultraplan {args:?} did not return"))
        .expect("run ultraplan")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[tokio::test]
async fn wait_for_the_offline_plan_while_logs_follow_until_the_session_is_stopped() {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
    ])
    .await
    .expect("server");
    let home = tempfile::tempdir().expect("home");
    let id = server
        .demo_session("harden the login check")
        .await
        .expect("session");
    let follower = client(&server, home.path(), &["logs", "-f", &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("logs -f");

    let out = run(
        &server,
        home.path(),
        &["wait", &id, "--until", "plan", "--json"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report = &json_lines(&out)[0];
    assert_eq!(report["outcome"], "reached", "{report}");
    assert_eq!(report["plan_ready"], true, "{report}");
    let (_, resource) = server
        .get(&format!("/v1/sessions/{id}"))
        .await
        .expect("get");
    assert_eq!(
        resource["phase"], "plan_ready",
        "the server agrees: {resource}"
    );

    let out = run(&server, home.path(), &["stop", &id, "--yes"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let logs = tokio::time::timeout(Duration::from_secs(120), follower.wait_with_output())
        .await
        .expect("logs -f returns once the session is archived")
        .expect("logs -f");
    let printed = text(&logs);
    assert_eq!(logs.status.code(), Some(0), "{printed}");
    for needle in [
        " you       harden the login check",
        " tool      ",
        " plan      ready for review: ",
    ] {
        assert!(printed.contains(needle), "{needle:?} missing:\n{printed}");
    }
    assert!(
        !printed.contains('\u{1b}'),
        "no escape sequences:\n{printed}"
    );

    let out = run(&server, home.path(), &["wait", &id, "--until", "decided"]).await;
    assert_eq!(out.status.code(), Some(4), "ended first: {}", text(&out));
    let out = run(&server, home.path(), &["message", &id, "one more thing"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("is archived"), "{}", text(&out));
    let out = run(&server, home.path(), &["logs", &id, "--json"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let records = json_lines(&out);
    assert!(records.iter().any(|r| r["kind"] == "plan"), "{records:?}");
    assert!(
        records
            .windows(2)
            .all(|w| w[0]["id"].as_i64() <= w[1]["id"].as_i64()),
        "in order: {records:?}"
    );
}

/// The model asks first; only a message that names the scheme gets a plan.
fn asking_script() -> Script {
    Script::from_fn(|req| match req.last_user_text() {
        Some(said) if said.contains("use argon2id") => {
            Reply::exit_plan_mode("# Plan\n1. Hash passwords with argon2id")
        }
        _ => Reply::text("Which password hashing scheme should the login use?"),
    })
}

#[tokio::test]
async fn a_message_reaches_the_waiting_agent_and_is_reported_delivered() {
    let fake = FakeAnthropic::start(asking_script()).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let home = tempfile::tempdir().expect("home");
    let id = server
        .demo_session("harden the login check")
        .await
        .expect("session");
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| {
            matches!(&e.body, ultraplan_protocol::EventBody::Result(r) if r.subtype == "success")
        })
        .await
        .expect("the agent asks and ends its turn");

    let out = run(
        &server,
        home.path(),
        &["message", &id, "use argon2id", "--json"],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let delivery = &json_lines(&out)[0];
    assert_eq!(delivery["delivered"], true, "{delivery}");
    assert_eq!(
        delivery["queued"], false,
        "the agent was waiting: {delivery}"
    );
    let event_id = delivery["event_id"].as_i64().expect("event id");

    let out = run(&server, home.path(), &["wait", &id, "--until", "plan"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        fake.requests().iter().any(|r| r
            .last_user_text()
            .is_some_and(|t| t.contains("use argon2id"))),
        "the model never saw the message"
    );
    let out = run(&server, home.path(), &["logs", &id, "--json"]).await;
    let records = json_lines(&out);
    let message = records
        .iter()
        .find(|r| r["kind"] == "user_message" && r["text"] == "use argon2id")
        .unwrap_or_else(|| panic!("the message is not in the timeline: {records:?}"));
    assert_eq!(message["id"], event_id, "{message}");
    let asked = records
        .iter()
        .position(|r| r["kind"] == "assistant_text")
        .expect("the question");
    let plan = records
        .iter()
        .position(|r| r["kind"] == "plan")
        .expect("the plan");
    let said = records
        .iter()
        .position(|r| r["id"] == event_id)
        .expect("the message");
    assert!(asked < said && said < plan, "{records:?}");

    let out = run(
        &server,
        home.path(),
        &["message", &id, "and keep bcrypt hashes"],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("A plan waits for your decision"),
        "{}",
        text(&out)
    );
}
