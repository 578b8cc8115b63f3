use serde_json::json;
use ultraplan_protocol::events::{ContentBlock, EventBody, ResultEvent};
use ultraplan_protocol::session::SessionStatus::{Idle, RequiresAction, Running};

use super::*;

fn plan_call(id: &str) -> EventBody {
    EventBody::assistant(vec![ContentBlock::tool_use(
        id,
        "ExitPlanMode",
        json!({"plan":"p"}),
    )])
}

fn question(id: &str) -> EventBody {
    EventBody::assistant(vec![ContentBlock::tool_use(
        id,
        "AskUserQuestion",
        json!({"question":"which auth?"}),
    )])
}

fn plan_wait(id: &str) -> Stage {
    Stage::Waiting {
        tool_use_id: id.into(),
        question: false,
    }
}

fn text() -> EventBody {
    EventBody::assistant(vec![ContentBlock::text("looking")])
}

fn success() -> EventBody {
    EventBody::Result(ResultEvent {
        subtype: "success".into(),
        is_error: false,
        result: None,
        num_turns: None,
        duration_ms: None,
        usage: None,
        patch: None,
    })
}

fn statuses(effects: &[Effect]) -> Vec<ultraplan_protocol::SessionStatus> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::SetStatus(s) => Some(*s),
            _ => None,
        })
        .collect()
}

#[test]
fn statuses_follow_the_agent() {
    // (input, expected statuses, expected stage after)
    let steps: Vec<(Input, Vec<ultraplan_protocol::SessionStatus>, Stage)> = vec![
        (
            Input::AgentReady { waiting_on: None },
            vec![Running],
            Stage::Working,
        ),
        (Input::AgentEvent(text()), vec![], Stage::Working),
        (
            Input::AgentEvent(plan_call("p1")),
            vec![RequiresAction],
            plan_wait("p1"),
        ),
        (
            Input::Deliver(EventBody::user_text("steering waits for the decision")),
            vec![],
            plan_wait("p1"),
        ),
        (
            Input::Deliver(EventBody::tool_result("p1", "## Approved Plan:\nx", false)),
            vec![Running],
            Stage::Working,
        ),
        (
            Input::AgentEvent(question("q1")),
            vec![RequiresAction],
            Stage::Waiting {
                tool_use_id: "q1".into(),
                question: true,
            },
        ),
        (
            Input::Deliver(EventBody::user_text("use JWT")),
            vec![Running],
            Stage::Working,
        ),
        (
            Input::AgentEvent(plan_call("p2")),
            vec![RequiresAction],
            plan_wait("p2"),
        ),
        (
            Input::Deliver(EventBody::tool_result("other", "x", false)),
            vec![],
            plan_wait("p2"),
        ),
        (
            Input::Deliver(EventBody::tool_result("p2", "no", true)),
            vec![Running],
            Stage::Working,
        ),
        (Input::AgentEvent(success()), vec![Idle], Stage::Idle),
        (
            Input::Deliver(EventBody::user_text("more")),
            vec![Running],
            Stage::Working,
        ),
        (Input::AgentEvent(text()), vec![], Stage::Working),
    ];
    let mut lifecycle = Lifecycle::default();
    for (i, (input, want, stage)) in steps.into_iter().enumerate() {
        let effects = lifecycle.on(input);
        assert_eq!(statuses(&effects), want, "step {i}");
        assert_eq!(lifecycle.stage, stage, "step {i}");
    }
}

#[test]
fn agent_events_are_recorded_and_deliveries_forwarded() {
    let mut lifecycle = Lifecycle::default();
    let effects = lifecycle.on(Input::AgentEvent(text()));
    assert_eq!(
        effects,
        vec![Effect::SetStatus(Running), Effect::Record(text())],
        "the status changes before the event is visible"
    );
    let message = EventBody::user_text("hi");
    let effects = lifecycle.on(Input::Deliver(message.clone()));
    assert_eq!(effects[0], Effect::Forward(message));
}

#[test]
fn crashes_append_an_error_result_with_the_stderr_tail() {
    let mut lifecycle = Lifecycle::default();
    lifecycle.on(Input::AgentReady { waiting_on: None });
    let effects = lifecycle.on(Input::AgentExited {
        clean: false,
        reason: "exit status 101".into(),
        stderr_tail: "thread main panicked".into(),
    });
    assert_eq!(effects[0], Effect::SetStatus(Idle));
    let Effect::Append(EventBody::Result(r)) = &effects[1] else {
        panic!("{effects:?}");
    };
    assert_eq!(r.subtype, "error_during_execution");
    let text = r.result.clone().unwrap_or_default();
    assert!(
        text.contains("exit status 101") && text.contains("thread main panicked"),
        "{text}"
    );
    assert_eq!(lifecycle.stage, Stage::Ended);
    assert!(
        lifecycle.on(Input::AgentEvent(text_event())).is_empty(),
        "ended is final"
    );
}

fn text_event() -> EventBody {
    text()
}

