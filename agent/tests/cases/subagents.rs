//! Subagents through the real binary: the recursion guard, fork-in-fork, and a custom agent
//! from the bundle's `.claude/agents/`, restricted to its tools.

// Test setup: failing loudly is the point.
#![allow(clippy::expect_used)]

use serde_json::{Value, json};
use ultraplan_protocol::model::{ModelRequest, ModelResponse, StopReason};
use ultraplan_protocol::session::PromptVariant;
use ultraplan_protocol::{ContentBlock, EventBody};

use super::support::{AgentProcess, bundle, message_text, new_session, response, say, settings};

const AUDITOR: &str = include_str!("../../../tests/fixtures/agents/security-auditor.md");
const BROKEN: &str = include_str!("../../../tests/fixtures/agents/broken-agent.md");

fn start_with_agents() -> (tempfile::TempDir, AgentProcess) {
    let repo = bundle();
    let agents = repo.path().join(".claude/agents");
    std::fs::create_dir_all(&agents).expect("mkdir");
    std::fs::write(agents.join("security-auditor.md"), AUDITOR).expect("write");
    std::fs::write(agents.join("broken-agent.md"), BROKEN).expect("write");
    let mut agent = AgentProcess::spawn(repo.path(), &[]);
    let variant = PromptVariant::ThreeSubagentsWithCritique;
    agent.open(
        settings(variant, None),
        new_session("Audit the login flow."),
    );
    (repo, agent)
}

fn task(id: &str, kind: Option<&str>, prompt: &str) -> ContentBlock {
    let mut input = json!({"description": format!("probe {id}"), "prompt": prompt});
    if let Some(kind) = kind {
        input["subagent_type"] = Value::from(kind);
    }
    ContentBlock::tool_use(id, "Task", input)
}

fn calls(blocks: Vec<ContentBlock>) -> ModelResponse {
    response(blocks, StopReason::ToolUse)
}

fn last_text(request: &ModelRequest) -> String {
    request
        .messages
        .last()
        .map(message_text)
        .unwrap_or_default()
}

/// The tool results of a request's last message: `(id, text, is_error)`.
fn results(request: &ModelRequest) -> Vec<(String, String, bool)> {
    let Some(last) = request.messages.last() else {
        return Vec::new();
    };
    last.content
        .iter()
        .filter_map(ContentBlock::as_tool_result)
        .map(|(id, text, is_error)| (id.to_owned(), text, is_error))
        .collect()
}

/// Reads `n` model requests (in any order).
fn requests(agent: &mut AgentProcess, n: usize) -> Vec<(String, ModelRequest)> {
    (0..n)
        .map(|_| {
            let (id, request, _) = agent.expect_request();
            (id, request)
        })
        .collect()
}

fn pick(all: &[(String, ModelRequest)], needle: &str) -> (String, ModelRequest) {
    all.iter()
        .find(|(_, r)| last_text(r).contains(needle))
        .cloned()
        .unwrap_or_else(|| panic!("no request for {needle}"))
}

