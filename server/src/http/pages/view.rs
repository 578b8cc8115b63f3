//! The session page's view model, built purely from what the store and the log say.

use std::sync::Arc;

use ultraplan_protocol::api::{Decision, PlanStatus};
use ultraplan_protocol::patch::ExecutionState;
use ultraplan_protocol::session::SessionStatus;

use super::changes::ChangesView;
use super::comments::CommentsView;
use super::diff::{self, Line};
use super::digest::{Digest, Question, Todo};
use super::format::{Pill, duration, pill, short, thousands};
use super::markdown::{Heading, render_plan};
use super::notice::Notice;
use crate::store::{AgentState, PlanRow, SessionRow, format_ms};

/// Everything the page is built from.
pub struct SessionInput<'a> {
    pub row: &'a SessionRow,
    pub plans: &'a [PlanRow],
    pub digest: &'a Digest,
    pub now_ms: i64,
    /// The launching terminal polled within the teleport window.
    pub terminal_polling: bool,
    pub stalled: bool,
    pub csrf: &'a str,
    pub notice: Option<Notice>,
    /// Remote execution and its patch (see [`super::changes::load`]).
    pub changes: Option<Arc<ChangesView>>,
    /// The owner's `timeout_seconds` flag, when known.
    pub timeout_seconds: Option<u64>,
}

/// The session page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionView {
    pub id: String,
    pub title: String,
    pub repo: Option<String>,
    pub branch: Option<String>,
    pub commit: Option<String>,
    pub pill: Pill,
    pub stalled: bool,
    /// Where the agent runs, or why none does (see [`placement`]).
    pub placement: Option<Placement>,
    pub archived: bool,
    pub created_iso: String,
    /// `2026-01-01 12:00 UTC` (the browser shows it in local time).
    pub created_label: String,
    pub csrf: String,
    pub notice: Option<Notice>,
    pub plan: Option<PlanPanel>,
    /// `4 min`: what is left of the time limit while a pending plan nears it.
    pub expires_in: Option<String>,
    pub question: Option<Question>,
    /// Earlier revisions, newest first.
    pub history: Vec<Revision>,
    pub outline: Vec<Heading>,
    pub todos: Vec<Todo>,
    pub usage: UsageView,
    pub last_event_id: i64,
    /// Remote execution of the approved plan.
    pub changes: Option<Arc<ChangesView>>,
    /// `3 files changed, +12 −2` once execution finished with a patch.
    pub executed: Option<String>,
    /// Inline comments on the plans ([`super::comments::attach`] fills them in).
    pub comments: CommentsView,
    /// The environment choice on the approve form ([`super::environments::attach`]).
    pub environment: EnvironmentView,
}

/// Which environment the session uses, and the named ones its owner could pick for the
/// execution when approving.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvironmentView {
    /// The named environment it uses; `None` for the repository's file.
    pub current: Option<String>,
    /// Named environments the owner can use (empty: no choice is offered).
    pub options: Vec<String>,
}

/// The newest plan and what can be done with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanPanel {
    pub tool_use_id: String,
    pub revision: u32,
    pub pending: bool,
    pub status_class: &'static str,
    pub status_label: &'static str,
    pub html: String,
    /// The Markdown shown in the edit box.
    pub markdown: String,
    /// Rejection feedback.
    pub feedback: Option<String>,
    /// The approved plan is the reviewer's edit.
    pub edited: bool,
    pub can_teleport: bool,
    pub diff: Option<DiffView>,
}

/// An earlier plan revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub revision: u32,
    pub status_class: &'static str,
    pub status_label: &'static str,
    pub html: String,
    pub feedback: Option<String>,
    pub diff: Option<DiffView>,
}

/// A line diff against the previous revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffView {
    pub from: u32,
    pub added: usize,
    pub removed: usize,
    pub lines: Vec<DiffLine>,
}

/// One diff line, ready to render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    pub sign: &'static str,
    pub class: &'static str,
    pub text: String,
}

