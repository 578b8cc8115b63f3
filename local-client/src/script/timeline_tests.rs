use serde_json::{Value, json};
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};

use super::*;

fn event(id: i64, body: Value) -> Event {
    let mut value = body;
    value["id"] = json!(id);
    value["session_id"] = json!("s1");
    value["created_at"] = json!("2026-01-01T10:11:12.345Z");
    serde_json::from_value(value).unwrap()
}

fn assistant(blocks: Vec<ContentBlock>) -> Value {
    serde_json::to_value(EventBody::assistant(blocks)).unwrap()
}

fn sub(mut body: Value) -> Value {
    body["parent_tool_use_id"] = json!("task_1");
    body
}

fn records_of(bodies: Vec<Value>) -> Vec<Record> {
    let mut timeline = Timeline::new();
    bodies
        .into_iter()
        .enumerate()
        .flat_map(|(i, b)| timeline.records(&event(i as i64 + 1, b)))
        .collect()
}

/// One of every kind, in the order a session produces them.
fn session() -> Vec<Value> {
    let plan = "# Harden login\n1. Reject empty users\n2. Test it";
    vec![
        json!({"type":"control_request","request":{"subtype":"set_permission_mode","mode":"plan","ultraplan":true}}),
        json!({"type":"user","message":{"role":"user","content":"fix the login"}}),
        assistant(vec![
            ContentBlock::text("Looking at auth.\n"),
            ContentBlock::tool_use("t1", "Read", json!({"file_path": "src/auth.rs"})),
        ]),
        serde_json::to_value(EventBody::tool_result("t1", "fn login()", false)).unwrap(),
        assistant(vec![ContentBlock::tool_use(
            "t2",
            "TodoWrite",
            json!({"todos": [
            {"content": "Read", "status": "completed", "activeForm": "Reading"},
            {"content": "Plan", "status": "in_progress", "activeForm": "Planning"}]}),
        )]),
        json!({"type":"system","subtype":"task_started","message":"Agent \"explore\" started",
               "data":{"task_id":"task_1","description":"explore"}}),
        sub(assistant(vec![ContentBlock::tool_use(
            "t3",
            "Grep",
            json!({"pattern": "login"}),
        )])),
        json!({"type":"system","subtype":"task_finished","message":"Agent \"explore\" failed",
               "data":{"task_id":"task_1","status":"failed"}}),
        assistant(vec![ContentBlock::tool_use(
            "p1",
            "ExitPlanMode",
            json!({"plan": plan}),
        )]),
        serde_json::to_value(EventBody::tool_result("p1", "add tests", true)).unwrap(),
        json!({"type":"result","subtype":"success","result":"done"}),
        json!({"type":"system","subtype":"stalled"}),
        json!({"type":"result","subtype":"error_timeout","is_error":true}),
    ]
}

#[test]
fn every_kind_of_event_becomes_its_record() {
    let records = records_of(session());
    let kinds: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.id,
                r.kind,
                r.subagent.as_deref(),
                r.text.as_str(),
                r.is_error,
            )
        })
        .collect();
    let plan = "# Harden login\n1. Reject empty users\n2. Test it";
    assert_eq!(
        kinds,
        [
            (2, Kind::UserMessage, None, "fix the login", false),
            (3, Kind::AssistantText, None, "Looking at auth.", false),
            (3, Kind::ToolCall, None, "src/auth.rs", false),
            (
                5,
                Kind::TodoUpdate,
                None,
                "1/2 done · doing: Planning",
                false
            ),
            (
                6,
                Kind::SubagentStart,
                Some("task_1"),
                "Agent \"explore\" started",
                false
            ),
            (7, Kind::ToolCall, Some("task_1"), "login", false),
            (
                8,
                Kind::SubagentEnd,
                Some("task_1"),
                "Agent \"explore\" failed",
                true
            ),
            (9, Kind::Plan, None, plan, false),
            (10, Kind::Decision, None, "rejected: add tests", false),
            (11, Kind::Result, None, "success: done", false),
            (12, Kind::System, None, "stalled", false),
            (13, Kind::Result, None, "error_timeout", true),
        ]
    );
}

