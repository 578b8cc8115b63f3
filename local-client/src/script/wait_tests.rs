use serde_json::{Value, json};
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::patch::ExecutionState::{Executing, Finished};
use ultraplan_protocol::session::SessionStatus::{Archived, Idle, RequiresAction, Running};

use super::*;

fn events(bodies: Vec<EventBody>) -> Vec<Event> {
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| Event {
            id: i as i64 + 1,
            session_id: "s1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            body,
        })
        .collect()
}

fn plan() -> EventBody {
    EventBody::assistant(vec![ContentBlock::tool_use(
        "p1",
        "ExitPlanMode",
        json!({"plan": "# P"}),
    )])
}

fn failed() -> EventBody {
    EventBody::error_result("error_timeout", "too long".into())
}

/// What happened so far, by name.
fn progress(story: &str) -> Progress {
    let bodies = match story {
        "nothing" => vec![EventBody::user_text("go")],
        "plan" => vec![plan()],
        "rejected" => vec![plan(), EventBody::tool_result("p1", "no", true)],
        "approved" => vec![
            plan(),
            EventBody::tool_result("p1", "## Approved Plan:\n# P", false),
        ],
        "teleported" => vec![
            plan(),
            EventBody::tool_result("p1", "__ULTRAPLAN_TELEPORT_LOCAL__\n# P", true),
        ],
        "failed" => vec![failed()],
        "plan_failed" => vec![plan(), failed()],
        "approved_failed" => vec![
            plan(),
            EventBody::tool_result("p1", "## Approved Plan:\n# P", false),
            failed(),
        ],
        other => panic!("no story {other}"),
    };
    let mut p = Progress::new();
    p.ingest(&events(bodies)).unwrap();
    p
}

#[test]
fn verdicts() {
    use Until::{Decided as D, Done, Plan as P};
    use Verdict::{Ended as E, Reached as R, Waiting as W};
    let cases = [
        ("nothing", P, Running, None, W),
        ("nothing", P, Idle, None, W),
        ("nothing", P, Archived, None, E),
        ("failed", P, Idle, None, E),
        ("plan", P, RequiresAction, None, R),
        ("plan", D, RequiresAction, None, W),
        ("plan", D, Archived, None, E),
        ("plan_failed", P, Idle, None, R),
        ("plan_failed", D, Idle, None, E),
        ("rejected", P, Running, None, W),
        ("rejected", D, Running, None, W),
        ("approved", P, Running, Some(Executing), R),
        ("approved", D, Running, Some(Executing), R),
        ("approved", Done, Running, Some(Executing), W),
        ("approved", Done, Idle, Some(Finished), R),
        ("approved", Done, Archived, None, R),
        ("approved_failed", Done, Idle, Some(Executing), E),
        ("approved_failed", Done, Archived, Some(Executing), E),
        ("teleported", Done, RequiresAction, None, R),
        ("teleported", D, Archived, None, R),
        ("nothing", Done, Archived, None, E),
    ];
    for (story, until, status, execution, want) in cases {
        let got = progress(story).verdict(until, status, execution);
        assert_eq!(
            got, want,
            "{story} until {until:?} ({status:?}, {execution:?})"
        );
    }
}

#[test]
fn exit_codes() {
    let cases = [
        (Outcome::Reached, 0),
        (Outcome::Ended, 4),
        (Outcome::TimedOut, 3),
        (Outcome::Interrupted, 130),
    ];
    for (outcome, code) in cases {
        assert_eq!(outcome.exit_code(), code, "{outcome:?}");
    }
    assert_eq!((EXIT_ERROR, EXIT_USAGE), (1, 2));
}

#[test]
fn an_approval_without_its_marker_is_an_error() {
    let mut p = Progress::new();
    let bad = events(vec![plan(), EventBody::tool_result("p1", "ok", false)]);
    assert!(p.ingest(&bad).is_err());
}

fn session(status: &str, execution: Value) -> SessionResource {
    let mut value = json!({
        "type": "session", "id": "s1", "title": "t", "session_status": status,
        "phase": "plan_ready", "url": "http://x/sessions/s1",
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
        "session_context": {}, "usage": {"input_tokens": 1, "output_tokens": 2},
        "last_event_id": 7, "plan_revisions": 1,
    });
    if !execution.is_null() {
        value["execution"] = execution;
    }
    serde_json::from_value(value).unwrap()
}

#[test]
fn reports() {
    let reached = Report::new(
        "s1",
        Until::Plan,
        Outcome::Reached,
        &progress("plan"),
        Some(&session("requires_action", Value::Null)),
        7,
    );
    insta::assert_json_snapshot!("wait_json_reached", reached);
    assert_eq!(reached.sentence(), "Session s1 reached a plan.");
    let ended = Report::new(
        "s1\u{1b}[2J",
        Until::Done,
        Outcome::Ended,
        &progress("approved_failed"),
        Some(&session("archived", json!({"state": "executing"}))),
        9,
    );
    insta::assert_json_snapshot!("wait_json_ended", ended);
    assert_eq!(
        ended.sentence(),
        "Session s1 ended before the end of the work: its agent ended (error_timeout)."
    );
    let timed_out = Report::new(
        "s1",
        Until::Decided,
        Outcome::TimedOut,
        &Progress::new(),
        None,
        0,
    );
    insta::assert_json_snapshot!("wait_json_timed_out", timed_out);
    assert_eq!(
        timed_out.sentence(),
        "Timed out waiting for a decision in session s1 (status unknown)."
    );
}
