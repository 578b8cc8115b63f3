//! State-machine tests: execution mode (an approved plan being implemented).

use serde_json::{Value, json};
use ultraplan_protocol::frames::AgentMode;
use ultraplan_protocol::model::{ModelErrorKind, StopReason};
use ultraplan_protocol::{ContentBlock, EventBody};

use super::execute::{INTERRUPTED_CALL, NO_APPROVED_PLAN};
use super::test_harness::*;
use super::*;
use crate::conversation::{from_user_event, rebuild, text_of, tool_results, user_text};
use crate::plan_tools::exit_plan::APPROVED_RESULT_TEXT;
use crate::test_support::success;
use crate::tools::{bash, edit, glob, grep, read, write};

const EXECUTION_TOOLS: [&str; 7] = ["Glob", "Grep", "Read", "Write", "Edit", "Bash", "TodoWrite"];

pub(super) fn execute_agent(transcript: &[EventBody], max_turns: u32) -> Agent {
    let rebuilt = rebuild(transcript);
    let mut settings = settings(max_turns);
    settings.mode = AgentMode::Execute;
    let base = vec![
        glob::definition(),
        grep::definition(),
        read::definition(),
        write::definition(),
        edit::definition(),
        bash::definition(),
    ];
    let runnable = base.iter().map(|t| t.name.clone()).collect();
    Agent::new(Setup {
        settings,
        config: AgentConfig::default(),
        prefix: crate::prompts::execution_prefix(base),
        first_message: user_text(rebuilt.prompt.clone().unwrap_or_default()),
        rebuilt,
        runnable,
        subagents: None,
    })
}

pub(super) fn call(id: &str, name: &str, input: Value) -> EventBody {
    EventBody::assistant(vec![tool(id, name, input)])
}

/// The plan session: prompt, one exploration round, the plan and its approval.
pub(super) fn approved() -> Vec<EventBody> {
    vec![
        EventBody::user_text("add a greeting"),
        call("g1", "Glob", json!({"pattern": "*"})),
        EventBody::tool_result("g1", "src/lib.rs", false),
        call("p1", "ExitPlanMode", json!({"plan": "1. Add greet()."})),
        EventBody::tool_result(
            "p1",
            "User has approved your plan. You can now start coding.\n\n## Approved Plan:\n1. Add \
             greet().",
            false,
        ),
    ]
}

pub(super) fn with(mut transcript: Vec<EventBody>, more: Vec<EventBody>) -> Vec<EventBody> {
    transcript.extend(more);
    transcript
}

