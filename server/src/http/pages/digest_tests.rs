use serde_json::json;
use ultraplan_protocol::events::{
    AssistantEvent, AssistantMessage, ContentBlock, Event, EventBody, ResultEvent, Role,
};

use super::*;

fn stamp(id: i64, body: EventBody) -> Event {
    Event {
        id,
        session_id: "s".into(),
        created_at: format!("2026-01-02T03:04:{:02}Z", id % 60),
        body,
    }
}

fn sub(parent: &str, blocks: Vec<ContentBlock>) -> EventBody {
    EventBody::Assistant(AssistantEvent {
        message: AssistantMessage {
            role: Role::Assistant,
            content: blocks,
            model: None,
            stop_reason: None,
            usage: None,
        },
        parent_tool_use_id: Some(parent.into()),
    })
}

fn sub_result(parent: &str, id: &str, text: &str) -> EventBody {
    let EventBody::User(mut u) = EventBody::tool_result(id, text, false) else {
        unreachable!()
    };
    u.parent_tool_use_id = Some(parent.into());
    EventBody::User(u)
}

fn log() -> Vec<Event> {
    let bodies = vec![
        EventBody::user_text("fix auth"),
        EventBody::assistant(vec![
            ContentBlock::text("Looking around."),
            ContentBlock::tool_use(
                "todo1",
                "TodoWrite",
                json!({"todos":[
                {"content":"Read code","status":"completed"},
                {"content":"Write plan","status":"in_progress"}]}),
            ),
            ContentBlock::tool_use(
                "task1",
                "Task",
                json!({"subagent_type":"explore","description":"map auth"}),
            ),
        ]),
        sub(
            "task1",
            vec![ContentBlock::tool_use(
                "g1",
                "Grep",
                json!({"pattern":"login"}),
            )],
        ),
        sub_result("task1", "g1", "src/auth.rs:1"),
        EventBody::tool_result("task1", "Auth lives in **src/auth.rs**.", false),
        EventBody::assistant(vec![ContentBlock::tool_use(
            "q1",
            "AskUserQuestion",
            json!({"question":"Keep sessions?","options":["yes","no"]}),
        )]),
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, b)| stamp(i as i64 + 1, b))
        .collect()
}

#[test]
fn subagent_traffic_nests_under_its_task_and_results_fill_slots() {
    let mut digest = Digest::with_tree();
    for event in log() {
        digest.ingest(&event);
    }
    assert_eq!(digest.last_event_id, 6);
    assert_eq!(
        digest.question.as_ref().map(|q| q.text.as_str()),
        Some("Keep sessions?")
    );
    assert_eq!(
        digest.todos.iter().map(|t| t.glyph()).collect::<Vec<_>>(),
        ["✓", "◐"]
    );
    let entries = digest.into_entries();
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| match &e.kind {
            EntryKind::Prompt { .. } => "prompt",
            EntryKind::Text { .. } => "text",
            EntryKind::Tool { task: true, .. } => "task",
            EntryKind::Tool { .. } => "tool",
            EntryKind::Question { .. } => "question",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["prompt", "text", "tool", "task", "question"]);
    let task = &entries[3];
    assert_eq!(task.dom_id, "tool-task1");
    assert_eq!(task.children.len(), 1);
    assert_eq!(
        task.children[0].result.as_ref().map(|r| r.text.as_str()),
        Some("src/auth.rs:1")
    );
    let report = task
        .result
        .as_ref()
        .and_then(|r| r.html.as_deref())
        .unwrap_or("");
    assert!(report.contains("<strong>src/auth.rs</strong>"), "{report}");
}

#[test]
fn answers_decisions_and_results_update_the_state() {
    let mut digest = Digest::default();
    for event in log() {
        digest.ingest(&event);
    }
    let answer = digest.ingest(&stamp(7, EventBody::tool_result("q1", "yes", false)));
    assert_eq!(digest.question, None);
    assert_eq!(answer[0].place, Place::Result("q1".into()));
    digest.ingest(&stamp(
        8,
        EventBody::assistant(vec![ContentBlock::tool_use(
            "p1",
            "ExitPlanMode",
            json!({"plan":"# P"}),
        )]),
    ));
    let ops = digest.ingest(&stamp(
        9,
        EventBody::tool_result("p1", "no, more tests", true),
    ));
    let Item::Result(view) = &ops[0].item else {
        panic!("result expected")
    };
    assert_eq!(
        (view.label.as_str(), view.text.as_str()),
        ("Rejected with feedback", "no, more tests")
    );
    let plan = digest.ingest(&stamp(
        10,
        EventBody::assistant(vec![ContentBlock::tool_use(
            "p2",
            "ExitPlanMode",
            json!({"plan":"# P2"}),
        )]),
    ));
    let Item::Entry(e) = &plan[0].item else {
        panic!("entry expected")
    };
    assert_eq!(e.kind, EntryKind::Plan { revision: 2 });
    let failed = EventBody::Result(ResultEvent {
        subtype: "error_timeout".into(),
        is_error: true,
        result: None,
        num_turns: Some(3),
        duration_ms: Some(1500),
        usage: None,
        patch: None,
    });
    digest.ingest(&stamp(11, failed));
    assert_eq!(digest.last_result.as_deref(), Some("error_timeout"));
}

#[test]
fn a_plain_message_answers_a_question_and_orphan_results_still_show() {
    let mut digest = Digest::with_tree();
    digest.ingest(&stamp(
        1,
        EventBody::assistant(vec![ContentBlock::tool_use(
            "q",
            "AskUserQuestion",
            json!({"question":"?"}),
        )]),
    ));
    digest.ingest(&stamp(2, EventBody::user_text("no")));
    assert_eq!(digest.question, None);
    digest.ingest(&stamp(3, EventBody::tool_result("unknown", "text", false)));
    let entries = digest.into_entries();
    assert_eq!(entries.len(), 3);
    assert!(entries[2].result.is_some());
}
