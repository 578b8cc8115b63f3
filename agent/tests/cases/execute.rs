//! Execution mode end to end: the agent resumes from an approved plan, changes the bundle with
//! Write, Edit and Bash, has the verifier check the change in a copy, and exits.

use std::time::{Duration, Instant};

use serde_json::json;
use ultraplan_protocol::api::Decision;
use ultraplan_protocol::frames::{AgentFrame, AgentMode, ServerFrame, StartSettings};
use ultraplan_protocol::model::StopReason;
use ultraplan_protocol::plan_text::decision_tool_result;
use ultraplan_protocol::session::PromptVariant;
use ultraplan_protocol::{ContentBlock, EventBody};

use super::support::{
    AgentProcess, HANG_GUARD, bundle, message_text, new_session, response, say, settings,
};
use super::{PROMPT, kinds, result_of};

const PLAN: &str = "# Plan\n1. Reject names that are blank after trimming in `login`.\n2. Add \
`src/validate.rs` with `is_blank`.";

const EXECUTION_TOOLS: [&str; 7] = ["Glob", "Grep", "Read", "Write", "Edit", "Bash", "TodoWrite"];
const VERIFIER_TOOLS: [&str; 4] = ["Glob", "Grep", "Read", "Bash"];

fn execute_settings() -> StartSettings {
    StartSettings {
        mode: AgentMode::Execute,
        ..settings(PromptVariant::SimplePlan, None)
    }
}

/// The plan session's transcript, ending with the approval of `PLAN`.
fn approved_session() -> Vec<EventBody> {
    let mut transcript = new_session(PROMPT);
    let (approval, is_error) = decision_tool_result(&Decision::Approve { plan: None }, PLAN);
    transcript.extend([
        EventBody::assistant(vec![ContentBlock::tool_use(
            "p_1",
            "ExitPlanMode",
            json!({ "plan": PLAN }),
        )]),
        EventBody::tool_result("p_1", &approval, is_error),
    ]);
    transcript
}

/// Live (non-zombie) processes of the process group `pgid`, from /proc.
fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.len() > 3 && fields[0] != "Z" && fields[2] == pgid.to_string()
        })
        .collect()
}

/// Polls until `done` gives a value; fails after the hang guard.
fn eventually<T>(what: &str, done: impl Fn() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(start.elapsed() < HANG_GUARD, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn first_request_matches_snapshot() {
    let repo = bundle();
    let mut agent = AgentProcess::spawn(repo.path(), &[]);
    agent.open(execute_settings(), approved_session());
    let (id, request, events) = agent.expect_request();
    assert_eq!(id, "req_1");
    assert!(events.is_empty(), "{events:?}");
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, EXECUTION_TOOLS);
    let text = serde_json::to_string(&request).expect("json");
    assert!(
        !text.to_lowercase().contains("ultraplan"),
        "names the product"
    );
    insta::assert_json_snapshot!("first_request_execute", request);
    agent.send(&ServerFrame::Stop {
        reason: "test".into(),
    });
    assert_eq!(kinds(&agent.until_done()), ["done"]);
    assert_eq!(agent.wait(), 0);
}

#[test]
fn implements_the_plan_with_write_edit_and_bash_then_exits() {
    let repo = bundle();
    let canary = ("ULTRAPLAN_TEST_CANARY", "canary-value-must-not-leak");
    let mut agent = AgentProcess::spawn(repo.path(), &[canary]);
    agent.open(execute_settings(), approved_session());
    let (id, _, _) = agent.expect_request();
    let todos = json!({"todos": [
        {"content": "Trim names in login", "status": "in_progress"},
        {"content": "Add src/validate.rs", "status": "pending"}
    ]});
    let edit = json!({
        "file_path": "src/auth.rs",
        "old_string": "!user.is_empty()",
        "new_string": "!user.trim().is_empty()"
    });
    let write = json!({
        "file_path": "src/validate.rs",
        "content": "pub fn is_blank(s: &str) -> bool {\n    s.trim().is_empty()\n}\n"
    });
    let command = "cat src/auth.rs src/validate.rs; env; pwd; cd /tmp";
    agent.respond(
        &id,
        response(
            vec![
                ContentBlock::tool_use("t_todo", "TodoWrite", todos),
                ContentBlock::tool_use("t_edit", "Edit", edit),
                ContentBlock::tool_use("t_write", "Write", write),
                ContentBlock::tool_use("t_bash", "Bash", json!({ "command": command })),
                ContentBlock::tool_use("t_pwd", "Bash", json!({ "command": "pwd; exit 4" })),
            ],
            StopReason::ToolUse,
        ),
    );
    let (id, request, _) = agent.expect_request();
    let results = message_text(request.messages.last().expect("message"));
    assert!(
        results.contains("Edited src/auth.rs: 1 replacement."),
        "{results}"
    );
    assert!(
        results.contains("Created src/validate.rs (61 bytes)"),
        "{results}"
    );
    assert!(
        results.contains("!user.trim().is_empty()"),
        "edit ran first: {results}"
    );
    assert!(
        results.contains("pub fn is_blank"),
        "write ran first: {results}"
    );
    assert!(
        results.contains("PATH=/usr/local/bin:/usr/bin:/bin"),
        "{results}"
    );
    assert!(!results.contains("canary-value"), "env leaked: {results}");
    assert!(!results.contains("ULTRAPLAN_"), "env leaked: {results}");
    let root = std::fs::canonicalize(repo.path()).expect("canonical");
    let pwd_lines = results
        .lines()
        .filter(|l| *l == root.display().to_string())
        .count();
    assert_eq!(pwd_lines, 2, "both calls start at the root: {results}");
    assert!(results.contains("Exit code 4"), "{results}");

    agent.respond(
        &id,
        say(
            "Login now trims names; added src/validate.rs. Tests: none run.",
            StopReason::EndTurn,
        ),
    );
    // It changed files, so the verifier checks them before the execution ends.
    let (id, request, events) = agent.expect_request();
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, VERIFIER_TOOLS);
    assert_eq!(events.len(), 5, "{events:?}");
    let brief = message_text(&request.messages[0]);
    for needle in ["- src/auth.rs\n", "- src/validate.rs\n", "Bash commands"] {
        assert!(brief.contains(needle), "{needle}: {brief}");
    }
    agent.respond(
        &id,
        say("Both steps are done.\nVERDICT: PASS", StopReason::EndTurn),
    );
    let frames = agent.until_done();
    assert_eq!(
        kinds(&frames),
        [
            "assistant",
            "system:task_finished",
            "system:verification",
            "user",
            "result:success",
            "done"
        ]
    );
    assert_eq!(
        result_of(&frames).as_deref(),
        Some("Login now trims names; added src/validate.rs. Tests: none run.")
    );
    assert_eq!(agent.wait(), 0);
    let auth = std::fs::read_to_string(repo.path().join("src/auth.rs")).expect("auth");
    assert!(auth.contains("!user.trim().is_empty()"), "{auth}");
    assert!(repo.path().join("src/validate.rs").is_file());
}

