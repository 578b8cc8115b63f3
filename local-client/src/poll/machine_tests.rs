use std::time::Duration;

use serde_json::json;
use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody, ResultEvent};
use ultraplan_protocol::plan_text::decision_tool_result;
use ultraplan_protocol::session::{Phase, SessionStatus};

use super::*;

fn stamp(id: i64, body: EventBody) -> Event {
    Event {
        id,
        session_id: "s".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        body,
    }
}

fn plan_call(id: i64, tool_use_id: &str) -> Event {
    stamp(
        id,
        EventBody::assistant(vec![ContentBlock::tool_use(
            tool_use_id,
            "ExitPlanMode",
            json!({"plan": "input plan"}),
        )]),
    )
}

fn decision(id: i64, tool_use_id: &str, decision: &Decision) -> Event {
    let (text, is_error) = decision_tool_result(decision, "the plan");
    stamp(id, EventBody::tool_result(tool_use_id, text, is_error))
}

fn tick(events: Vec<Event>, status: SessionStatus) -> Input {
    Input::Polled(Tick {
        activity: None,
        events,
        status,
        usage: None,
        parked: false,
    })
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn machine() -> Machine {
    Machine::new(PollConfig::default(), secs(0))
}

const SLEEP: Action = Action::Sleep(Duration::from_secs(3));
const FAILED: [Action; 3] = [Action::Archive, Action::WriteState, Action::Finish];

#[test]
fn approval_finishes_without_archiving() {
    let mut m = machine();
    let first = m.step(
        tick(vec![plan_call(1, "t1")], SessionStatus::RequiresAction),
        secs(0),
    );
    assert_eq!(
        first,
        [Action::Notify(Phase::PlanReady), Action::WriteState, SLEEP]
    );
    assert_eq!(m.view().phase(), Phase::PlanReady);
    let approve = Decision::Approve { plan: None };
    let done = m.step(
        tick(vec![decision(2, "t1", &approve)], SessionStatus::Running),
        secs(3),
    );
    assert_eq!(done, [Action::WriteState, Action::Finish]);
    assert_eq!(m.view().outcome, Some(Outcome::Approved));
    assert_eq!(m.view().plan.as_deref(), Some("the plan"));
    assert_eq!(m.view().last_event_id, 2);
    assert_eq!(m.step(Input::Stop, secs(4)), [Action::Finish]);
}

#[test]
fn teleport_records_the_plan_without_archiving() {
    let mut m = machine();
    let events = vec![
        plan_call(1, "t1"),
        decision(2, "t1", &Decision::Teleport {}),
    ];
    assert_eq!(
        m.step(tick(events, SessionStatus::Idle), secs(0)),
        [Action::WriteState, Action::Finish]
    );
    assert_eq!(m.view().outcome, Some(Outcome::Teleport));
    assert_eq!(m.view().plan.as_deref(), Some("the plan"));
}

#[test]
fn rejection_counts_and_keeps_polling() {
    let mut m = machine();
    m.step(
        tick(vec![plan_call(1, "t1")], SessionStatus::RequiresAction),
        secs(0),
    );
    let reject = Decision::Reject {
        feedback: "more tests".into(),
        comment_ids: Vec::new(),
    };
    let actions = m.step(
        tick(vec![decision(2, "t1", &reject)], SessionStatus::Running),
        secs(3),
    );
    assert_eq!(actions, [Action::WriteState, SLEEP]);
    assert_eq!(m.view().rejection_count, 1);
    assert_eq!(m.view().phase(), Phase::Running);
    let actions = m.step(
        tick(vec![plan_call(3, "t2")], SessionStatus::RequiresAction),
        secs(6),
    );
    assert_eq!(actions[0], Action::Notify(Phase::PlanReady));
    let approve = Decision::Approve { plan: None };
    let done = m.step(
        tick(vec![decision(4, "t2", &approve)], SessionStatus::Running),
        secs(9),
    );
    assert_eq!(done, [Action::WriteState, Action::Finish]);
    assert_eq!(m.view().outcome, Some(Outcome::Approved));
}

#[test]
fn terminated_and_marker_missing_archive() {
    let mut m = machine();
    let end = server_result(1, "error_during_execution");
    assert_eq!(
        m.step(tick(vec![end], SessionStatus::Idle), secs(0)),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::Terminated));
    assert_eq!(
        m.view().failure_detail.as_deref(),
        Some("error_during_execution")
    );

    let mut m = machine();
    let bare = stamp(2, EventBody::tool_result("t1", "ok, approved", false));
    assert_eq!(
        m.step(
            tick(vec![plan_call(1, "t1"), bare], SessionStatus::Running),
            secs(0)
        ),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::ExtractMarkerMissing));
}