#[test]
fn the_json_shape_is_stable() {
    insta::assert_json_snapshot!("logs_json_records", records_of(session()));
}

#[test]
fn decisions_read_the_tool_result() {
    let cases = [
        ("## Approved Plan:\nx", false, "approved"),
        ("__ULTRAPLAN_TELEPORT_LOCAL__\nx", true, "teleported"),
        ("  too vague ", true, "rejected: too vague"),
    ];
    for (content, is_error, want) in cases {
        let records = records_of(vec![
            assistant(vec![ContentBlock::tool_use(
                "p",
                "ExitPlanMode",
                json!({"plan": "P"}),
            )]),
            serde_json::to_value(EventBody::tool_result("p", content, is_error)).unwrap(),
        ]);
        assert_eq!(records[1].kind, Kind::Decision);
        assert_eq!(records[1].text, want, "{content:?}");
    }
}

#[test]
fn hostile_text_is_sanitised_everywhere() {
    let evil = "a\u{1b}]52;c;ZXZpbA==\u{7}b\u{1b}[2Jc\u{9b}31md\u{202e}e\r";
    let records = records_of(vec![
        assistant(vec![
            ContentBlock::text(evil),
            ContentBlock::tool_use("t", evil, json!({"command": evil})),
        ]),
        json!({"type":"system","subtype":evil,"message":evil}),
    ]);
    assert_eq!(records.len(), 3);
    for record in &records {
        let json = serde_json::to_string(record).unwrap();
        assert!(
            !json.contains("\\u001b") && !json.contains('\u{9b}'),
            "{json}"
        );
        assert!(crate::sanitize::is_clean(&line(record)), "{record:?}");
        assert!(line(record).contains("abcde"), "{}", line(record));
    }
}

#[test]
fn summaries() {
    let long = "x".repeat(300);
    let cases = [
        (json!({"file_path": "a.rs", "limit": 3}), "a.rs"),
        (json!({"pattern": "fn\nmain", "path": "src"}), "fn main"),
        (json!({"path": "src"}), "src"),
        (json!({"command": "ls -la"}), "ls -la"),
        (json!({"n": 1}), "{\"n\":1}"),
        (json!({}), ""),
        (Value::Null, ""),
    ];
    for (input, want) in cases {
        assert_eq!(input_summary(&input), want, "{input}");
    }
    let cut = input_summary(&json!({ "command": long }));
    assert_eq!(cut.chars().count(), MAX_SUMMARY_CHARS + 1);
    assert!(cut.ends_with('…'));
    assert_eq!(todo_summary(&json!({})), "0/0 done");
    assert_eq!(
        todo_summary(&json!({"todos": [{"content": "A", "status": "in_progress"}]})),
        "0/1 done · doing: A"
    );
}

#[test]
fn lines() {
    let records = records_of(session());
    let lines: Vec<String> = records.iter().map(line).collect();
    let want = [
        "10:11:12 you       fix the login",
        "10:11:12 agent     Looking at auth.",
        "10:11:12 tool      Read src/auth.rs",
        "10:11:12 todos     1/2 done · doing: Planning",
        "10:11:12 subagent+ Agent \"explore\" started",
        "10:11:12 tool      ↳ Grep login",
        "10:11:12 subagent- Agent \"explore\" failed",
        "10:11:12 plan      ready for review: Harden login (3 lines)",
        "10:11:12 decision  rejected: add tests",
        "10:11:12 result    success: done",
        "10:11:12 system    stalled",
        "10:11:12 ended     error_timeout",
    ];
    assert_eq!(lines, want);
    let multi = Record {
        text: "one\ntwo".into(),
        created_at: "garbage".into(),
        ..records[1].clone()
    };
    assert_eq!(
        line(&multi),
        "         agent     one\n                   two"
    );
}

#[test]
fn only_error_results_end_the_session() {
    let cases = [
        (json!({"type":"result","subtype":"success"}), false),
        (json!({"type":"result","subtype":"error_max_turns"}), true),
        (json!({"type":"system","subtype":"error_x"}), false),
    ];
    for (body, want) in cases {
        assert_eq!(ends_session(&event(1, body.clone())), want, "{body}");
    }
}
