//! State-machine tests: a live session, input by input.

use serde_json::json;
use ultraplan_protocol::events::Role;
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::model::{ModelError, ModelErrorKind, StopReason};
use ultraplan_protocol::{ContentBlock, EventBody};

use super::test_harness::*;
use super::*;
use crate::context::compact::SUMMARY_INSTRUCTION;
use crate::conversation::{text_of, tool_results};
use crate::prompts::CONTINUE_NUDGE;

#[test]
fn first_request_carries_prompt_and_tools() {
    let mut agent = agent_from(
        &[EventBody::user_text("plan it")],
        AgentConfig::default(),
        5,
    );
    let effects = agent.handle(Input::Begin);
    assert_eq!(labels(&effects), ["request"]);
    let (id, request) = requests(&effects).remove(0);
    assert_eq!(id, "req_1");
    assert_eq!(request.model, None);
    assert_eq!(request.messages.len(), 1);
    assert_eq!(text_of(&request.messages[0]), "plan it");
    let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["TodoWrite", "AskUserQuestion", "ExitPlanMode"]);
}

#[test]
fn tool_batches_run_read_only_tools_and_answer_the_rest_in_order() {
    let (mut agent, id) = started();
    let blocks = vec![
        ContentBlock::text("Looking around."),
        tool("t1", "Read", json!({"file_path": "a"})),
        tool(
            "t2",
            "TodoWrite",
            json!({"todos": [{"content": "x", "status": "pending"}]}),
        ),
        tool("t3", "Bash", json!({"command": "ls"})),
        tool("t4", "Glob", json!({"pattern": "*"})),
    ];
    let effects = model(&mut agent, &id, reply(blocks, StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant", "tools:Read,Glob"]);
    let EventBody::Assistant(a) = &emitted(&effects)[0] else {
        panic!("assistant")
    };
    assert_eq!(a.message.model.as_deref(), Some("test-model"));
    assert_eq!(a.message.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(a.message.usage.map(|u| u.output_tokens), Some(5));

    let done = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("read out"), ToolOutput::ok("glob out")],
    });
    assert_eq!(labels(&done), ["user", "request"]);
    let (_, request) = requests(&done).remove(0);
    let results = tool_results(last_message(&request));
    let ids: Vec<&str> = results.iter().map(|r| r.0).collect();
    assert_eq!(ids, ["t1", "t2", "t3", "t4"]);
    assert_eq!(results[0].1, "read out");
    assert!(results[2].2 && results[2].1.contains("Unknown tool `Bash`"));
    assert_eq!(agent.usage().input_tokens, 10);
}

#[test]
fn stale_replies_and_batches_are_ignored() {
    let (mut agent, _) = started();
    assert!(model(&mut agent, "req_99", reply(vec![], StopReason::EndTurn)).is_empty());
    assert!(
        agent
            .handle(Input::ToolsDone {
                batch: 7,
                outputs: vec![]
            })
            .is_empty()
    );
}

#[test]
fn end_turn_reports_and_waits_for_a_message() {
    let (mut agent, id) = started();
    let effects = model(
        &mut agent,
        &id,
        reply(vec![ContentBlock::text("Which part?")], StopReason::EndTurn),
    );
    assert_eq!(labels(&effects), ["assistant", "result:success"]);
    assert_eq!(result_text(&effects).as_deref(), Some("Which part?"));
    let effects = agent.handle(Input::User(EventBody::user_text("the auth part")));
    assert_eq!(labels(&effects), ["request"]);
    let (_, request) = requests(&effects).remove(0);
    assert_eq!(text_of(last_message(&request)), "the auth part");
    assert_eq!(request.messages[1].role, Role::Assistant);
}

#[test]
fn max_tokens_continues_without_recap() {
    let (mut agent, id) = started();
    let effects = model(
        &mut agent,
        &id,
        reply(vec![ContentBlock::text("partial")], StopReason::MaxTokens),
    );
    assert_eq!(labels(&effects), ["assistant", "user", "request"]);
    let (_, request) = requests(&effects).remove(0);
    let n = request.messages.len();
    assert_eq!(text_of(&request.messages[n - 2]), "partial");
    assert_eq!(text_of(&request.messages[n - 1]), CONTINUE_NUDGE);
}