#[test]
fn subagents_cannot_start_subagents_and_forks_cannot_fork() {
    let (_repo, mut agent) = start_with_agents();
    let (id, _, _) = agent.expect_request();
    agent.respond(
        &id,
        calls(vec![
            task("t_explore", Some("explore"), "EXPLORE-PROBE"),
            task("t_fork", None, "FORK-PROBE"),
        ]),
    );
    let first = requests(&mut agent, 2);
    let (explore_id, explore) = pick(&first, "EXPLORE-PROBE");
    let (fork_id, fork) = pick(&first, "FORK-PROBE");
    assert!(!explore.tools.iter().any(|t| t.name == "Task"));
    insta::assert_json_snapshot!("first_request_explore_subagent", explore);
    assert!(
        fork.tools.iter().any(|t| t.name == "Task"),
        "a fork keeps the tool array"
    );
    agent.respond(
        &explore_id,
        calls(vec![task("n1", Some("explore"), "nested")]),
    );
    agent.respond(&fork_id, calls(vec![task("n2", None, "fork in fork")]));
    let second = requests(&mut agent, 2);
    let refusals: Vec<(String, String, bool)> =
        second.iter().flat_map(|(_, r)| results(r)).collect();
    let nested = refusals.iter().find(|r| r.0 == "n1").expect("n1 answered");
    assert!(nested.2, "{nested:?}");
    assert!(
        nested
            .1
            .starts_with("tool Task is not available to this agent: subagents cannot")
    );
    let forked = refusals.iter().find(|r| r.0 == "n2").expect("n2 answered");
    assert!(
        forked.2 && forked.1.contains("a fork cannot fork again"),
        "{forked:?}"
    );

    for (id, _) in &second {
        agent.respond(id, say("Nothing more to add.", StopReason::EndTurn));
    }
    let (_, main, events) = agent.expect_request();
    let notes = results(&main);
    assert_eq!(notes.len(), 2);
    assert!(
        notes
            .iter()
            .all(|n| n.1.contains("<status>completed</status>") && !n.2)
    );
    assert!(notes.iter().all(|n| n.1.contains("tool_uses: 1")));
    let sub: Vec<&EventBody> = agent
        .events
        .iter()
        .filter(|e| e.parent_tool_use_id().is_some())
        .collect();
    assert!(
        sub.len() >= 6,
        "prompt, call, refusal and answer per subagent: {sub:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EventBody::User(u) if u.parent_tool_use_id.is_none()))
    );
}

#[test]
fn a_custom_agent_from_the_bundle_is_loaded_restricted_and_used() {
    let (_repo, mut agent) = start_with_agents();
    let (id, first, events) = agent.expect_request();
    let invalid: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            EventBody::System(s) if s.subtype == "agent_definition_invalid" => s.message.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(invalid.len(), 1, "{events:#?}");
    assert!(
        invalid[0].contains(".claude/agents/broken-agent.md"),
        "{}",
        invalid[0]
    );
    let task_tool = first
        .tools
        .iter()
        .find(|t| t.name == "Task")
        .expect("Task offered");
    assert!(
        task_tool
            .description
            .contains("- security-auditor: Audits authentication")
    );

    agent.respond(
        &id,
        calls(vec![task(
            "t_audit",
            Some("security-auditor"),
            "AUDIT login",
        )]),
    );
    let (child_id, child, _) = agent.expect_request();
    let names: Vec<&str> = child.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Grep", "Read"]);
    // The notes every subagent shares come first, then the custom type's own prompt.
    assert!(child.system[0].text.starts_with("# Working as a subagent"));
    assert!(
        child.system[1]
            .text
            .starts_with("You are a security auditor."),
        "{:?}",
        child.system
    );
    agent.respond(
        &child_id,
        calls(vec![
            ContentBlock::tool_use("c1", "Glob", json!({"pattern": "**/*.rs"})),
            ContentBlock::tool_use("c2", "Grep", json!({"pattern": "fn login"})),
            ContentBlock::tool_use("c3", "Read", json!({"file_path": "src/auth.rs"})),
        ]),
    );
    let (child_id, child, _) = agent.expect_request();
    let got = results(&child);
    assert!(
        got[0].2
            && got[0]
                .1
                .starts_with("tool Glob is not available to this agent")
    );
    assert!(!got[1].2 && got[1].1.contains("src/auth.rs"), "{got:?}");
    assert!(
        !got[2].2 && got[2].1.contains("!user.is_empty()"),
        "{got:?}"
    );
    agent.respond(
        &child_id,
        say(
            "Finding: login accepts blank names (src/auth.rs:2).",
            StopReason::EndTurn,
        ),
    );
    let (_, main, _) = agent.expect_request();
    let note = &results(&main)[0];
    assert_eq!(note.0, "t_audit");
    assert!(
        note.1.contains("(security-auditor) completed"),
        "{}",
        note.1
    );
    assert!(
        note.1
            .contains("<result>Finding: login accepts blank names (src/auth.rs:2).</result>")
    );
    assert!(note.1.contains("tool_uses: 3"));
    let finished = agent.events.iter().any(|e| {
        matches!(e, EventBody::System(s) if s.subtype == "task_finished"
            && s.data["task_id"] == "t_audit" && s.data["status"] == "completed")
    });
    assert!(finished, "{:#?}", agent.events);
}