/// Tokens, time and model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageView {
    pub input: String,
    pub output: String,
    pub cache_read: String,
    pub cache_write: String,
    pub total: String,
    pub elapsed: String,
    pub model: String,
    /// "N agents · M tool calls".
    pub activity: String,
}

/// A plan's status badge; `archived`: the session ended.
fn status(plan: &PlanRow, archived: bool) -> (&'static str, &'static str) {
    match plan.status {
        PlanStatus::Pending if archived => ("expired", "Not reviewed before the session ended"),
        PlanStatus::Pending => ("pending", "Waiting for your review"),
        PlanStatus::Approved => ("approved", "Approved"),
        PlanStatus::Rejected => ("rejected", "Rejected"),
        PlanStatus::Teleported => ("teleported", "Sent back to the terminal"),
    }
}

fn feedback(plan: &PlanRow) -> Option<String> {
    match &plan.decision {
        Some(Decision::Reject { feedback, .. }) => Some(feedback.clone()),
        _ => None,
    }
}

/// The reviewer's edit, when an approval changed the plan.
fn edited_plan(plan: &PlanRow) -> Option<&str> {
    match &plan.decision {
        Some(Decision::Approve { plan: Some(p) }) if p.trim() != plan.plan.trim() => Some(p),
        _ => None,
    }
}

fn diff_view(previous: Option<&PlanRow>, plan: &PlanRow) -> Option<DiffView> {
    let previous = previous?;
    let lines = diff::diff(&previous.plan, &plan.plan);
    let (added, removed) = diff::stats(&lines);
    let lines = lines
        .iter()
        .map(|l: &Line| DiffLine {
            sign: l.sign(),
            class: l.class(),
            text: l.text().to_owned(),
        })
        .collect();
    Some(DiffView {
        from: previous.revision,
        added,
        removed,
        lines,
    })
}

fn panel(
    plans: &[PlanRow],
    input: &SessionInput<'_>,
    archived: bool,
) -> Option<(PlanPanel, Vec<Heading>)> {
    let (newest, earlier) = plans.split_last()?;
    let (status_class, status_label) = status(newest, archived);
    let shown = edited_plan(newest).unwrap_or(&newest.plan);
    let rendered = render_plan(shown, &format!("plan-r{}-", newest.revision));
    let pending = newest.status == PlanStatus::Pending && !archived;
    let panel = PlanPanel {
        tool_use_id: newest.tool_use_id.clone(),
        revision: newest.revision,
        pending,
        status_class,
        status_label,
        html: rendered.html,
        markdown: newest.plan.clone(),
        feedback: feedback(newest),
        edited: edited_plan(newest).is_some(),
        can_teleport: pending && input.terminal_polling,
        diff: diff_view(earlier.last(), newest),
    };
    Some((panel, rendered.outline))
}

fn history(plans: &[PlanRow]) -> Vec<Revision> {
    let Some((_, earlier)) = plans.split_last() else {
        return Vec::new();
    };
    let mut out: Vec<Revision> = earlier
        .iter()
        .enumerate()
        .map(|(i, plan)| {
            let (status_class, status_label) = status(plan, false);
            let previous = i.checked_sub(1).and_then(|p| earlier.get(p));
            Revision {
                revision: plan.revision,
                status_class,
                status_label,
                html: render_plan(&plan.plan, &format!("rev{}-", plan.revision)).html,
                feedback: feedback(plan),
                diff: diff_view(previous, plan),
            }
        })
        .collect();
    out.reverse();
    out
}

fn usage(row: &SessionRow, digest: &Digest, now_ms: i64) -> UsageView {
    let u = row.usage;
    let end = row.archived_at.unwrap_or(now_ms);
    let model = row.context.model.clone().or_else(|| digest.model.clone());
    UsageView {
        input: thousands(u.input_tokens),
        output: thousands(u.output_tokens),
        cache_read: thousands(u.cache_read_input_tokens),
        cache_write: thousands(u.cache_creation_input_tokens),
        total: short(u.total()),
        elapsed: duration(end - row.created_at),
        model: model.unwrap_or_else(|| "default".to_owned()),
        activity: ultraplan_protocol::activity::summary(
            row.activity.counts(),
            row.activity.tool_calls,
        ),
    }
}