#[test]
fn max_turns_ends_the_session() {
    let mut agent = agent_from(&[EventBody::user_text("p")], AgentConfig::default(), 2);
    let mut id = request_id(&agent.handle(Input::Begin));
    let glob = || vec![tool("g", "Glob", json!({"pattern": "*"}))];
    model(&mut agent, &id, reply(glob(), StopReason::ToolUse));
    let effects = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("")],
    });
    id = request_id(&effects);
    model(&mut agent, &id, reply(glob(), StopReason::ToolUse));
    let effects = agent.handle(Input::ToolsDone {
        batch: 2,
        outputs: vec![ToolOutput::ok("")],
    });
    assert_eq!(
        labels(&effects),
        ["user", "result:error_max_turns", "exit:0"]
    );
}

#[test]
fn model_errors_end_the_session_with_their_subtype() {
    let cases = [
        (ModelErrorKind::BudgetExhausted, "error_budget"),
        (ModelErrorKind::Unavailable, "error_during_execution"),
        (ModelErrorKind::InvalidRequest, "error_during_execution"),
    ];
    for (kind, subtype) in cases {
        let (mut agent, id) = started();
        let error = ModelError {
            kind,
            message: "nope".into(),
        };
        let effects = model(&mut agent, &id, Err(error));
        assert_eq!(
            labels(&effects),
            [format!("result:{subtype}"), "exit:0".to_owned()]
        );
        assert_eq!(result_text(&effects).as_deref(), Some("nope"));
    }
}

#[test]
fn prompt_too_long_compacts_then_retries_once() {
    let (mut agent, id) = started();
    let too_long = || {
        Err(ModelError {
            kind: ModelErrorKind::PromptTooLong,
            message: "too long".into(),
        })
    };
    let effects = model(&mut agent, &id, too_long());
    assert_eq!(labels(&effects), ["request"]);
    let (compact_id, request) = requests(&effects).remove(0);
    assert!(text_of(last_message(&request)).ends_with(SUMMARY_INSTRUCTION));

    let summary = reply(
        vec![ContentBlock::text("We looked at auth.")],
        StopReason::EndTurn,
    );
    let effects = model(&mut agent, &compact_id, summary);
    assert_eq!(labels(&effects), ["system", "request"]);
    let (retry_id, request) = requests(&effects).remove(0);
    let all: String = request.messages.iter().map(text_of).collect();
    assert!(all.contains("We looked at auth."));

    let effects = model(&mut agent, &retry_id, too_long());
    assert_eq!(labels(&effects), ["result:error_prompt_too_long", "exit:0"]);
}

#[test]
fn threshold_compaction_runs_before_the_next_turn() {
    let mut config = AgentConfig::default();
    config.context.compact_threshold_tokens = 1000;
    let mut agent = agent_from(&[EventBody::user_text("p")], config, 50);
    let id = request_id(&agent.handle(Input::Begin));
    model(
        &mut agent,
        &id,
        reply(vec![tool("r", "Read", json!({}))], StopReason::ToolUse),
    );
    let effects = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("x".repeat(8000))],
    });
    let (compact_id, request) = requests(&effects).remove(0);
    assert!(text_of(last_message(&request)).ends_with(SUMMARY_INSTRUCTION));
    let effects = model(
        &mut agent,
        &compact_id,
        reply(vec![ContentBlock::text("sum")], StopReason::EndTurn),
    );
    assert_eq!(
        labels(&effects),
        ["system", "request"],
        "no second compaction in a row"
    );
}

#[test]
fn todo_reminder_follows_three_quiet_turns() {
    let (mut agent, mut id) = started();
    let todo = tool(
        "td",
        "TodoWrite",
        json!({"todos": [{"content": "a", "status": "pending"}]}),
    );
    let effects = model(&mut agent, &id, reply(vec![todo], StopReason::ToolUse));
    id = request_id(&effects);
    let mut reminded = Vec::new();
    for turn in 1..=3u64 {
        let call = tool(&format!("g{turn}"), "Glob", json!({"pattern": "*"}));
        model(&mut agent, &id, reply(vec![call], StopReason::ToolUse));
        let effects = agent.handle(Input::ToolsDone {
            batch: turn + 1,
            outputs: vec![ToolOutput::ok("")],
        });
        let (next, request) = requests(&effects).remove(0);
        id = next;
        reminded.push(text_of(last_message(&request)).contains("todo list has not been updated"));
    }
    assert_eq!(reminded, [false, false, true]);
}

#[test]
fn execute_mode_without_an_approved_plan_is_refused() {
    let mut agent = agent_from(&[EventBody::user_text("p")], AgentConfig::default(), 5);
    agent.settings.mode = AgentMode::Execute;
    let effects = agent.handle(Input::Begin);
    assert_eq!(
        labels(&effects),
        ["result:error_during_execution", "exit:0"]
    );
}
