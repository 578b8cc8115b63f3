use serde_json::json;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::{BaseRef, SessionContext};

use super::*;
use crate::store::AgentState;

pub(crate) fn row(status: SessionStatus) -> SessionRow {
    SessionRow {
        id: "0b7c2f1e-session".into(),
        user_id: "u1".into(),
        title: "Fix the login redirect loop".into(),
        bundle_id: None,
        status,
        context: SessionContext {
            base: BaseRef {
                commit: Some("abc123def4567890".into()),
                branch: Some("main".into()),
                dirty: false,
            },
            model: Some("offline".into()),
            repo: Some("webapp".into()),
            ..SessionContext::default()
        },
        usage: Usage {
            input_tokens: 12_345,
            output_tokens: 2_100,
            cache_read_input_tokens: 40_000,
            cache_creation_input_tokens: 900,
        },
        last_event_id: 4,
        plan_revisions: 2,
        created_at: 1_767_225_600_000,
        updated_at: 1_767_225_900_000,
        last_activity_at: 1_767_225_900_000,
        archived_at: None,
        has_pending_plan: status == SessionStatus::RequiresAction,
        agent_state: AgentState::Running,
        activity: ultraplan_protocol::activity::Activity::default(),
        execution: None,
        runner: Some("runner-1".into()),
        requeued_at: None,
    }
}

pub(crate) fn plan(
    revision: u32,
    text: &str,
    status: PlanStatus,
    decision: Option<Decision>,
) -> PlanRow {
    PlanRow {
        session_id: "0b7c2f1e-session".into(),
        tool_use_id: format!("plan{revision}"),
        revision,
        plan: text.into(),
        status,
        decision,
        event_id: i64::from(revision) * 2,
        decision_event_id: None,
        created_at: 1_767_225_700_000,
        decided_at: None,
        addressed_comment_ids: None,
    }
}

fn view(row: &SessionRow, plans: &[PlanRow], digest: &Digest, polling: bool) -> SessionView {
    session_view(&SessionInput {
        row,
        plans,
        digest,
        now_ms: row.created_at + 125_000,
        terminal_polling: polling,
        stalled: true,
        csrf: "csrf-token",
        notice: None,
        changes: None,
        timeout_seconds: None,
    })
}

fn two_revisions() -> Vec<PlanRow> {
    let reject = Decision::Reject {
        feedback: "Add tests".into(),
        comment_ids: Vec::new(),
    };
    vec![
        plan(
            1,
            "# Plan\n1. Fix redirect",
            PlanStatus::Rejected,
            Some(reject),
        ),
        plan(
            2,
            "# Plan\n1. Fix redirect\n2. Add tests",
            PlanStatus::Pending,
            None,
        ),
    ]
}

#[test]
fn pending_plans_offer_actions_and_diff_against_the_previous_revision() {
    let row = row(SessionStatus::RequiresAction);
    let plans = two_revisions();
    let v = view(&row, &plans, &Digest::default(), false);
    let panel = v.plan.as_ref().expect("panel");
    assert!(panel.pending && !panel.can_teleport);
    assert_eq!(panel.revision, 2);
    let diff = panel.diff.as_ref().expect("diff");
    assert_eq!((diff.from, diff.added, diff.removed), (1, 1, 0));
    assert_eq!(v.history.len(), 1);
    assert_eq!(v.history[0].feedback.as_deref(), Some("Add tests"));
    assert_eq!(v.outline[0].anchor, "plan-r2-plan");
    assert_eq!(v.pill.label, "◆ ready");
    assert!(v.stalled);
    assert_eq!(v.usage.elapsed, "2 min 5 s");
    assert_eq!(v.commit.as_deref(), Some("abc123def4"));
    assert!(
        view(&row, &plans, &Digest::default(), true)
            .plan
            .is_some_and(|p| p.can_teleport)
    );
}

#[test]
fn archived_sessions_offer_nothing() {
    let mut row = row(SessionStatus::Archived);
    row.archived_at = Some(row.created_at + 60_000);
    let v = view(&row, &two_revisions(), &Digest::default(), true);
    let panel = v.plan.expect("panel");
    assert!(!panel.pending && !panel.can_teleport);
    assert!(!v.stalled);
    assert_eq!(v.usage.elapsed, "1 min 0 s");
}

#[test]
fn approved_edits_are_shown_as_approved() {
    let row = row(SessionStatus::Running);
    let approve = Decision::Approve {
        plan: Some("# Edited\nmine".into()),
    };
    let plans = vec![plan(
        1,
        "# Plan\ntheirs",
        PlanStatus::Approved,
        Some(approve),
    )];
    let panel = view(&row, &plans, &Digest::default(), false)
        .plan
        .expect("panel");
    assert!(panel.edited && !panel.pending);
    assert!(panel.html.contains("mine") && !panel.html.contains("theirs"));
}