#[test]
fn clean_exit_and_timeout_and_archive() {
    let mut clean = Lifecycle::default();
    assert_eq!(
        clean.on(Input::AgentExited {
            clean: true,
            reason: String::new(),
            stderr_tail: String::new()
        }),
        vec![Effect::SetStatus(Idle)]
    );
    let mut timed = Lifecycle::default();
    let effects = timed.on(Input::TimedOut {
        timeout_seconds: 60,
    });
    assert_eq!(effects[0], Effect::Kill);
    assert_eq!(effects[1], Effect::Archive);
    assert!(
        matches!(&effects[2], Effect::Append(EventBody::Result(r)) if r.subtype == "error_timeout")
    );
    let mut archived = Lifecycle::default();
    assert_eq!(archived.on(Input::Archived), vec![Effect::Kill]);
    assert!(
        archived
            .on(Input::TimedOut { timeout_seconds: 1 })
            .is_empty()
    );
}

#[test]
fn queued_sessions_are_idle_until_started() {
    let mut lifecycle = Lifecycle::default();
    assert_eq!(lifecycle.on(Input::Queued), vec![Effect::SetStatus(Idle)]);
    assert_eq!(lifecycle.stage, Stage::Queued);
    assert!(lifecycle.on(Input::Starting).is_empty());
    assert_eq!(
        lifecycle.on(Input::AgentReady { waiting_on: None }),
        vec![Effect::SetStatus(Running)]
    );
}

#[test]
fn resumed_agents_keep_waiting_on_an_open_plan() {
    let open = vec![EventBody::user_text("go"), text(), plan_call("p1")];
    let p1 = Waiting {
        tool_use_id: "p1".into(),
        question: false,
    };
    assert_eq!(unanswered_tool(&open), Some(p1.clone()));
    let mut steered = open.clone();
    steered.push(EventBody::user_text("steering does not answer a plan"));
    assert_eq!(unanswered_tool(&steered), Some(p1.clone()));
    let mut answered = open.clone();
    answered.push(EventBody::tool_result("p1", "no", true));
    assert_eq!(unanswered_tool(&answered), None);
    answered.push(plan_call("p2"));
    assert_eq!(
        unanswered_tool(&answered).map(|w| w.tool_use_id),
        Some("p2".into())
    );
    let asked = vec![question("q1"), EventBody::user_text("JWT")];
    assert_eq!(
        unanswered_tool(&asked),
        None,
        "a plain answer answers a question"
    );
    assert_eq!(unanswered_tool(&[EventBody::user_text("go"), text()]), None);
    let mut lifecycle = Lifecycle::default();
    let effects = lifecycle.on(Input::AgentReady {
        waiting_on: Some(p1),
    });
    assert_eq!(effects, vec![Effect::SetStatus(RequiresAction)]);
    assert_eq!(lifecycle.stage, plan_wait("p1"));
}

#[test]
fn approval_hands_over_to_execution_when_the_server_executes() {
    use ultraplan_protocol::api::Decision;
    use ultraplan_protocol::plan_text::decision_tool_result;
    let answer = |decision: &Decision| {
        let (text, is_error) = decision_tool_result(decision, "1. do it");
        EventBody::tool_result("toolu_p", text, is_error)
    };
    let approve = answer(&Decision::Approve { plan: None });
    let edited = answer(&Decision::Approve {
        plan: Some("1. edited".into()),
    });
    let reject = answer(&Decision::Reject {
        feedback: "more tests".into(),
        comment_ids: Vec::new(),
    });
    let teleport = answer(&Decision::Teleport {});
    // (executes, decision, effects wanted)
    let cases = [
        (
            true,
            approve.clone(),
            vec![Effect::SetStatus(Running), Effect::Execute],
        ),
        (
            true,
            edited,
            vec![Effect::SetStatus(Running), Effect::Execute],
        ),
        (
            false,
            approve.clone(),
            vec![Effect::Forward(approve), Effect::SetStatus(Running)],
        ),
        (
            true,
            reject.clone(),
            vec![Effect::Forward(reject), Effect::SetStatus(Running)],
        ),
        (
            true,
            teleport.clone(),
            vec![Effect::Forward(teleport), Effect::SetStatus(Running)],
        ),
    ];
    for (executes, decision, want) in cases {
        let mut lifecycle = Lifecycle::new(executes);
        lifecycle.on(Input::AgentReady { waiting_on: None });
        lifecycle.on(Input::AgentEvent(plan_call("toolu_p")));
        assert_eq!(lifecycle.stage, plan_wait("toolu_p"));
        let effects = lifecycle.on(Input::Deliver(decision));
        assert_eq!(effects, want, "executes={executes}");
        if effects.contains(&Effect::Execute) {
            assert_eq!(lifecycle.stage, Stage::Starting);
            // The executing agent then runs like any other.
            let ready = lifecycle.on(Input::AgentReady { waiting_on: None });
            assert_eq!(statuses(&ready), vec![Running]);
        }
    }
}
