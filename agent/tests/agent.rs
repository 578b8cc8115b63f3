//! Drives the real `ultraplan-agent` binary over its stdin/stdout, playing the server.

mod support;

#[path = "cases/execute.rs"]
mod execute;

#[path = "cases/protocol.rs"]
mod protocol;

#[path = "cases/setup.rs"]
mod setup;

#[path = "cases/subagents.rs"]
mod subagents;

use std::collections::VecDeque;

use serde_json::json;
use support::{
    AgentProcess, bundle, call, message_text, model_error, new_session, response, say, settings,
};
use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::frames::{AgentFrame, ServerFrame};
use ultraplan_protocol::model::{ModelErrorKind, ModelResponse, StopReason};
use ultraplan_protocol::session::PromptVariant;
use ultraplan_protocol::{ContentBlock, EventBody};

const PROMPT: &str = "Plan a change so that login rejects blank user names.";
const APPROVED_TEXT: &str = "Plan approved. Remote execution is not enabled on this server; \
teleport the plan to implement it locally.";

fn start(variant: PromptVariant) -> (tempfile::TempDir, AgentProcess) {
    let repo = bundle();
    let mut agent = AgentProcess::spawn(repo.path(), &[]);
    agent.open(settings(variant, None), new_session(PROMPT));
    (repo, agent)
}

fn plan(id: &str, text: &str) -> ModelResponse {
    call(id, "ExitPlanMode", json!({ "plan": text }))
}

