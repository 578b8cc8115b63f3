//! Snapshots of the rendered templates for a fixed session (fixed ids and timestamps).

use std::collections::HashMap;

use askama::Template;
use serde_json::json;
use ultraplan_protocol::api::{Decision, PlanStatus};
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::session::SessionStatus;

use super::digest::Digest;
use super::list::list_rows;
use super::notice::Notice;
use super::session::{finish_timeline, regions};
use super::templates::{Layout, ListPage, LoginPage, SessionPage};
use super::view::tests::{plan, row};
use super::view::{SessionInput, session_view};

/// Asset URLs carry content hashes; keep snapshots stable when CSS or JS change.
fn stable(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(i) = rest.find("/static/") {
        out.push_str(&rest[..i + 8]);
        rest = &rest[i + 8..];
        if rest.len() > 16 && rest[..16].bytes().all(|b| b.is_ascii_hexdigit()) {
            out.push_str("[hash]");
            rest = &rest[16..];
        }
    }
    out.push_str(rest);
    out
}

fn layout(title: &str) -> Layout {
    Layout {
        user: Some("alice".into()),
        csrf: "csrf-token".into(),
        ..Layout::anonymous(title)
    }
}

fn events() -> Vec<Event> {
    let bodies = vec![
        EventBody::user_text("ultraplan fix the login redirect loop"),
        EventBody::assistant(vec![
            ContentBlock::text("I'll map the **auth** flow first."),
            ContentBlock::tool_use(
                "todo1",
                "TodoWrite",
                json!({"todos":[
                {"content":"Find the redirect","status":"completed"},
                {"content":"Draft the plan","status":"in_progress"},
                {"content":"Check tests","status":"pending"}]}),
            ),
            ContentBlock::tool_use(
                "task1",
                "Task",
                json!({"subagent_type":"explore","description":"Find where redirects happen"}),
            ),
        ]),
        EventBody::tool_result("todo1", "Todo list updated.", false),
        EventBody::tool_result("task1", "Redirects happen in `src/auth.rs`.", false),
        EventBody::assistant(vec![ContentBlock::tool_use(
            "plan1",
            "ExitPlanMode",
            json!({"plan":"# Plan"}),
        )]),
        EventBody::tool_result("plan1", "Add tests <b>please</b>", true),
        EventBody::assistant(vec![ContentBlock::tool_use(
            "plan2",
            "ExitPlanMode",
            json!({"plan":"# Plan"}),
        )]),
    ];
    bodies
        .into_iter()
        .zip(1..)
        .map(|(body, id)| Event {
            id,
            session_id: "0b7c2f1e-session".into(),
            created_at: format!("2026-01-01T00:0{id}:00Z"),
            body,
        })
        .collect()
}

#[test]
fn session_page() {
    let row = row(SessionStatus::RequiresAction);
    let reject = Decision::Reject {
        feedback: "Add tests <b>please</b>".into(),
    };
    let plans = vec![
        plan(
            1,
            "# Plan\n\n## Steps\n1. Fix the redirect in `src/auth.rs`",
            PlanStatus::Rejected,
            Some(reject),
        ),
        plan(
            2,
            "# Plan\n\n## Steps\n1. Fix the redirect in `src/auth.rs`\n2. Add a regression test\n\n## Risks\nNone.",
            PlanStatus::Pending,
            None,
        ),
    ];
    let mut digest = Digest::with_tree();
    for event in events() {
        digest.ingest(&event);
    }
    let v = session_view(&SessionInput {
        row: &row,
        plans: &plans,
        digest: &digest,
        now_ms: row.created_at + 300_000,
        terminal_polling: true,
        stalled: false,
        csrf: "csrf-token",
        notice: Some(Notice::Rejected),
    });
    let page = SessionPage {
        layout: layout(&v.title),
        regions: regions(&v).expect("regions"),
        timeline: finish_timeline(digest.into_entries()).expect("timeline"),
        v,
    };
    insta::assert_snapshot!(stable(&page.render().expect("render")));
}

#[test]
fn list_page() {
    let mut failed = row(SessionStatus::Archived);
    failed.id = "failed-session".into();
    failed.title = "<img src=x onerror=alert(1)>".into();
    let rows = [row(SessionStatus::RequiresAction), failed];
    let results = HashMap::from([("failed-session".to_owned(), "error_timeout".to_owned())]);
    let rows = list_rows(
        &rows,
        &results,
        &|id| id == "0b7c2f1e-session",
        rows[0].created_at + 7_200_000,
    );
    let page = ListPage {
        layout: layout("Sessions"),
        rows,
    };
    insta::assert_snapshot!(stable(&page.render().expect("render")));
}

#[test]
fn login_page() {
    let page = LoginPage {
        layout: Layout::anonymous("Log in"),
        form_token: "form-token".into(),
        next: "/sessions/x".into(),
        error: Some("That token is not valid.".into()),
    };
    insta::assert_snapshot!(stable(&page.render().expect("render")));
}
