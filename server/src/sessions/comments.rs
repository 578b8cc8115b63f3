//! Inline comments on plan passages: add one to a pending plan, list a plan's, reopen one on
//! the current revision, and resolve the ones a rejection names (docs/ARCHITECTURE.md §3.2).
//! One path for the API and the review page.

use ultraplan_protocol::api::PlanStatus;
use ultraplan_protocol::comments::{MAX_COMMENTS_PER_PLAN, NewComment, PlanComment};
use ultraplan_protocol::session::SessionStatus;

use super::{SessionError, SessionResult};
use crate::comments::Verdict;
use crate::core::Core;
use crate::store::{AddComment, CommentRow, PlanRow, SessionRow, now_ms};

fn new_id() -> String {
    format!("cmt_{}", uuid::Uuid::new_v4().simple())
}

fn open_session(session: &SessionRow) -> SessionResult<()> {
    match session.status {
        SessionStatus::Archived => Err(SessionError::Archived(
            "the session is archived; its plans take no more comments",
        )),
        _ => Ok(()),
    }
}

async fn plan_of(core: &Core, session: &SessionRow, tool_use_id: &str) -> SessionResult<PlanRow> {
    core.store
        .plan(&session.id, tool_use_id)
        .await?
        .ok_or(SessionError::NotFound("plan"))
}

fn added(outcome: AddComment, tool_use_id: &str) -> SessionResult<PlanComment> {
    match outcome {
        AddComment::Added(row) => Ok(row.to_resource(Verdict::Current)),
        AddComment::UnknownPlan => Err(SessionError::NotFound("plan")),
        AddComment::NotPending => Err(SessionError::PlanNotPending(tool_use_id.to_owned())),
        AddComment::Full => Err(SessionError::invalid(
            "too_many_comments",
            format!("a plan takes at most {MAX_COMMENTS_PER_PLAN} comments"),
        )),
        AddComment::AlreadyReopened => Err(SessionError::invalid(
            "comment_already_reopened",
            "the comment was reopened already",
        )),
    }
}

/// Comment on a passage of the pending plan `tool_use_id`, as `author_id`.
pub async fn add_comment(
    core: &Core,
    session: &SessionRow,
    author_id: &str,
    tool_use_id: &str,
    new: &NewComment,
) -> SessionResult<PlanComment> {
    open_session(session)?;
    let plan = plan_of(core, session, tool_use_id).await?;
    if plan.status != PlanStatus::Pending {
        return Err(SessionError::PlanNotPending(tool_use_id.to_owned()));
    }
    let heading_path = crate::comments::check(&plan.plan, &new.quote, &new.body)
        .map_err(|r| SessionError::invalid(r.code, r.message))?;
    let row = CommentRow {
        id: new_id(),
        session_id: session.id.clone(),
        tool_use_id: tool_use_id.to_owned(),
        quote: new.quote.clone(),
        heading_path,
        body: new.body.trim().to_owned(),
        author_id: author_id.to_owned(),
        author: String::new(),
        created_at: now_ms(),
        reopened: false,
        reopened_from: None,
    };
    let outcome = core
        .store
        .add_plan_comment(&row, MAX_COMMENTS_PER_PLAN)
        .await?;
    added(outcome, tool_use_id)
}

/// Every comment of the session with its state, judged by the revision after its plan: open
/// until one exists, then addressed or open as that revision's agent says
/// ([`crate::comments::comment_state`]).
pub async fn session_comments(core: &Core, session_id: &str) -> SessionResult<Vec<PlanComment>> {
    let plans = core.store.list_plans(session_id).await?;
    let rows = core.store.plan_comments(session_id).await?;
    Ok(rows
        .iter()
        .map(|c| c.to_resource(verdict_on(&plans, &c.tool_use_id)))
        .collect())
}

/// What the revision after plan `tool_use_id` says about its comments.
fn verdict_on<'a>(plans: &'a [PlanRow], tool_use_id: &str) -> Verdict<'a> {
    let Some(revision) = plans
        .iter()
        .find(|p| p.tool_use_id == tool_use_id)
        .map(|p| p.revision)
    else {
        return Verdict::Current;
    };
    let next = plans
        .iter()
        .filter(|p| p.revision > revision)
        .min_by_key(|p| p.revision);
    match next {
        Some(next) => Verdict::Revised(next.addressed_comment_ids.as_deref()),
        None => Verdict::Current,
    }
}