#[test]
fn stop_kills_a_running_command() {
    let repo = bundle();
    let mut agent = AgentProcess::spawn(repo.path(), &[]);
    agent.open(execute_settings(), approved_session());
    let (id, _, _) = agent.expect_request();
    let command = "echo $$ > pgid.txt; sleep 1000 & sleep 1000";
    agent.respond(
        &id,
        response(
            vec![ContentBlock::tool_use(
                "t_hang",
                "Bash",
                json!({ "command": command }),
            )],
            StopReason::ToolUse,
        ),
    );
    let pgid_file = repo.path().join("pgid.txt");
    let pgid: i32 = eventually("the command started", || {
        std::fs::read_to_string(&pgid_file)
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    eventually("both sleeps run", || {
        (group_members(pgid).len() >= 2).then_some(())
    });
    agent.send(&ServerFrame::Stop {
        reason: "archived".into(),
    });
    let frames = agent.until_done();
    assert!(
        matches!(frames.last(), Some(AgentFrame::Done { .. })),
        "{frames:?}"
    );
    assert_eq!(agent.wait(), 0);
    eventually("the command's processes are gone", || {
        group_members(pgid).is_empty().then_some(())
    });
}

#[test]
fn resuming_mid_execution_does_not_repeat_a_command() {
    let repo = bundle();
    let mut agent = AgentProcess::spawn(repo.path(), &[]);
    let mut transcript = approved_session();
    transcript.push(EventBody::assistant(vec![
        ContentBlock::tool_use(
            "t_bash",
            "Bash",
            json!({"command": "echo again >> log.txt"}),
        ),
        ContentBlock::tool_use("t_read", "Read", json!({"file_path": "README.md"})),
    ]));
    agent.open(execute_settings(), transcript);
    let (_, request, events) = agent.expect_request();
    assert_eq!(events.len(), 1, "the answers are logged: {events:?}");
    let results = message_text(request.messages.last().expect("message"));
    assert!(results.contains("This call was interrupted"), "{results}");
    assert!(results.contains("A demo service."), "{results}");
    assert!(!repo.path().join("log.txt").exists(), "not re-run");
    agent.send(&ServerFrame::Stop {
        reason: "test".into(),
    });
    agent.until_done();
    assert_eq!(agent.wait(), 0);
}

#[test]
fn the_verifier_runs_the_tests_in_a_copy_and_its_verdict_is_logged() {
    let repo = bundle();
    let test_script = "echo running tests\necho 'FAIL: login_rejects_blank_names'\nexit 1\n";
    std::fs::write(repo.path().join("test.sh"), test_script).expect("test.sh");
    std::fs::create_dir(repo.path().join(".git")).expect(".git");
    std::fs::write(repo.path().join(".git/HEAD"), "ref: refs/heads/main\n").expect("HEAD");
    let mut agent = AgentProcess::spawn(repo.path(), &[]);
    agent.open(execute_settings(), approved_session());

    // The execution: one Edit, then the end of its turn.
    let (id, _, _) = agent.expect_request();
    let edit = json!({
        "file_path": "src/auth.rs",
        "old_string": "!user.is_empty()",
        "new_string": "!user.trim().is_empty()"
    });
    agent.respond(
        &id,
        response(
            vec![ContentBlock::tool_use("t_edit", "Edit", edit)],
            StopReason::ToolUse,
        ),
    );
    let (id, _, _) = agent.expect_request();
    agent.respond(&id, say("Login now trims names.", StopReason::EndTurn));

    // The verifier: started by the harness under its own Task tool_use.
    let (id, request, events) = agent.expect_request();
    let task = events
        .iter()
        .find_map(|e| match e {
            EventBody::Assistant(a) => a.message.content.iter().find_map(|b| match b {
                ContentBlock::ToolUse {
                    id, name, input, ..
                } if name == "Task" => Some((id.clone(), input.clone())),
                _ => None,
            }),
            _ => None,
        })
        .expect("the harness's Task tool_use");
    let (task_id, input) = task;
    assert_eq!(input["subagent_type"], "verifier");
    assert_eq!(input["started_by"], "ultraplan");
    assert_eq!(
        input["description"],
        "Verify the execution against the approved plan"
    );
    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, VERIFIER_TOOLS);
    let brief = message_text(&request.messages[0]);
    assert!(brief.contains(PLAN), "{brief}");
    assert!(brief.contains("- src/auth.rs\n"), "{brief}");

    let command = "pwd; ls -a; touch verifier-was-here; sh test.sh";
    agent.respond(
        &id,
        response(
            vec![ContentBlock::tool_use(
                "v_bash",
                "Bash",
                json!({ "command": command }),
            )],
            StopReason::ToolUse,
        ),
    );
    let (id, request, events) = agent.expect_request();
    assert!(
        events
            .iter()
            .all(|e| e.parent_tool_use_id() == Some(task_id.as_str())),
        "{events:?}"
    );
    let output = message_text(request.messages.last().expect("message"));
    assert!(
        output.contains("FAIL: login_rejects_blank_names"),
        "{output}"
    );
    assert!(output.contains("Exit code 1"), "{output}");
    assert!(
        output.contains("test.sh") && !output.contains(".git"),
        "{output}"
    );
    let copy = std::path::PathBuf::from(output.lines().next().expect("pwd"));
    let root = std::fs::canonicalize(repo.path()).expect("canonical");
    assert_ne!(copy, root, "the verifier runs in a copy");
    assert!(copy.is_absolute(), "{output}");

    let report = "Ran `sh test.sh`: exit code 1.\nFailing: login_rejects_blank_names.\n\
                  VERDICT: FAIL";
    agent.respond(&id, say(report, StopReason::EndTurn));
    let frames = agent.until_done();
    assert_eq!(
        kinds(&frames),
        [
            "assistant",
            "system:task_finished",
            "system:verification",
            "user",
            "result:success",
            "done"
        ]
    );
    let verification = frames
        .iter()
        .find_map(|f| match f {
            AgentFrame::Event {
                event: EventBody::System(s),
            } if s.subtype == "verification" => Some(s.clone()),
            _ => None,
        })
        .expect("verification");
    assert_eq!(verification.message.as_deref(), Some("Verification: FAIL"));
    assert_eq!(
        verification.data,
        json!({
            "verdict": "FAIL",
            "evidence": "Ran `sh test.sh`: exit code 1.\nFailing: login_rejects_blank_names."
        })
    );
    assert_eq!(
        result_of(&frames).as_deref(),
        Some("Login now trims names.")
    );
    assert_eq!(agent.wait(), 0);

    assert!(
        !repo.path().join("verifier-was-here").exists(),
        "the verifier's files stay in the copy"
    );
    assert!(!copy.exists(), "the copy is removed");
    let auth = std::fs::read_to_string(repo.path().join("src/auth.rs")).expect("auth");
    assert!(auth.contains("!user.trim().is_empty()"), "{auth}");
}
