//! The two timeout outcomes of the poll loop (docs/ARCHITECTURE.md §3.4) through the real
//! server: a short `timeout_seconds` flag, the real detached poller started by `ultraplan
//! launch`, and the server enforcing the same limit from the session's creation. Whichever side
//! notices the limit first, the user sees `timeout_pending` when a plan waited for review and
//! `timeout_no_plan` when none came, and the session ends archived.

use std::time::Duration;

use serde_json::{Value, json};
use ultraplan_tests::fake_models::{FakeAnthropic, Reply, Script};
use ultraplan_tests::harness::ServerProcess;

use crate::poller::{
    Terminal, is_ready, pill_lines, server_with, session_status, text, wait_archived,
};

/// A server whose user's sessions may run `seconds`, and a terminal pointed at it.
async fn limited(script: Script, seconds: u64) -> (FakeAnthropic, ServerProcess, Terminal) {
    let (fake, server) = server_with(script).await;
    server
        .admin(&[
            "flags",
            "set",
            "timeout_seconds",
            &seconds.to_string(),
            "--user",
            "tester",
        ])
        .await
        .expect("flag");
    let term = Terminal::new(&server.base_url, &server.token);
    (fake, server, term)
}

/// The `result` subtypes in the server's event log.
async fn result_subtypes(server: &ServerProcess, id: &str) -> Vec<String> {
    let page = server.events(id, 0, 0).await.expect("events");
    let all = serde_json::to_value(&page.data).expect("events json");
    all.as_array()
        .map(|events| {
            events
                .iter()
                .filter(|e| e["type"] == "result")
                .filter_map(|e| e["subtype"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The watch's end as the user sees it: state file, `ultraplan status`, the logged pill, and
/// the session archived on the server with the server's own timeout result in its log.
async fn assert_timed_out(server: &ServerProcess, term: &Terminal, id: &str, reason: &str) {
    let state = term
        .wait_state(id, "a failed outcome", |s| s["outcome"] == "failed")
        .await;
    assert_eq!(state["failure"], reason, "{state}");
    assert_eq!(state["archived"], true, "{state}");
    let pill = format!("◇ ultraplan ended: {reason}");
    let status = term.run(&["status", id]);
    assert!(text(&status).contains(&pill), "{}", text(&status));
    let log = term.log(id);
    assert!(
        pill_lines(&log).iter().any(|l| l.starts_with(&pill)),
        "log:\n{log}"
    );
    wait_archived(server, id).await;
    assert_eq!(
        result_subtypes(server, id).await,
        ["error_timeout"],
        "the server enforced the same limit"
    );
}

#[tokio::test]
async fn a_plan_left_unreviewed_past_the_limit_is_timeout_pending() {
    let script = Script::from_fn(|_| Reply::exit_plan_mode("# Plan\n1. Reject empty users"));
    // Long enough for the plan to be ready first on a loaded machine.
    let (_fake, server, term) = limited(script, 20).await;
    let id = term.launch();

    let state = term.wait_state(&id, "plan_ready", is_ready).await;
    assert_eq!(state["pill"], "◆ ultraplan ready", "{state}");
    // Nobody reviews it.
    assert_timed_out(&server, &term, &id, "timeout_pending").await;
    let state = term.state(&id).expect("state");
    let message = state["failure_message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Timed out waiting for your review") && message.contains("20 s"),
        "{state}"
    );
    let log = term.log(&id);
    let pills = pill_lines(&log);
    let ready = pills
        .iter()
        .position(|l| l.starts_with("◆ ultraplan ready"));
    let ended = pills.iter().position(|l| l.contains("timeout_pending"));
    assert!(
        matches!((ready, ended), (Some(r), Some(e)) if r < e),
        "pill lines: {pills:?}"
    );
    // In the limit's last fifth (4 s of 20) the pill warned that the plan expires.
    let warned = pills
        .iter()
        .position(|l| l.starts_with("◆ ultraplan ready · expires in "));
    assert!(
        matches!((ready, warned, ended), (Some(r), Some(w), Some(e)) if r < w && w < e),
        "pill lines: {pills:?}"
    );
    assert_the_plan_is_kept(&term, &id);
}

/// The plan nobody reviewed is not lost: the poller saved it in the repository the session
/// was launched from and recorded where, `status` names the file, and `pull` of the archived
/// session prints the plan and where it is.
fn assert_the_plan_is_kept(term: &Terminal, id: &str) {
    let repo = term.repo.canonicalize().expect("repo");
    let want = repo.join(format!(".ultraplan/plans/{id}.md"));
    let saved = std::fs::read_to_string(&want).expect("the poller saved the plan");
    assert_eq!(saved, "# Plan\n1. Reject empty users\n");
    let state = term.state(id).expect("state");
    let recorded = state["plan_file"].as_str().map(std::path::PathBuf::from);
    let recorded = recorded.and_then(|p| p.canonicalize().ok());
    assert_eq!(recorded.as_ref(), Some(&want), "{state}");
    let status = text(&term.run(&["status", id]));
    let name = format!(".ultraplan/plans/{id}.md");
    assert!(
        status.contains("The last plan was saved to") && status.contains(&name),
        "{status}"
    );
    let pull = term.run(&["pull", id]);
    assert!(pull.status.success(), "{}", text(&pull));
    let stdout = String::from_utf8_lossy(&pull.stdout);
    assert_eq!(
        stdout.trim_end(),
        "# Plan\n1. Reject empty users",
        "{}",
        text(&pull)
    );
    let stderr = String::from_utf8_lossy(&pull.stderr);
    assert!(
        stderr.contains("timed out before its plan was reviewed") && stderr.contains(&name),
        "{stderr}"
    );
    // Pulling did not disturb the saved plan.
    assert_eq!(std::fs::read_to_string(&want).expect("plan"), saved);
    // A lost file is written again from the server's copy of the plan.
    std::fs::remove_file(&want).expect("remove");
    let again = term.run(&["pull", id]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(std::fs::read_to_string(&want).expect("saved again"), saved);
}

#[tokio::test]
async fn an_agent_that_never_plans_within_the_limit_is_timeout_no_plan() {
    // Explores for ever, a little at a time.
    let script = Script::from_fn(|_| {
        Reply::tool_use("Glob", json!({"pattern": "**/*.rs"})).slow(Duration::from_millis(400))
    });
    let (_fake, server, term) = limited(script, 4).await;
    let id = term.launch();

    assert_timed_out(&server, &term, &id, "timeout_no_plan").await;
    let state = term.state(&id).expect("state");
    assert_eq!(state["plan"], Value::Null, "{state}");
    let message = state["failure_message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Timed out before the agent produced a plan"),
        "{state}"
    );
    assert_eq!(state["plan_file"], Value::Null, "{state}");
    assert!(
        !term.repo.join(".ultraplan/plans").exists(),
        "nothing to save"
    );
    // The server saw the agent at work until the limit: no plan was ever proposed.
    let (status, plans) = server
        .get(&format!("/v1/sessions/{id}/plans"))
        .await
        .expect("plans");
    assert_eq!(status, 200, "{plans}");
    assert_eq!(plans, json!([]), "no plan");
    assert_eq!(session_status(&server, &id).await, "archived");
}