#[test]
fn timeouts_tell_pending_from_no_plan() {
    let config = PollConfig {
        timeout: secs(10),
        ..PollConfig::default()
    };
    let mut m = Machine::new(config, secs(100));
    assert_eq!(
        m.step(tick(vec![], SessionStatus::Running), secs(109)),
        [Action::WriteState, SLEEP]
    );
    assert_eq!(
        m.step(tick(vec![], SessionStatus::Running), secs(110)),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::TimeoutNoPlan));
    assert_eq!(m.view().plan, None);

    let mut m = Machine::new(config, secs(0));
    m.step(
        tick(vec![plan_call(1, "t1")], SessionStatus::RequiresAction),
        secs(0),
    );
    assert_eq!(
        m.step(tick(vec![], SessionStatus::RequiresAction), secs(12)),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::TimeoutPending));
    // The plan nobody reviewed is kept for the driver to save.
    assert_eq!(m.view().plan.as_deref(), Some("input plan"));
}

fn server_result(id: i64, subtype: &str) -> Event {
    stamp(
        id,
        EventBody::Result(ResultEvent {
            subtype: subtype.into(),
            is_error: true,
            result: None,
            num_turns: None,
            duration_ms: None,
            usage: None,
            patch: None,
        }),
    )
}

#[test]
fn the_servers_timeout_result_is_the_timeout_it_is() {
    // (events before the result, whether a plan was pending, the reason the user sees)
    let table = [
        (vec![], FailureReason::TimeoutNoPlan),
        (vec![plan_call(1, "t1")], FailureReason::TimeoutPending),
    ];
    for (before, reason) in table {
        let mut m = machine();
        m.step(tick(before, SessionStatus::RequiresAction), secs(0));
        let end = server_result(9, "error_timeout");
        // The server archives the session as it times it out.
        assert_eq!(
            m.step(tick(vec![end], SessionStatus::Archived), secs(3)),
            FAILED,
            "{reason}"
        );
        assert_eq!(m.view().failure, Some(reason));
        assert_eq!(m.view().failure_detail.as_deref(), Some("after 30 min"));
    }
    // Any other error result is a termination.
    let mut m = machine();
    m.step(tick(vec![plan_call(1, "t1")], SessionStatus::Idle), secs(0));
    let end = server_result(2, "error_max_turns");
    assert_eq!(
        m.step(tick(vec![end], SessionStatus::Idle), secs(3)),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::Terminated));
}

#[test]
fn the_limit_is_measured_from_the_sessions_creation() {
    // The session had run 8 s of its 10 when the watch started at 100.
    let config = PollConfig {
        timeout: secs(10),
        elapsed: secs(8),
        ..PollConfig::default()
    };
    let mut m = Machine::new(config, secs(100));
    assert_eq!(
        m.step(tick(vec![], SessionStatus::Running), secs(101)),
        [Action::WriteState, SLEEP]
    );
    assert_eq!(
        m.step(tick(vec![], SessionStatus::Running), secs(102)),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::TimeoutNoPlan));
    assert_eq!(m.view().failure_detail.as_deref(), Some("after 10 s"));

    // Past the limit, the archive the server makes is the timeout, not a stop; an approval
    // that arrived in time still wins.
    let late = PollConfig {
        timeout: secs(10),
        elapsed: secs(30),
        ..PollConfig::default()
    };
    let mut m = Machine::new(late, secs(0));
    assert_eq!(
        m.step(
            tick(vec![plan_call(1, "t1")], SessionStatus::Archived),
            secs(0)
        ),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::TimeoutPending));
    let mut m = Machine::new(late, secs(0));
    let approve = Decision::Approve { plan: None };
    let events = vec![plan_call(1, "t1"), decision(2, "t1", &approve)];
    m.step(tick(events, SessionStatus::Running), secs(0));
    assert_eq!(m.view().outcome, Some(Outcome::Approved));
}