/// The tool_results of the user events among `effects`.
pub(super) fn answers(effects: &[Effect]) -> Vec<(String, String, bool)> {
    emitted(effects)
        .iter()
        .filter_map(|e| match e {
            EventBody::User(u) => Some(from_user_event(u)),
            _ => None,
        })
        .flat_map(|m| {
            tool_results(&m)
                .into_iter()
                .map(|(id, text, err)| (id.to_owned(), text, err))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn an_approved_plan_starts_a_model_turn_with_the_execution_tools() {
    let edited = with(
        approved()[..4].to_vec(),
        vec![EventBody::tool_result(
            "p1",
            "## Approved Plan (edited by user):\n1. Add greet() and a test.",
            false,
        )],
    );
    for transcript in [approved(), edited] {
        let mut agent = execute_agent(&transcript, 10);
        let effects = agent.handle(Input::Begin);
        assert_eq!(labels(&effects), ["request"]);
        let (id, request) = requests(&effects).remove(0);
        assert_eq!(id, "req_1");
        let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(tools, EXECUTION_TOOLS);
        let system = &crate::prompts::execution_prefix(vec![]).system[0].text;
        assert_eq!(&request.system[0].text, system);
        let results = tool_results(last_message(&request));
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].0, "p1");
        assert!(
            results[0].1.contains("## Approved Plan"),
            "{}",
            results[0].1
        );
    }
}

#[test]
fn plan_mode_still_finishes_at_the_approval() {
    let mut agent = agent_from(&approved(), AgentConfig::default(), 10);
    let effects = agent.handle(Input::Begin);
    assert_eq!(labels(&effects), ["result:success", "exit:0"]);
    assert_eq!(result_text(&effects).as_deref(), Some(APPROVED_RESULT_TEXT));
}

#[test]
fn writes_run_in_order_and_the_end_of_the_turn_ends_execution() {
    let mut agent = execute_agent(&approved(), 10);
    let id = request_id(&agent.handle(Input::Begin));
    let todos = json!({"todos": [{"content": "Add greet()", "status": "in_progress"}]});
    let blocks = vec![
        tool("t1", "TodoWrite", todos),
        tool(
            "w1",
            "Write",
            json!({"file_path": "src/greet.rs", "content": "x"}),
        ),
        tool(
            "e1",
            "Edit",
            json!({"file_path": "src/lib.rs", "old_string": "a", "new_string": "b"}),
        ),
        tool("b1", "Bash", json!({"command": "cargo test"})),
    ];
    let effects = model(&mut agent, &id, reply(blocks, StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant", "tools:Write,Edit,Bash"]);
    let outputs = ["Created src/greet.rs (1 bytes)", "Edited src/lib.rs", "ok"]
        .map(ToolOutput::ok)
        .to_vec();
    let effects = agent.handle(Input::ToolsDone { batch: 1, outputs });
    assert_eq!(labels(&effects), ["user", "request"]);
    let ids: Vec<String> = answers(&effects).into_iter().map(|a| a.0).collect();
    assert_eq!(ids, ["t1", "w1", "e1", "b1"]);

    let id = request_id(&effects);
    let summary = "Added greet() in src/greet.rs; cargo test passes.";
    let effects = model(
        &mut agent,
        &id,
        reply(vec![ContentBlock::text(summary)], StopReason::EndTurn),
    );
    assert_eq!(labels(&effects), ["assistant", "copy"], "it changed things");
    let effects = agent.handle(Input::WorkspaceCopied(Err("no room".into())));
    assert_eq!(
        labels(&effects),
        ["remove-copy", "system", "result:success", "exit:0"]
    );
    assert_eq!(result_text(&effects).as_deref(), Some(summary));
    assert!(agent.is_done());
    let EventBody::Result(result) = &emitted(&effects)[1] else {
        panic!("result")
    };
    assert_eq!(result.num_turns, Some(2), "turns count from the approval");
}

#[test]
fn plan_mode_tools_are_unknown_during_execution() {
    let mut agent = execute_agent(&approved(), 10);
    let id = request_id(&agent.handle(Input::Begin));
    let blocks = vec![
        tool("p2", "ExitPlanMode", json!({"plan": "# Again"})),
        tool("q1", "AskUserQuestion", json!({"question": "Sure?"})),
        tool("k1", "Task", json!({"description": "d", "prompt": "p"})),
    ];
    let effects = model(&mut agent, &id, reply(blocks, StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant", "user", "request"]);
    for (id, text, is_error) in answers(&effects) {
        assert!(is_error, "{id}");
        assert!(text.starts_with("Unknown tool"), "{id}: {text}");
        assert!(
            text.contains("Write, Edit, Bash, TodoWrite."),
            "{id}: {text}"
        );
    }
}

#[test]
fn messages_queued_at_the_end_of_a_turn_keep_execution_going() {
    let mut agent = execute_agent(&approved(), 10);
    let id = request_id(&agent.handle(Input::Begin));
    assert!(
        agent
            .handle(Input::User(EventBody::user_text("also update the README")))
            .is_empty()
    );
    let effects = model(
        &mut agent,
        &id,
        reply(vec![ContentBlock::text("Done.")], StopReason::EndTurn),
    );
    assert_eq!(labels(&effects), ["assistant", "request"]);
    let (_, request) = requests(&effects).remove(0);
    assert_eq!(text_of(last_message(&request)), "also update the README");
}

#[test]
fn limits_and_model_errors_end_execution_as_in_plan_mode() {
    // Three plan-phase turns do not count toward the execution's limit of two.
    let mut agent = execute_agent(&approved(), 2);
    let id = request_id(&agent.handle(Input::Begin));
    let read = || tool("r", "Read", json!({"file_path": "src/lib.rs"}));
    model(&mut agent, &id, reply(vec![read()], StopReason::ToolUse));
    let effects = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("x")],
    });
    let id = request_id(&effects);
    model(&mut agent, &id, reply(vec![read()], StopReason::ToolUse));
    let effects = agent.handle(Input::ToolsDone {
        batch: 2,
        outputs: vec![ToolOutput::ok("x")],
    });
    assert_eq!(
        labels(&effects),
        ["user", "result:error_max_turns", "exit:0"]
    );

    let mut agent = execute_agent(&approved(), 10);
    let id = request_id(&agent.handle(Input::Begin));
    let error = ultraplan_protocol::model::ModelError {
        kind: ModelErrorKind::BudgetExhausted,
        message: "budget spent".into(),
    };
    let effects = model(&mut agent, &id, Err(error));
    assert_eq!(labels(&effects), ["result:error_budget", "exit:0"]);
}

#[test]
fn execution_resume_points() {
    let bash_call = json!({"command": "cargo test"});
    let cases: Vec<(&str, Vec<EventBody>, Vec<&str>)> = vec![
        ("fresh approval", approved(), vec!["request"]),
        (
            "no plan decision",
            vec![EventBody::user_text("add a greeting")],
            vec!["result:error_during_execution", "exit:0"],
        ),
        (
            "plan pending",
            approved()[..4].to_vec(),
            vec!["result:error_during_execution", "exit:0"],
        ),
        (
            "plan rejected",
            with(
                approved()[..4].to_vec(),
                vec![EventBody::tool_result("p1", "add tests", true)],
            ),
            vec!["result:error_during_execution", "exit:0"],
        ),
        (
            "pending read re-runs",
            with(
                approved(),
                vec![call("r1", "Read", json!({"file_path": "a"}))],
            ),
            vec!["tools:Read"],
        ),
        (
            "pending command is not repeated",
            with(approved(), vec![call("b1", "Bash", bash_call.clone())]),
            vec!["user", "request"],
        ),
        (
            "results logged, no reply yet",
            with(
                approved(),
                vec![
                    call("b1", "Bash", bash_call),
                    EventBody::tool_result("b1", "ok", false),
                ],
            ),
            vec!["request"],
        ),
        (
            "summary logged, result missing",
            with(approved(), vec![said("All done.", StopReason::EndTurn)]),
            vec!["result:success", "exit:0"],
        ),
        (
            "summary and result logged",
            with(
                approved(),
                vec![
                    said("All done.", StopReason::EndTurn),
                    success(Some("done")),
                ],
            ),
            vec!["exit:0"],
        ),
        (
            "cut reply",
            with(approved(), vec![said("Half", StopReason::MaxTokens)]),
            vec!["user", "request"],
        ),
    ];
    for (name, transcript, want) in cases {
        let mut agent = execute_agent(&transcript, 10);
        let effects = agent.handle(Input::Begin);
        assert_eq!(labels(&effects), want, "{name}");
        if want[0] == "result:error_during_execution" {
            assert_eq!(result_text(&effects).as_deref(), Some(NO_APPROVED_PLAN));
        }
    }
}

#[test]
fn resumed_batches_rerun_reads_and_do_not_repeat_writes() {
    let pending = EventBody::assistant(vec![
        tool("w1", "Write", json!({"file_path": "a", "content": "x"})),
        tool("r1", "Read", json!({"file_path": "a"})),
        tool("b1", "Bash", json!({"command": "make"})),
    ]);
    let mut agent = execute_agent(&with(approved(), vec![pending]), 10);
    let effects = agent.handle(Input::Begin);
    assert_eq!(labels(&effects), ["tools:Read"]);
    let effects = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("x")],
    });
    assert_eq!(labels(&effects), ["user", "request"]);
    let got = answers(&effects);
    let want = [
        ("w1".to_owned(), INTERRUPTED_CALL.to_owned(), true),
        ("r1".to_owned(), "x".to_owned(), false),
        ("b1".to_owned(), INTERRUPTED_CALL.to_owned(), true),
    ];
    assert_eq!(got, want);
}