fn kinds(frames: &[AgentFrame]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match f {
            AgentFrame::Event { event } => match event {
                EventBody::Assistant(_) => "assistant".to_owned(),
                EventBody::User(_) => "user".to_owned(),
                EventBody::Result(r) => format!("result:{}", r.subtype),
                EventBody::System(s) => format!("system:{}", s.subtype),
                EventBody::ControlRequest(_) => "control".to_owned(),
            },
            AgentFrame::ModelRequest { .. } => "request".to_owned(),
            AgentFrame::Done { .. } => "done".to_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn result_of(frames: &[AgentFrame]) -> Option<String> {
    frames.iter().find_map(|f| match f {
        AgentFrame::Event {
            event: EventBody::Result(r),
        } => r.result.clone(),
        _ => None,
    })
}

#[test]
fn explores_gets_rejected_revises_and_stops_on_teleport() {
    let (_repo, mut agent) = start(PromptVariant::SimplePlan);
    let mut script: VecDeque<ModelResponse> = VecDeque::from([
        call("t_glob", "Glob", json!({"pattern": "src/**/*.rs"})),
        call("t_grep", "Grep", json!({"pattern": "fn login"})),
        call("t_read", "Read", json!({"file_path": "src/auth.rs"})),
        plan("p_1", "# Plan\n1. Check blank names in `login`."),
    ]);
    let mut tool_results = Vec::new();
    while let Some(next) = script.pop_front() {
        let (id, request, events) = agent.expect_request();
        assert_eq!(request.model, None);
        if let Some(last) = request.messages.last() {
            tool_results.push(message_text(last));
        }
        assert!(events.iter().all(|e| !matches!(e, EventBody::Result(_))));
        agent.respond(&id, next);
    }
    assert!(
        tool_results[1].contains("src/auth.rs"),
        "{}",
        tool_results[1]
    );
    assert!(
        tool_results[2].contains("src/auth.rs"),
        "{}",
        tool_results[2]
    );
    assert!(
        tool_results[3].contains("!user.is_empty()"),
        "{}",
        tool_results[3]
    );

    // The plan waits for review; the reviewer rejects it with feedback.
    let EventBody::Assistant(submitted) = agent.expect_event() else {
        panic!("assistant")
    };
    assert_eq!(submitted.message.usage.map(|u| u.input_tokens), Some(100));
    assert_eq!(submitted.message.model.as_deref(), Some("test-model"));
    agent.user_event(EventBody::tool_result(
        "p_1",
        "Also cover whitespace-only names.",
        true,
    ));
    let (id, request, events) = agent.expect_request();
    assert!(
        events.is_empty(),
        "the decision is not re-emitted: {events:?}"
    );
    let last = request.messages.last().expect("message");
    assert_eq!(message_text(last), "Also cover whitespace-only names.");
    agent.respond(&id, plan("p_2", "# Plan v2\n1. Trim, then check."));
    let _ = agent.expect_event();

    // Teleport: the harness answers, whatever the model would have said next (had the agent
    // asked, the script would have answered with more tool calls).
    agent.user_event(EventBody::tool_result(
        "p_2",
        "__ULTRAPLAN_TELEPORT_LOCAL__\n# Plan v2\n1. Trim, then check.",
        true,
    ));
    let frames = agent.until_done();
    assert_eq!(kinds(&frames), ["assistant", "result:success", "done"]);
    let AgentFrame::Event {
        event: EventBody::Assistant(reply),
    } = &frames[0]
    else {
        panic!("assistant")
    };
    assert_eq!(
        reply.message.content,
        vec![ContentBlock::text(TELEPORT_REPLY)]
    );
    assert_eq!(result_of(&frames).as_deref(), Some(TELEPORT_REPLY));
    let AgentFrame::Done { usage } = &frames[2] else {
        panic!("done")
    };
    assert_eq!(usage.input_tokens, 500, "five model calls");
    assert_eq!(agent.wait(), 0);
    assert!(agent.stdout_closed());

    let emitted: Vec<&str> = agent
        .events
        .iter()
        .map(|e| match e {
            EventBody::Assistant(_) => "assistant",
            EventBody::User(_) => "user",
            EventBody::Result(_) => "result",
            _ => "other",
        })
        .collect();
    assert_eq!(
        emitted,
        [
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant",
            "assistant",
            "assistant",
            "result"
        ]
    );
}

#[test]
fn approval_ends_the_session() {
    let (_repo, mut agent) = start(PromptVariant::SimplePlan);
    let (id, _, _) = agent.expect_request();
    agent.respond(&id, plan("p_1", "# Plan"));
    let _ = agent.expect_event();
    agent.user_event(EventBody::tool_result(
        "p_1",
        "User has approved your plan. You can now start coding.\n\n## Approved Plan:\n# Plan",
        false,
    ));
    let frames = agent.until_done();
    assert_eq!(kinds(&frames), ["result:success", "done"]);
    assert_eq!(result_of(&frames).as_deref(), Some(APPROVED_TEXT));
    assert_eq!(agent.wait(), 0);
}

#[test]
fn question_answered_by_a_plain_message() {
    let (_repo, mut agent) = start(PromptVariant::SimplePlan);
    let (id, _, _) = agent.expect_request();
    agent.respond(
        &id,
        call("q_1", "AskUserQuestion", json!({"question": "Trim names?"})),
    );
    let EventBody::Assistant(_) = agent.expect_event() else {
        panic!("assistant")
    };
    agent.user_event(EventBody::user_text("Yes, trim them."));
    let (id, request, events) = agent.expect_request();
    assert_eq!(
        events,
        vec![EventBody::tool_result("q_1", "Yes, trim them.", false)]
    );
    let last = request.messages.last().expect("message");
    assert_eq!(message_text(last), "Yes, trim them.");
    agent.respond(&id, say("Understood.", StopReason::EndTurn));
    let (_, result) = (agent.expect_event(), agent.expect_event());
    assert!(matches!(result, EventBody::Result(ref r) if r.subtype == "success"));
    agent.send(&ServerFrame::Stop {
        reason: "archived".into(),
    });
    assert_eq!(kinds(&agent.until_done()), ["done"]);
    assert_eq!(agent.wait(), 0);
}

#[test]
fn max_tokens_continues_without_recap() {
    let (_repo, mut agent) = start(PromptVariant::SimplePlan);
    let (id, _, _) = agent.expect_request();
    agent.respond(&id, say("Part one", StopReason::MaxTokens));
    let (id, request, events) = agent.expect_request();
    assert_eq!(events.len(), 2, "assistant and the nudge: {events:?}");
    let n = request.messages.len();
    assert_eq!(message_text(&request.messages[n - 2]), "Part one");
    assert_eq!(
        message_text(&request.messages[n - 1]),
        "Continue from where you stopped. Do not repeat or recap."
    );
    agent.respond(&id, say("Part two", StopReason::EndTurn));
    let _ = agent.expect_event();
    let EventBody::Result(result) = agent.expect_event() else {
        panic!("result")
    };
    assert_eq!(result.result.as_deref(), Some("Part two"));
    agent.send(&ServerFrame::Stop {
        reason: "done".into(),
    });
    agent.until_done();
    assert_eq!(agent.wait(), 0);
}

#[test]
fn prompt_too_long_compacts_and_retries_once() {
    let (_repo, mut agent) = start(PromptVariant::SimplePlan);
    let (id, _, _) = agent.expect_request();
    agent.respond(&id, call("t_glob", "Glob", json!({"pattern": "**/*"})));
    let (id, _, _) = agent.expect_request();
    agent.send(&ServerFrame::ModelError {
        request_id: id,
        error: model_error(ModelErrorKind::PromptTooLong, "prompt is too long"),
    });
    let (id, request, _) = agent.expect_request();
    let ask = message_text(request.messages.last().expect("message"));
    assert!(ask.contains("write a summary of the conversation"), "{ask}");
    agent.respond(
        &id,
        say("Summary: auth lives in src/auth.rs.", StopReason::EndTurn),
    );
    let (id, request, events) = agent.expect_request();
    assert!(matches!(&events[..], [EventBody::System(s)] if s.subtype == "compact_boundary"));
    let all: String = request.messages.iter().map(message_text).collect();
    assert!(all.contains("Summary: auth lives in src/auth.rs."));
    agent.send(&ServerFrame::ModelError {
        request_id: id,
        error: model_error(ModelErrorKind::PromptTooLong, "still too long"),
    });
    let frames = agent.until_done();
    assert_eq!(kinds(&frames), ["result:error_prompt_too_long", "done"]);
    assert_eq!(agent.wait(), 0);
}

#[test]
fn resumes_at_a_pending_plan_without_calling_the_model() {
    let repo = bundle();
    let mut agent = AgentProcess::spawn(repo.path(), &[]);
    let mut transcript = new_session(PROMPT);
    transcript.extend([
        EventBody::assistant(vec![ContentBlock::tool_use(
            "t_glob",
            "Glob",
            json!({"pattern": "*"}),
        )]),
        EventBody::tool_result("t_glob", "README.md", false),
        EventBody::assistant(vec![ContentBlock::tool_use(
            "p_1",
            "ExitPlanMode",
            json!({"plan": "# P"}),
        )]),
    ]);
    agent.open(settings(PromptVariant::SimplePlan, None), transcript);
    agent.user_event(EventBody::tool_result("p_1", "Name the test file.", true));
    let (id, request, events) = agent.expect_request();
    assert!(events.is_empty());
    assert_eq!(id, "req_1");
    let last = request.messages.last().expect("message");
    assert_eq!(message_text(last), "Name the test file.");
    agent.send(&ServerFrame::Stop {
        reason: "test".into(),
    });
    assert_eq!(kinds(&agent.until_done()), ["done"]);
    assert_eq!(agent.wait(), 0);
}

#[test]
fn oversized_results_are_saved_and_readable_by_path() {
    let repo = bundle();
    let big: String = (1..=300).map(|i| format!("entry {i}\n")).collect();
    std::fs::write(repo.path().join("big.txt"), big).expect("write");
    let mut agent = AgentProcess::spawn(repo.path(), &[("ULTRAPLAN_CTX_SPILL_CHARS", "2000")]);
    agent.open(
        settings(PromptVariant::SimplePlan, None),
        new_session(PROMPT),
    );
    let (id, _, _) = agent.expect_request();
    agent.respond(&id, call("t_big", "Read", json!({"file_path": "big.txt"})));
    let (id, request, _) = agent.expect_request();
    let preview = message_text(request.messages.last().expect("message"));
    assert!(
        preview.contains("[Output too large for the context"),
        "{preview}"
    );
    let path = preview
        .split("saved in ")
        .nth(1)
        .and_then(|rest| rest.split(": Read").next())
        .expect("a path")
        .to_owned();
    agent.respond(
        &id,
        call(
            "t_page",
            "Read",
            json!({"file_path": path, "offset": 250, "limit": 2}),
        ),
    );
    let (id, request, _) = agent.expect_request();
    let page = message_text(request.messages.last().expect("message"));
    assert!(
        page.contains("entry 250") && !page.contains("entry 252"),
        "{page}"
    );
    agent.respond(&id, response(vec![], StopReason::EndTurn));
    let _ = (agent.expect_event(), agent.expect_event());
    agent.send(&ServerFrame::Stop {
        reason: "test".into(),
    });
    agent.until_done();
    assert_eq!(agent.wait(), 0);
}