#[test]
fn four_transient_failures_survive_the_fifth_ends_it() {
    let mut m = machine();
    let blip = ApiError::from_response(503, b"busy");
    for n in 1..=4 {
        assert_eq!(
            m.step(Input::Failed(blip.clone()), secs(n)),
            [Action::WriteState, SLEEP]
        );
    }
    m.step(tick(vec![], SessionStatus::Running), secs(5));
    assert_eq!(m.view().transient_failures, 0, "a success resets the count");
    for n in 1..=4 {
        m.step(Input::Failed(blip.clone()), secs(5 + n));
    }
    assert_eq!(m.step(Input::Failed(blip), secs(10)), FAILED);
    assert_eq!(m.view().failure, Some(FailureReason::NetworkOrUnknown));
    assert!(
        m.view()
            .failure_detail
            .as_deref()
            .unwrap()
            .contains("5 polls")
    );
}

#[test]
fn a_permanent_error_ends_it_at_once() {
    let mut m = machine();
    let gone = ApiError::from_response(404, br#"{"error":{"code":"not_found","message":"gone"}}"#);
    assert_eq!(m.step(Input::Failed(gone), secs(0)), FAILED);
    assert_eq!(m.view().failure, Some(FailureReason::NetworkOrUnknown));
    assert!(m.view().failure_detail.as_deref().unwrap().contains("gone"));
}

#[test]
fn archived_elsewhere_or_stop_is_stopped() {
    let mut m = machine();
    assert_eq!(
        m.step(tick(vec![], SessionStatus::Archived), secs(0)),
        FAILED
    );
    assert_eq!(m.view().failure, Some(FailureReason::Stopped));
    let mut m = machine();
    assert_eq!(m.step(Input::Stop, secs(0)), FAILED);
    assert_eq!(m.view().failure, Some(FailureReason::Stopped));
}

#[test]
fn needs_input_when_idle_without_news_and_notifies_once() {
    let mut m = machine();
    let first = stamp(1, EventBody::user_text("hi"));
    assert_eq!(
        m.step(tick(vec![first], SessionStatus::Idle), secs(0)),
        [Action::WriteState, SLEEP]
    );
    assert_eq!(m.view().phase(), Phase::Running);
    assert_eq!(
        m.step(tick(vec![], SessionStatus::Idle), secs(3)),
        [Action::Notify(Phase::NeedsInput), Action::WriteState, SLEEP]
    );
    assert_eq!(
        m.step(tick(vec![], SessionStatus::Idle), secs(6)),
        [Action::WriteState, SLEEP]
    );
}

#[test]
fn a_pending_plan_near_the_limit_says_when_it_expires() {
    let config = PollConfig {
        timeout: secs(100),
        ..PollConfig::default()
    };
    let mut m = Machine::new(config, secs(0));
    // (time of the poll, what is left shown)
    let table = [
        (0, None),
        (79, None),
        (80, Some(secs(20))),
        (95, Some(secs(5))),
    ];
    for (at, want) in table {
        m.step(
            tick(vec![plan_call(1, "t1")], SessionStatus::RequiresAction),
            secs(at),
        );
        assert_eq!(m.view().expires_in, want, "at {at}");
    }
    // No plan pending, no warning.
    let mut m = Machine::new(config, secs(0));
    m.step(tick(vec![], SessionStatus::Running), secs(95));
    assert_eq!(m.view().expires_in, None);
}
