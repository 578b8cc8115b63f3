//! State-machine tests: resuming from a transcript.

use serde_json::json;
use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::events::Role;
use ultraplan_protocol::model::StopReason;
use ultraplan_protocol::{ContentBlock, EventBody};

use super::test_harness::{agent_from, labels, last_message, requests, result_text, said, tool};
use super::*;
use crate::conversation::{text_of, tool_results};
use crate::plan_tools::exit_plan::APPROVED_RESULT_TEXT;
use crate::prompts::CONTINUE_NUDGE;
use crate::test_support::success;

fn prompt() -> EventBody {
    EventBody::user_text("plan it")
}

fn call(id: &str, name: &str) -> EventBody {
    let input = match name {
        "ExitPlanMode" => json!({"plan": "# P"}),
        "AskUserQuestion" => json!({"question": "Which?"}),
        _ => json!({"pattern": "x"}),
    };
    EventBody::assistant(vec![tool(id, name, input)])
}

fn begin(transcript: &[EventBody]) -> (Agent, Vec<Effect>) {
    let mut agent = agent_from(transcript, AgentConfig::default(), 50);
    let effects = agent.handle(Input::Begin);
    (agent, effects)
}

#[test]
fn resume_points() {
    let teleport = EventBody::tool_result("p", "__ULTRAPLAN_TELEPORT_LOCAL__\n# P", true);
    let approve = EventBody::tool_result("p", "## Approved Plan:\n# P", false);
    let cases: Vec<(&str, Vec<EventBody>, Vec<&str>)> = vec![
        ("new session", vec![prompt()], vec!["request"]),
        (
            "pending plan waits",
            vec![prompt(), call("p", "ExitPlanMode")],
            vec![],
        ),
        (
            "pending read re-runs",
            vec![prompt(), call("g", "Grep")],
            vec!["tools:Grep"],
        ),
        (
            "pending question with a logged answer",
            vec![
                prompt(),
                call("q", "AskUserQuestion"),
                EventBody::user_text("B"),
            ],
            vec!["user", "request"],
        ),
        (
            "results logged, no reply yet",
            vec![
                prompt(),
                call("g", "Grep"),
                EventBody::tool_result("g", "hit", false),
            ],
            vec!["request"],
        ),
        (
            "rejection logged",
            vec![
                prompt(),
                call("p", "ExitPlanMode"),
                EventBody::tool_result("p", "no", true),
            ],
            vec!["request"],
        ),
        (
            "teleport logged",
            vec![prompt(), call("p", "ExitPlanMode"), teleport.clone()],
            vec!["assistant", "result:success", "exit:0"],
        ),
        (
            "teleport reply logged, result missing",
            vec![
                prompt(),
                call("p", "ExitPlanMode"),
                teleport.clone(),
                said(TELEPORT_REPLY, StopReason::EndTurn),
            ],
            vec!["result:success", "exit:0"],
        ),
        (
            "teleport fully logged",
            vec![
                prompt(),
                call("p", "ExitPlanMode"),
                teleport,
                said(TELEPORT_REPLY, StopReason::EndTurn),
                success(None),
            ],
            vec!["exit:0"],
        ),
        (
            "approval logged",
            vec![prompt(), call("p", "ExitPlanMode"), approve],
            vec!["result:success", "exit:0"],
        ),
        (
            "turn closed",
            vec![prompt(), said("done", StopReason::EndTurn), success(None)],
            vec![],
        ),
        (
            "turn ended, result missing",
            vec![prompt(), said("done", StopReason::EndTurn)],
            vec!["result:success"],
        ),
        (
            "cut reply",
            vec![prompt(), said("part", StopReason::MaxTokens)],
            vec!["user", "request"],
        ),
        (
            "steering after a closed turn",
            vec![
                prompt(),
                said("done", StopReason::EndTurn),
                success(None),
                EventBody::user_text("more"),
            ],
            vec!["request"],
        ),
    ];
    for (name, transcript, want) in cases {
        let (_, effects) = begin(&transcript);
        assert_eq!(labels(&effects), want, "{name}");
    }
}

#[test]
fn pending_plan_makes_no_model_call_until_the_decision() {
    let transcript = vec![
        prompt(),
        call("g", "Glob"),
        EventBody::tool_result("g", "src/a.rs", false),
        call("p", "ExitPlanMode"),
        EventBody::user_text("keep it small"),
    ];
    let (mut agent, effects) = begin(&transcript);
    assert!(effects.is_empty());
    let effects = agent.handle(Input::User(EventBody::tool_result("p", "add tests", true)));
    let (id, request) = requests(&effects).remove(0);
    assert_eq!(id, "req_1");
    let last = last_message(&request);
    assert_eq!(
        tool_results(last),
        vec![("p", "add tests".to_owned(), true)]
    );
    assert_eq!(text_of(last), "keep it small");
    assert_eq!(request.messages[0].role, Role::User);
    assert_eq!(request.messages.len(), 5);
}

#[test]
fn resumed_approval_and_cut_reply_details() {
    let transcript = vec![
        prompt(),
        call("p", "ExitPlanMode"),
        EventBody::tool_result("p", "## Approved Plan:\n# P", false),
    ];
    let (_, effects) = begin(&transcript);
    assert_eq!(result_text(&effects).as_deref(), Some(APPROVED_RESULT_TEXT));

    let (_, effects) = begin(&[prompt(), said("part", StopReason::MaxTokens)]);
    let (_, request) = requests(&effects).remove(0);
    assert_eq!(text_of(last_message(&request)), CONTINUE_NUDGE);
}

#[test]
fn resumed_turns_count_toward_the_limit() {
    let transcript = vec![
        prompt(),
        call("g", "Glob"),
        EventBody::tool_result("g", "x", false),
        call("h", "Glob"),
        EventBody::tool_result("h", "x", false),
    ];
    let mut agent = agent_from(&transcript, AgentConfig::default(), 2);
    let effects = agent.handle(Input::Begin);
    assert_eq!(labels(&effects), ["result:error_max_turns", "exit:0"]);
}

#[test]
fn unanswered_task_calls_run_their_subagents_again_without_rereporting_files() {
    use super::test_harness::{emitted, team_agent_from};
    use crate::conversation::for_task;

    let fork = json!({"description": "d", "prompt": "Look again."});
    let explore = json!({"description": "d", "prompt": "Q", "subagent_type": "explore"});
    let transcript = [
        prompt(),
        EventBody::assistant(vec![tool("t1", "Task", explore), tool("t2", "Task", fork)]),
        for_task(EventBody::user_text("Q"), "t1"),
        for_task(EventBody::assistant(vec![ContentBlock::text("half")]), "t1"),
    ];
    let mut agent = team_agent_from(&transcript, 4, vec![]);
    let effects = agent.handle(Input::Begin);
    let subtypes: Vec<String> = emitted(&effects)
        .into_iter()
        .filter_map(|e| match e {
            EventBody::System(s) => Some(s.subtype),
            _ => None,
        })
        .collect();
    assert_eq!(
        subtypes,
        ["task_queued", "task_queued", "task_started", "task_started"],
        "no agent_definition_invalid on resume"
    );
    let sent = requests(&effects);
    assert_eq!(sent.len(), 2);
    assert_eq!(text_of(last_message(&sent[0].1)), "Q");
    let fork_results = tool_results(last_message(&sent[1].1));
    assert_eq!(fork_results.len(), 2, "placeholders for both Task calls");
}
