//! Unit tests of the event types (loaded by `events.rs`).

use super::*;
use serde_json::json;

#[test]
fn events_round_trip_in_sdk_shape() {
    let cases = [
        json!({"type":"assistant","message":{"role":"assistant","content":[
            {"type":"text","text":"hi"},
            {"type":"tool_use","id":"t1","name":"ExitPlanMode","input":{"plan":"p"}}]},
            "parent_tool_use_id":null}),
        json!({"type":"user","message":{"role":"user","content":"do it"},
            "parent_tool_use_id":null}),
        json!({"type":"user","message":{"role":"user","content":[
            {"type":"tool_result","tool_use_id":"t1","content":"no","is_error":true}]},
            "parent_tool_use_id":"task_1"}),
        json!({"type":"result","subtype":"error_timeout","is_error":true}),
        json!({"type":"system","subtype":"init","message":"started"}),
        json!({"type":"control_request","request_id":"r1","request":
            {"subtype":"set_permission_mode","mode":"plan","ultraplan":true}}),
    ];
    for case in cases {
        let body: EventBody = serde_json::from_value(case.clone()).expect("parses");
        assert_eq!(serde_json::to_value(&body).expect("serialises"), case);
    }
}

#[test]
fn stamped_event_flattens_body() {
    let event = Event {
        id: 7,
        session_id: "s".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        body: EventBody::user_text("hello"),
    };
    let v = serde_json::to_value(&event).expect("serialises");
    assert_eq!(v["id"], 7);
    assert_eq!(v["type"], "user");
    assert_eq!(v["message"]["content"], "hello");
    let back: Event = serde_json::from_value(v).expect("parses");
    assert_eq!(back, event);
}

#[test]
fn user_message_without_role_or_parent_parses() {
    let body: EventBody =
        serde_json::from_value(json!({"type":"user","message":{"content":"x"}})).expect("parses");
    assert_eq!(body, EventBody::user_text("x"));
}

#[test]
fn user_waits_lists_main_agent_plan_exits_and_questions_in_order() {
    let ask = |id: &str| ContentBlock::tool_use(id, "AskUserQuestion", json!({}));
    let exit = |id: &str| ContentBlock::tool_use(id, EXIT_PLAN_MODE_TOOL, json!({"plan":"p"}));
    let bash = |id: &str| ContentBlock::tool_use(id, "Bash", json!({}));
    type Waits<'a> = Vec<(&'a str, UserWait)>;
    let cases: Vec<(Vec<ContentBlock>, Waits)> = vec![
        (vec![], vec![]),
        (vec![ContentBlock::text("hi"), bash("b")], vec![]),
        (vec![exit("e")], vec![("e", UserWait::Decision)]),
        (vec![ask("a")], vec![("a", UserWait::Question)]),
        (
            vec![ask("a"), bash("b"), exit("e")],
            vec![("a", UserWait::Question), ("e", UserWait::Decision)],
        ),
    ];
    for (content, want) in cases {
        let mut body = EventBody::assistant(content);
        assert_eq!(body.user_waits(), want);
        if let EventBody::Assistant(a) = &mut body {
            a.parent_tool_use_id = Some("task".into());
        }
        assert!(body.user_waits().is_empty(), "subagent calls never wait");
    }
    assert!(
        EventBody::user_text("AskUserQuestion")
            .user_waits()
            .is_empty()
    );
}

#[test]
fn subagent_calls_and_results_are_not_main_agent_plans() {
    let mut body = EventBody::assistant(vec![ContentBlock::tool_use(
        "t",
        EXIT_PLAN_MODE_TOOL,
        json!({"plan":"x"}),
    )]);
    assert_eq!(body.exit_plan_mode_calls(), vec![("t", Some("x"))]);
    if let EventBody::Assistant(a) = &mut body {
        a.parent_tool_use_id = Some("task".into());
    }
    assert!(body.exit_plan_mode_calls().is_empty());
}
