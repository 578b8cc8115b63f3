//! Snapshots of the rendered templates for a fixed session (fixed ids and timestamps).

use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use serde_json::json;
use ultraplan_protocol::api::{Decision, PlanStatus};
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::patch::{Execution, ExecutionState, FileChange, PatchFile, PatchSummary};
use ultraplan_protocol::session::SessionStatus;

use super::changes::changes_view;
use super::digest::Digest;
use super::list::list_rows;
use super::notice::Notice;
use super::session::{finish_timeline, regions};
use super::templates::{Layout, ListPage, LoginPage, SessionPage};
use super::view::tests::{plan, row};
use super::view::{SessionInput, session_view};
use crate::store::PatchRow;

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
    insta::assert_snapshot!(stable(&review_page(|_| {})));
}

/// Comments on both revisions; hostile text in them renders inert.
#[test]
fn session_page_with_comments() {
    use super::comments::comments_view;
    use ultraplan_protocol::comments::{AddressedBy, CommentState, PlanComment};
    let comment = |id: &str, on: &str, quote: &str, body: &str, state| PlanComment {
        id: id.into(),
        session_id: "0b7c2f1e-session".into(),
        tool_use_id: on.into(),
        quote: quote.into(),
        heading_path: vec!["Plan".into(), "Steps".into()],
        body: body.into(),
        author: "alice".into(),
        created_at: "2026-01-01T00:05:00Z".into(),
        state,
        addressed_by: (state == CommentState::Addressed).then_some(AddressedBy::Agent),
        reopened_from: None,
    };
    let comments = [
        comment(
            "cmt_1",
            "plan1",
            "Fix the redirect",
            "Which redirect?",
            CommentState::Addressed,
        ),
        comment(
            "cmt_2",
            "plan2",
            "Add a regression test",
            "<script>alert(1)</script> & <img src=x onerror=alert(2)>",
            CommentState::Open,
        ),
    ];
    let revisions = [("plan1".to_owned(), 1), ("plan2".to_owned(), 2)];
    let html = review_page(|v| v.comments = comments_view(&comments, &revisions, true));
    assert!(!html.contains("<script>alert"), "comment text is escaped");
    assert!(!html.contains("<img src=x"), "comment text is escaped");
    insta::assert_snapshot!(stable(&html));
}

