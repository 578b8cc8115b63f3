//! State-machine tests: what the user sends — plan decisions, answers, steering.

use serde_json::json;
use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::model::StopReason;
use ultraplan_protocol::{ContentBlock, EventBody};

use super::test_harness::*;
use super::*;
use crate::conversation::{text_of, tool_results};
use crate::plan_tools::exit_plan::APPROVED_RESULT_TEXT;

fn decision(id: &str, text: &str, is_error: bool) -> Input {
    Input::User(EventBody::tool_result(id, text, is_error))
}

#[test]
fn rejection_returns_feedback_and_queued_steering_to_the_model() {
    let (mut agent, id) = started();
    let plan = tool("p1", "ExitPlanMode", json!({"plan": "# Plan"}));
    let effects = model(&mut agent, &id, reply(vec![plan], StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant"], "waits for the decision");
    assert!(
        agent
            .handle(Input::User(EventBody::user_text("also docs")))
            .is_empty()
    );
    let effects = agent.handle(decision("p1", "add tests", true));
    assert_eq!(
        labels(&effects),
        ["request"],
        "the decision is not re-emitted"
    );
    let (_, request) = requests(&effects).remove(0);
    let last = last_message(&request);
    assert_eq!(
        tool_results(last),
        vec![("p1", "add tests".to_owned(), true)]
    );
    assert_eq!(text_of(last), "also docs");
}

#[test]
fn teleport_stops_the_harness_with_the_fixed_reply() {
    let (mut agent, id) = started();
    let plan = tool("p1", "ExitPlanMode", json!({"plan": "# Plan"}));
    model(&mut agent, &id, reply(vec![plan], StopReason::ToolUse));
    agent.handle(Input::User(EventBody::user_text("steer")));
    let effects = agent.handle(decision("p1", "__ULTRAPLAN_TELEPORT_LOCAL__\n# Plan", true));
    assert_eq!(labels(&effects), ["assistant", "result:success", "exit:0"]);
    let EventBody::Assistant(a) = &emitted(&effects)[0] else {
        panic!("assistant")
    };
    assert_eq!(a.message.content, vec![ContentBlock::text(TELEPORT_REPLY)]);
    assert_eq!(result_text(&effects).as_deref(), Some(TELEPORT_REPLY));
    assert!(agent.is_done());
    assert!(
        agent
            .handle(Input::User(EventBody::user_text("more")))
            .is_empty()
    );
}

#[test]
fn approval_ends_the_plan_phase() {
    let (mut agent, id) = started();
    let plan = tool("p1", "ExitPlanMode", json!({"plan": "# Plan"}));
    model(&mut agent, &id, reply(vec![plan], StopReason::ToolUse));
    let effects = agent.handle(decision("p1", "ok\n\n## Approved Plan:\n# Plan", false));
    assert_eq!(labels(&effects), ["result:success", "exit:0"]);
    assert_eq!(result_text(&effects).as_deref(), Some(APPROVED_RESULT_TEXT));
}

#[test]
fn questions_are_answered_by_text_or_tool_result() {
    for by_text in [true, false] {
        let (mut agent, id) = started();
        let ask = tool("q1", "AskUserQuestion", json!({"question": "Which DB?"}));
        let effects = model(&mut agent, &id, reply(vec![ask], StopReason::ToolUse));
        assert_eq!(labels(&effects), ["assistant"]);
        let (answer, want) = if by_text {
            (EventBody::user_text("Postgres"), vec!["user", "request"])
        } else {
            (
                EventBody::tool_result("q1", "Postgres", false),
                vec!["request"],
            )
        };
        let effects = agent.handle(Input::User(answer));
        assert_eq!(labels(&effects), want, "by text: {by_text}");
        let (_, request) = requests(&effects).remove(0);
        assert_eq!(
            tool_results(last_message(&request)),
            vec![("q1", "Postgres".to_owned(), false)]
        );
    }
}

#[test]
fn invalid_or_second_waiting_calls_get_error_results() {
    let (mut agent, id) = started();
    let blocks = vec![
        tool("p0", "ExitPlanMode", json!({"plan": ""})),
        tool("p1", "ExitPlanMode", json!({"plan": "# A"})),
        tool("q1", "AskUserQuestion", json!({"question": "?"})),
    ];
    let effects = model(&mut agent, &id, reply(blocks, StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant", "user"]);
    let EventBody::User(u) = &emitted(&effects)[1] else {
        panic!("user")
    };
    let message = crate::conversation::from_user_event(u);
    let results = tool_results(&message);
    assert_eq!(
        results.iter().map(|r| r.0).collect::<Vec<_>>(),
        ["p0", "q1"]
    );
    assert!(results.iter().all(|r| r.2));
    let effects = agent.handle(decision("p1", "no", true));
    assert_eq!(labels(&effects), ["request"]);
}

#[test]
fn decision_during_a_running_batch_is_kept_for_after_it() {
    let (mut agent, id) = started();
    let blocks = vec![
        tool("g1", "Grep", json!({"pattern": "x"})),
        tool("p1", "ExitPlanMode", json!({"plan": "# A"})),
    ];
    let effects = model(&mut agent, &id, reply(blocks, StopReason::ToolUse));
    assert_eq!(labels(&effects), ["assistant", "tools:Grep"]);
    assert!(agent.handle(decision("p1", "shorter", true)).is_empty());
    let effects = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("hit")],
    });
    assert_eq!(labels(&effects), ["user", "request"]);
    let (_, request) = requests(&effects).remove(0);
    let ids: Vec<String> = tool_results(last_message(&request))
        .into_iter()
        .map(|r| r.0.to_owned())
        .collect();
    assert_eq!(ids, ["g1", "p1"]);
}

#[test]
fn question_answered_while_its_batch_runs() {
    let (mut agent, id) = started();
    let blocks = vec![
        tool("g1", "Grep", json!({"pattern": "x"})),
        tool("q1", "AskUserQuestion", json!({"question": "Which?"})),
    ];
    model(&mut agent, &id, reply(blocks, StopReason::ToolUse));
    assert!(
        agent
            .handle(Input::User(EventBody::user_text("B")))
            .is_empty()
    );
    let effects = agent.handle(Input::ToolsDone {
        batch: 1,
        outputs: vec![ToolOutput::ok("hit")],
    });
    assert_eq!(labels(&effects), ["user", "user", "request"]);
    let (_, request) = requests(&effects).remove(0);
    let results = tool_results(last_message(&request));
    assert_eq!(results[1], ("q1", "B".to_owned(), false));
}
