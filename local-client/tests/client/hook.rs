//! `ultraplan hook claude-code` with recorded Claude Code `UserPromptSubmit` payloads.

use std::path::Path;

use crate::support::server::{Config, SESSION_ID, Server};
use crate::support::{Home, events, git_repo, state_json};
use serde_json::Value;

/// A recorded payload, with `cwd` pointed at `repo`.
fn fixture(name: &str, repo: &Path) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/client/fixtures")
        .join(name);
    let mut payload: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    payload["cwd"] = repo.to_str().unwrap().into();
    serde_json::to_vec(&payload).unwrap()
}

fn hook(home: &Home, server: &str, input: Vec<u8>) -> std::process::Output {
    home.cmd(home.path())
        .env("ULTRAPLAN_SERVER", server)
        .env("ULTRAPLAN_NO_WATCH", "1")
        .args(["hook", "claude-code"])
        .write_stdin(input)
        .assert()
        .success()
        .get_output()
        .clone()
}

fn json_out(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_keyword_prompt_launches_and_blocks_with_the_review_url() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(Config::default(), vec![]);
    let out = hook(
        &home,
        &server.url,
        fixture("hook_ultraplan_prompt.json", &repo),
    );
    let answer = json_out(&out);
    assert_eq!(answer["decision"], "block");
    let reason = answer["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("review at {}/sessions/{SESSION_ID}", server.url)),
        "{reason}"
    );
    let created = &server.recorded().created[0];
    assert_eq!(
        created["events"][1]["message"]["content"],
        "plan: migrate the session store to postgres"
    );
    assert_eq!(created["session_context"]["repo"], "repo");
    assert_eq!(
        home.read_state(SESSION_ID).unwrap()["repo_root"],
        repo.to_str().unwrap()
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn prompts_without_a_trigger_get_no_answer() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(Config::default(), vec![]);
    for name in ["hook_plain_prompt.json", "hook_question_prompt.json"] {
        let out = hook(&home, &server.url, fixture(name, &repo));
        assert!(out.stdout.is_empty(), "{name}");
    }
    assert!(server.recorded().requests.is_empty());
}

#[test]
fn a_launch_failure_blocks_with_the_reason() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let config = Config {
        eligible: false,
        reasons: vec![serde_json::json!({"code": "no_runner", "message": "No runner."})],
        ..Config::default()
    };
    let server = Server::start(config, vec![]);
    let answer = json_out(&hook(
        &home,
        &server.url,
        fixture("hook_ultraplan_prompt.json", &repo),
    ));
    assert_eq!(answer["decision"], "block");
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.starts_with("ultraplan could not launch"), "{reason}");
    assert!(reason.contains("No runner. (no_runner)"), "{reason}");
}

#[test]
fn a_teleported_plan_for_this_repo_is_given_once_then_archived() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(Config::default(), vec![]);
    let mut state = state_json(SESSION_ID, &server.url, Some(&repo));
    state["outcome"] = "teleport".into();
    state["plan"] = events::PLAN.into();
    home.write_state(&state);
    let other = home.path().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let out = hook(
        &home,
        &server.url,
        fixture("hook_plain_prompt.json", &other),
    );
    assert!(out.stdout.is_empty(), "another repository gets nothing");

    let answer = json_out(&hook(
        &home,
        &server.url,
        fixture("hook_plain_prompt.json", &repo),
    ));
    let output = &answer["hookSpecificOutput"];
    assert_eq!(output["hookEventName"], "UserPromptSubmit");
    assert!(
        output["additionalContext"]
            .as_str()
            .unwrap()
            .contains(events::PLAN)
    );
    assert_eq!(server.recorded().archives, 1);
    assert_eq!(home.read_state(SESSION_ID).unwrap()["handled"], "hook");

    let again = hook(&home, &server.url, fixture("hook_plain_prompt.json", &repo));
    assert!(again.stdout.is_empty(), "given once");
}

#[test]
fn other_hook_events_are_refused() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let out = home
        .cmd(home.path())
        .args(["hook", "claude-code"])
        .write_stdin(fixture("hook_stop_event.json", &repo))
        .assert()
        .code(1);
    assert!(out.get_output().stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("not Stop"));
}