/// The session page of a pending revision 2 after a rejected revision 1, with `tweak`
/// applied to its view.
fn review_page(tweak: impl FnOnce(&mut super::view::SessionView)) -> String {
    let row = row(SessionStatus::RequiresAction);
    let reject = Decision::Reject {
        feedback: "Add tests <b>please</b>".into(),
        comment_ids: Vec::new(),
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
    let mut v = session_view(&SessionInput {
        row: &row,
        plans: &plans,
        digest: &digest,
        now_ms: row.created_at + 300_000,
        terminal_polling: true,
        stalled: false,
        csrf: "csrf-token",
        notice: Some(Notice::Rejected),
        changes: None,
        timeout_seconds: None,
    });
    tweak(&mut v);
    let page = SessionPage {
        layout: layout(&v.title),
        regions: regions(&v).expect("regions"),
        timeline: finish_timeline(digest.into_entries()).expect("timeline"),
        v,
    };
    page.render().expect("render")
}

/// A patch of two files: one edited text file, one new binary file.
pub(crate) const TWO_FILE_PATCH: &str = concat!(
    "diff --git a/src/auth.rs b/src/auth.rs\n",
    "index 4cb29ea38f70d7c61b2a3a25b02e3bdf44905402..047ece5a1a9528405383f9b570697bef4a035387 100644\n",
    "--- a/src/auth.rs\n",
    "+++ b/src/auth.rs\n",
    "@@ -10,4 +10,5 @@ fn login(req: &Request) -> Response {\n",
    "     let user = authenticate(req)?;\n",
    "-    redirect(\"/login\")\n",
    "+    set_cookie(&user);\n",
    "+    redirect(\"/home\") // <b>not</b> bold\n",
    " }\n",
    " \n",
    "diff --git a/assets/logo.png b/assets/logo.png\n",
    "new file mode 100644\n",
    "index 0000000000000000000000000000000000000000..4227ca4e8736af63036e7457e2db376ddf7e5795\n",
    "GIT binary patch\n",
    "literal 3\n",
    "KcmZQzU;qFB0{{U4\n",
    "\n",
    "literal 0\n",
    "HcmV?d00001\n",
    "\n",
);

/// The summary the server computes for [`TWO_FILE_PATCH`].
pub(crate) fn two_file_summary() -> PatchSummary {
    PatchSummary {
        files: vec![
            PatchFile {
                path: "src/auth.rs".into(),
                change: FileChange::Modified,
                additions: 2,
                deletions: 1,
                binary: false,
            },
            PatchFile {
                path: "assets/logo.png".into(),
                change: FileChange::Added,
                additions: 0,
                deletions: 0,
                binary: true,
            },
        ],
        additions: 2,
        deletions: 1,
        bytes: TWO_FILE_PATCH.len() as u64,
        base_commit: Some("abc123def4567890".into()),
        left_out: Vec::new(),
        verdict: Some(Box::new(ultraplan_protocol::verdict::Verdict {
            verdict: ultraplan_protocol::verdict::VerdictOutcome::Fail,
            evidence: "Ran `cargo test`: exit code 101.\nFailing: auth::tests::login <rejects>"
                .into(),
        })),
    }
}

/// The log of a plan approved for execution, then (when `result` is given) its end.
fn execution_events(result: Option<(&str, PatchSummary)>) -> Vec<Event> {
    let mut bodies = vec![
        EventBody::user_text("ultraplan fix the login redirect loop"),
        EventBody::assistant(vec![ContentBlock::tool_use(
            "plan1",
            "ExitPlanMode",
            json!({"plan":"# Plan"}),
        )]),
        EventBody::tool_result("plan1", "## Approved Plan:\n# Plan\n1. Set the cookie", false),
        serde_json::from_value(json!({"type":"system","subtype":"execution_started",
            "message":"The plan was approved: the agent implements it in a writable copy of the repository."}))
        .expect("system event"),
        EventBody::assistant(vec![ContentBlock::text("Setting the cookie before the redirect.")]),
    ];
    if let Some((text, summary)) = result {
        bodies.push(
            serde_json::from_value(json!({"type":"result","subtype":"success","is_error":false,
                "result": text, "patch": summary}))
            .expect("result event"),
        );
    }
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

/// The whole session page of an approved plan in the given execution state.
fn execution_page(
    execution: Execution,
    patch: Option<&PatchRow>,
    result: Option<(&str, PatchSummary)>,
) -> String {
    let mut row = row(SessionStatus::Idle);
    row.execution = Some(execution);
    let approve = Decision::Approve { plan: None };
    let plans = vec![plan(
        1,
        "# Plan\n1. Set the cookie",
        PlanStatus::Approved,
        Some(approve),
    )];
    let mut digest = Digest::with_tree();
    for event in execution_events(result) {
        digest.ingest(&event);
    }
    let changes = changes_view(row.execution.as_ref(), patch).map(Arc::new);
    let v = session_view(&SessionInput {
        row: &row,
        plans: &plans,
        digest: &digest,
        now_ms: row.created_at + 300_000,
        terminal_polling: false,
        stalled: false,
        csrf: "csrf-token",
        notice: None,
        changes,
        timeout_seconds: None,
    });
    let page = SessionPage {
        layout: layout(&v.title),
        regions: regions(&v).expect("regions"),
        timeline: finish_timeline(digest.into_entries()).expect("timeline"),
        v,
    };
    stable(&page.render().expect("render"))
}

fn patch_row(diff: &str, summary: PatchSummary) -> PatchRow {
    PatchRow {
        session_id: "0b7c2f1e-session".into(),
        diff: diff.as_bytes().to_vec(),
        summary,
        created_at: 1_767_226_000_000,
    }
}

#[test]
fn session_page_executing() {
    let executing = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    let html = execution_page(executing, None, None);
    assert!(html.contains("◇ executing") && html.contains("The agent is implementing"));
    insta::assert_snapshot!(html);
}

#[test]
fn session_page_executed_with_a_patch() {
    let summary = two_file_summary();
    let finished = Execution {
        state: ExecutionState::Finished,
        patch: Some(summary.clone()),
    };
    let patch = patch_row(TWO_FILE_PATCH, summary.clone());
    let text = "Remote execution finished: 2 files changed, +2 −1.\n\nM  src/auth.rs (+2 −1)\nA  assets/logo.png (binary)\n\nApply it to your checkout with `ultraplan pull 0b7c2f1e-session`.";
    let html = execution_page(finished, Some(&patch), Some((text, summary)));
    assert!(html.contains("◆ executed") && html.contains("2 files changed, +2 −1"));
    assert!(html.contains("Binary file added (3 bytes)") && !html.contains("KcmZQzU"));
    assert!(!html.contains("<b>not"), "diff text is escaped");
    insta::assert_snapshot!(html);
}

#[test]
fn session_page_executed_without_changes() {
    let summary = PatchSummary::default();
    let finished = Execution {
        state: ExecutionState::Finished,
        patch: Some(summary.clone()),
    };
    let patch = patch_row("", summary.clone());
    let text =
        "Remote execution finished: no changes. The workspace is identical to the uploaded bundle.";
    let html = execution_page(finished, Some(&patch), Some((text, summary)));
    assert!(html.contains("No changes: the execution left the repository as it was."));
    assert!(!html.contains("patch.diff"));
    insta::assert_snapshot!(html);
}

#[test]
fn session_page_executed_without_a_patch() {
    let finished = Execution {
        state: ExecutionState::Finished,
        patch: None,
    };
    let html = execution_page(finished, None, None);
    assert!(html.contains("The execution ended without a patch; see the log"));
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