#[test]
fn questions_show_unless_a_plan_waits() {
    let mut digest = Digest::default();
    let ask = EventBody::assistant(vec![ContentBlock::tool_use(
        "q1",
        "AskUserQuestion",
        json!({"question":"Which DB?"}),
    )]);
    digest.ingest(&Event {
        id: 1,
        session_id: "s".into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        body: ask,
    });
    let row = row(SessionStatus::Idle);
    assert_eq!(
        view(&row, &[], &digest, false)
            .question
            .map(|q| q.tool_use_id),
        Some("q1".into())
    );
    let plans = vec![plan(1, "# P", PlanStatus::Pending, None)];
    assert_eq!(view(&row, &plans, &digest, false).question, None);
    assert_eq!(time_label("2026-01-01T12:00:05.5Z"), "2026-01-01 12:00 UTC");
}

fn with_limit(row: &SessionRow, plans: &[PlanRow], since_ms: i64, limit: u64) -> SessionView {
    session_view(&SessionInput {
        row,
        plans,
        digest: &Digest::default(),
        now_ms: row.created_at + since_ms,
        terminal_polling: false,
        stalled: false,
        csrf: "csrf-token",
        notice: None,
        changes: None,
        timeout_seconds: Some(limit),
    })
}

fn review_html(v: &SessionView) -> String {
    use askama::Template;
    super::super::templates::ReviewRegion { v }
        .render()
        .expect("render")
}

#[test]
fn a_pending_plan_near_the_time_limit_says_when_it_expires() {
    let pending = row(SessionStatus::RequiresAction);
    let plans = two_revisions();
    // (ms since creation, limit s, what the page says is left)
    let table = [
        (60_000, 1800, None),
        (1_619_000, 1800, Some("4 min")),
        (1_790_000, 1800, Some("10 s")),
        (1_800_000, 1800, None),
    ];
    for (since, limit, want) in table {
        let v = with_limit(&pending, &plans, since, limit);
        assert_eq!(v.expires_in.as_deref(), want, "{since}");
        let html = review_html(&v);
        match want {
            Some(left) => assert!(
                html.contains(&format!(
                    "id=\"plan-expiry\" role=\"status\">This plan expires in {left}:"
                )),
                "{html}"
            ),
            None => assert!(!html.contains("plan-expiry"), "{html}"),
        }
    }
    // Nothing waits for review: no warning, however close the limit.
    let approved = vec![plan(1, "# Plan", PlanStatus::Approved, None)];
    let v = with_limit(&row(SessionStatus::Running), &approved, 1_790_000, 1800);
    assert_eq!(v.expires_in, None);
}

#[test]
fn a_plan_that_timed_out_unreviewed_stays_readable() {
    let mut row = row(SessionStatus::Archived);
    row.archived_at = Some(row.created_at + 1_800_000);
    let v = with_limit(&row, &two_revisions(), 1_790_000, 1800);
    let panel = v.plan.as_ref().expect("the plan is still shown");
    assert!(!panel.pending);
    assert_eq!(panel.status_class, "expired");
    assert_eq!(v.expires_in, None);
    let html = review_html(&v);
    assert!(html.contains("2. Add tests"), "{html}");
    assert!(html.contains("id=\"plan-kept\""), "{html}");
    assert!(html.contains("ultraplan pull 0b7c2f1e-session"), "{html}");
    assert!(!html.contains("id=\"approve\""), "{html}");
}

#[test]
fn placement_says_where_the_agent_runs_or_why_none_does() {
    let cases = [
        (
            AgentState::Running,
            Some("runner-a"),
            None,
            Some(("runner", "on runner-a")),
        ),
        (AgentState::Parked, None, None, Some(("parked", "parked"))),
        (
            AgentState::Queued,
            None,
            None,
            Some(("waiting", "waiting for a runner")),
        ),
        (
            AgentState::Running,
            None,
            Some(0),
            Some(("waiting", "waiting for a runner")),
        ),
        (AgentState::Finished, None, None, None),
        (AgentState::None, None, None, None),
    ];
    for (state, runner, requeued_at, want) in cases {
        let mut r = row(SessionStatus::Running);
        r.agent_state = state;
        r.runner = runner.map(str::to_owned);
        r.requeued_at = requeued_at;
        let got = placement(&r);
        assert_eq!(
            got.as_ref().map(|p| (p.class, p.label.as_str())),
            want,
            "{state:?} {runner:?}"
        );
        if let (Some(p), Some(_)) = (&got, requeued_at) {
            assert!(p.title.contains("1970-01-01T00:00:00Z"), "{}", p.title);
        }
    }
    let mut archived = row(SessionStatus::Archived);
    archived.agent_state = AgentState::Parked;
    assert_eq!(
        view(&archived, &[], &Digest::default(), false).placement,
        None
    );
}