/// `2026-01-01T12:00:05.5Z` → `2026-01-01 12:00 UTC`.
pub fn time_label(iso: &str) -> String {
    match (iso.get(..10), iso.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => iso.to_owned(),
    }
}

/// Build the page's view.
pub fn session_view(input: &SessionInput<'_>) -> SessionView {
    let row = input.row;
    let archived = row.status == SessionStatus::Archived;
    let (plan, outline) = match panel(input.plans, input, archived) {
        Some((p, o)) => (Some(p), o),
        None => (None, Vec::new()),
    };
    let plan_pending = plan.as_ref().is_some_and(|p| p.pending);
    let expires_in = input
        .timeout_seconds
        .filter(|_| plan_pending)
        .and_then(|limit| super::expiry::expires_in(row.created_at, input.now_ms, limit));
    let question = input
        .digest
        .question
        .clone()
        .filter(|_| !archived && !plan_pending);
    let base = &row.context.base;
    SessionView {
        id: row.id.clone(),
        title: row.title.clone(),
        repo: row.context.repo.clone(),
        branch: base.branch.clone(),
        commit: base.commit.as_deref().map(|c| c.chars().take(10).collect()),
        pill: pill(
            row.status,
            row.has_pending_plan,
            input.digest.last_result.as_deref(),
            row.execution.as_ref().map(|e| e.state),
        ),
        stalled: input.stalled && !archived,
        placement: placement(row).filter(|_| !archived),
        archived,
        created_iso: format_ms(row.created_at),
        created_label: time_label(&format_ms(row.created_at)),
        csrf: input.csrf.to_owned(),
        notice: input.notice,
        plan,
        expires_in,
        question,
        history: history(input.plans),
        outline,
        todos: input.digest.todos.clone(),
        usage: usage(row, input.digest, input.now_ms),
        last_event_id: row.last_event_id.max(input.digest.last_event_id),
        changes: input.changes.clone(),
        executed: executed(row),
        comments: CommentsView::default(),
        environment: EnvironmentView::default(),
    }
}

/// Where a session's agent runs, said honestly (docs/ARCHITECTURE.md §5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// CSS class: `runner`, `parked` or `waiting`.
    pub class: &'static str,
    pub label: String,
    pub title: String,
}

/// The runner holding the session; "parked" while its agent gave its sandbox up to wait for
/// a person; "waiting for a runner" while queued. Nothing for sessions no agent is meant for.
pub fn placement(row: &SessionRow) -> Option<Placement> {
    let requeued = row
        .requeued_at
        .map(|at| {
            format!(
                " It went back to the queue at {} when its runner stopped answering.",
                format_ms(at)
            )
        })
        .unwrap_or_default();
    if let Some(runner) = &row.runner {
        return Some(Placement {
            class: "runner",
            label: format!("on {runner}"),
            title: format!("The agent runs on {runner}.{requeued}"),
        });
    }
    match row.agent_state {
        AgentState::Parked => Some(Placement {
            class: "parked",
            label: "parked".to_owned(),
            title: "The agent gave its sandbox up while it waits for you; it resumes from the \
                    session's log as soon as you answer."
                .to_owned(),
        }),
        AgentState::Queued | AgentState::Running => Some(Placement {
            class: "waiting",
            label: "waiting for a runner".to_owned(),
            title: format!(
                "Every runner is busy; the session starts on the next free one.{requeued}"
            ),
        }),
        AgentState::None | AgentState::Finished => None,
    }
}

/// The headline of a finished execution's patch.
fn executed(row: &SessionRow) -> Option<String> {
    let execution = row.execution.as_ref()?;
    if execution.state != ExecutionState::Finished {
        return None;
    }
    execution.patch.as_ref().map(|p| p.headline())
}

#[cfg(test)]
#[path = "view_tests.rs"]
pub(crate) mod tests;