/// The comments on plan `tool_use_id`, oldest first.
pub async fn list_comments(
    core: &Core,
    session: &SessionRow,
    tool_use_id: &str,
) -> SessionResult<Vec<PlanComment>> {
    plan_of(core, session, tool_use_id).await?;
    let mut all = session_comments(core, &session.id).await?;
    all.retain(|c| c.tool_use_id == tool_use_id);
    Ok(all)
}

/// Reopen comment `comment_id` of plan `tool_use_id`: carry it over, as a new open comment,
/// to the session's pending plan (a later revision).
pub async fn reopen_comment(
    core: &Core,
    session: &SessionRow,
    author_id: &str,
    tool_use_id: &str,
    comment_id: &str,
) -> SessionResult<PlanComment> {
    open_session(session)?;
    let rows = core.store.plan_comments(&session.id).await?;
    let old = rows
        .into_iter()
        .find(|c| c.id == comment_id && c.tool_use_id == tool_use_id)
        .ok_or(SessionError::NotFound("comment"))?;
    let plans = core.store.list_plans(&session.id).await?;
    let pending = plans
        .iter()
        .filter(|p| p.status == PlanStatus::Pending)
        .max_by_key(|p| p.revision)
        .ok_or_else(|| SessionError::PlanNotPending(tool_use_id.to_owned()))?;
    if pending.tool_use_id == old.tool_use_id {
        return Err(SessionError::invalid(
            "comment_open",
            "the comment is on the current revision: it is open already",
        ));
    }
    let row = CommentRow {
        id: new_id(),
        tool_use_id: pending.tool_use_id.clone(),
        author_id: author_id.to_owned(),
        created_at: now_ms(),
        reopened: false,
        reopened_from: Some(old.id.clone()),
        ..old
    };
    let outcome = core
        .store
        .reopen_plan_comment(&row, MAX_COMMENTS_PER_PLAN)
        .await?;
    added(outcome, &pending.tool_use_id)
}

/// The comments a rejection of plan `tool_use_id` names, in the order named (repeats
/// dropped); 400 `unknown_comment` for an id that is not a comment on that plan.
pub async fn named_comments(
    core: &Core,
    session_id: &str,
    tool_use_id: &str,
    ids: &[String],
) -> SessionResult<Vec<CommentRow>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = core.store.plan_comments(session_id).await?;
    let mut named: Vec<CommentRow> = Vec::new();
    for id in ids {
        if named.iter().any(|c| &c.id == id) {
            continue;
        }
        let found = rows
            .iter()
            .find(|c| &c.id == id && c.tool_use_id == tool_use_id)
            .ok_or_else(|| {
                SessionError::invalid(
                    "unknown_comment",
                    format!("{id} is not a comment on plan {tool_use_id}"),
                )
            })?;
        named.push(found.clone());
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::api::PlanStatus;

    use super::*;

    fn plan(id: &str, revision: u32, addressed: Option<&[&str]>) -> PlanRow {
        PlanRow {
            session_id: "s".into(),
            tool_use_id: id.into(),
            revision,
            plan: "# P".into(),
            status: PlanStatus::Rejected,
            decision: None,
            event_id: i64::from(revision),
            decision_event_id: None,
            created_at: 0,
            decided_at: None,
            addressed_comment_ids: addressed.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn the_revision_right_after_a_plan_judges_its_comments() {
        let named = ["cmt_a".to_owned()];
        let plans = [
            plan("p1", 1, None),
            plan("p3", 3, None),
            plan("p2", 2, Some(&["cmt_a"])),
        ];
        let cases = [
            ("p1", Verdict::Revised(Some(&named[..]))),
            ("p2", Verdict::Revised(None)),
            ("p3", Verdict::Current),
            ("unknown", Verdict::Current),
        ];
        for (id, want) in cases {
            assert_eq!(verdict_on(&plans, id), want, "{id}");
        }
    }
}
