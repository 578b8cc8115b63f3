//! Inline comments on the review page: the comments shown beside the plan and under earlier
//! revisions, and the forms that add one and reopen one (through the same session logic as
//! the API, then post/redirect/get with a notice).

use axum::extract::{Path, State};
use axum::response::Redirect;
use serde::Deserialize;
use ultraplan_protocol::comments::{AddressedBy, CommentState, NewComment, PlanComment};

use super::actions::{TokenForm, normalize};
use super::auth::{CsrfForm, Posted};
use super::error::PageResult;
use super::notice::Notice;
use super::session::owned;
use super::view::SessionView;
use crate::http::state::AppState;
use crate::sessions::{self, SessionError};
use crate::store::SessionRow;

/// One comment as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentItem {
    pub id: String,
    pub tool_use_id: String,
    pub quote: String,
    /// The quote as the rendered plan reads it, to find its block on the page.
    pub plain: String,
    /// `Plan › Steps`, or empty.
    pub heading: String,
    pub body: String,
    pub author: String,
    pub state: &'static str,
    /// Where it stands, with the agent's word on it for an earlier revision.
    pub state_label: &'static str,
    /// Carried over from an earlier revision.
    pub reopened: bool,
    /// Offered a Reopen button: on an earlier revision, not reopened yet, and a plan is
    /// pending to carry it to.
    pub reopenable: bool,
}

/// The comments of one earlier revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionComments {
    pub revision: u32,
    pub items: Vec<CommentItem>,
}

/// Every comment the page shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommentsView {
    /// On the newest plan.
    pub current: Vec<CommentItem>,
    /// Their ids, space separated: what "Request changes" sends.
    pub ids: String,
    /// On earlier revisions, by revision.
    pub earlier: Vec<RevisionComments>,
    /// Those on the latest earlier revision that has comments, shown beside the plan.
    pub previous: Option<RevisionComments>,
}

/// The state's wire name and what the page says about it. A comment of an earlier revision
/// is judged by the agent's word on the next one: named as addressed, not named (open), or
/// nothing said at all (revised since).
fn state_text(c: &PlanComment, earlier: bool) -> (&'static str, &'static str) {
    match (c.state, c.addressed_by, earlier) {
        (CommentState::Open, _, false) => ("open", "Open"),
        (CommentState::Open, _, true) => (
            "open",
            "Open: the agent did not say the next revision addresses it",
        ),
        (CommentState::Addressed, Some(AddressedBy::Agent), _) => (
            "addressed",
            "Addressed: the agent says the next revision addresses it",
        ),
        (CommentState::Addressed, _, _) => (
            "addressed",
            "Revised since: the agent did not say which comments it addressed",
        ),
        (CommentState::Reopened, _, _) => ("reopened", "Reopened on a later revision"),
    }
}

fn item(c: &PlanComment, pending: bool, earlier: bool) -> CommentItem {
    let (state, state_label) = state_text(c, earlier);
    CommentItem {
        id: c.id.clone(),
        tool_use_id: c.tool_use_id.clone(),
        quote: c.quote.clone(),
        plain: crate::comments::plain_text(&c.quote),
        heading: c.heading_path.join(" › "),
        body: c.body.clone(),
        author: c.author.clone(),
        state,
        state_label,
        reopened: c.reopened_from.is_some(),
        reopenable: pending && earlier && c.state != CommentState::Reopened,
    }
}

/// Sort the session's comments into the view: those on the newest plan (`newest`, whose
/// revision is the highest) and those on each earlier revision.
pub fn comments_view(
    comments: &[PlanComment],
    revisions: &[(String, u32)],
    pending: bool,
) -> CommentsView {
    let newest = revisions.iter().max_by_key(|(_, r)| *r);
    let mut view = CommentsView::default();
    for c in comments {
        let Some((_, revision)) = revisions.iter().find(|(id, _)| *id == c.tool_use_id) else {
            continue;
        };
        if newest.is_some_and(|(id, _)| *id == c.tool_use_id) {
            view.current.push(item(c, pending, false));
            continue;
        }
        match view.earlier.iter_mut().find(|e| e.revision == *revision) {
            Some(entry) => entry.items.push(item(c, pending, true)),
            None => view.earlier.push(RevisionComments {
                revision: *revision,
                items: vec![item(c, pending, true)],
            }),
        }
    }
    view.previous = view.earlier.iter().max_by_key(|e| e.revision).cloned();
    let ids: Vec<&str> = view.current.iter().map(|c| c.id.as_str()).collect();
    view.ids = ids.join(" ");
    view
}

/// Fill in the view's comments from the store.
pub async fn attach(state: &AppState, row: &SessionRow, v: &mut SessionView) -> PageResult<()> {
    let plans = state.core.store.list_plans(&row.id).await?;
    let revisions: Vec<(String, u32)> = plans
        .iter()
        .map(|p| (p.tool_use_id.clone(), p.revision))
        .collect();
    let comments = sessions::session_comments(&state.core, &row.id).await?;
    let pending = v.plan.as_ref().is_some_and(|p| p.pending);
    v.comments = comments_view(&comments, &revisions, pending);
    Ok(())
}

/// The comment form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct CommentForm {
    pub csrf: String,
    pub quote: String,
    pub body: String,
}

impl CsrfForm for CommentForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

fn back(session_id: &str, notice: Notice) -> Redirect {
    let id = super::auth::encode_query(session_id);
    Redirect::to(&format!("/sessions/{id}?notice={}#comments", notice.code()))
}

/// What a refused comment tells the reviewer.
fn refusal(error: SessionError) -> PageResult<Notice> {
    match error {
        SessionError::Invalid { code, .. } => Ok(match code {
            "quote_not_in_plan" => Notice::QuoteNotInPlan,
            _ => Notice::CommentInvalid,
        }),
        SessionError::PlanNotPending(_) | SessionError::NotFound("plan") => {
            Ok(Notice::NoPendingPlan)
        }
        SessionError::Archived(_) => Ok(Notice::Archived),
        error => Err(error.into()),
    }
}

/// `POST /sessions/{id}/plans/{tool_use_id}/comments`.
pub async fn add(
    State(state): State<AppState>,
    Path((id, tool_use_id)): Path<(String, String)>,
    Posted { user, form }: Posted<CommentForm>,
) -> PageResult<Redirect> {
    let row = owned(&state, &user, &id).await?;
    // The browser sends the rendered text it selected; the comment keeps the plan's own text.
    let selected = normalize(&form.quote);
    let plan = state.core.store.plan(&row.id, &tool_use_id).await?;
    let quote = plan
        .and_then(|p| crate::comments::resolve_quote(&p.plan, &selected))
        .unwrap_or(selected);
    let new = NewComment {
        quote,
        body: normalize(&form.body),
    };
    let notice = match sessions::add_comment(&state.core, &row, &user.id, &tool_use_id, &new).await
    {
        Ok(_) => Notice::Commented,
        Err(error) => refusal(error)?,
    };
    Ok(back(&row.id, notice))
}

/// `POST /sessions/{id}/plans/{tool_use_id}/comments/{comment_id}/reopen`.
pub async fn reopen(
    State(state): State<AppState>,
    Path((id, tool_use_id, comment_id)): Path<(String, String, String)>,
    Posted { user, form: _ }: Posted<TokenForm>,
) -> PageResult<Redirect> {
    let row = owned(&state, &user, &id).await?;
    let result =
        sessions::reopen_comment(&state.core, &row, &user.id, &tool_use_id, &comment_id).await;
    let notice = match result {
        Ok(_) => Notice::CommentReopened,
        Err(SessionError::NotFound("comment")) => Notice::CommentInvalid,
        Err(error) => refusal(error)?,
    };
    Ok(back(&row.id, notice))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comment(id: &str, on: &str, state: CommentState) -> PlanComment {
        PlanComment {
            id: id.into(),
            session_id: "s".into(),
            tool_use_id: on.into(),
            quote: "q".into(),
            heading_path: vec!["Plan".into(), "Steps".into()],
            body: "b".into(),
            author: "a".into(),
            created_at: String::new(),
            state,
            addressed_by: (state == CommentState::Addressed).then_some(AddressedBy::Agent),
            reopened_from: None,
        }
    }

    #[test]
    fn comments_sort_into_the_current_plan_and_earlier_revisions() {
        let revisions = [("p1".to_owned(), 1), ("p2".to_owned(), 2)];
        let comments = [
            comment("a", "p1", CommentState::Addressed),
            comment("b", "p1", CommentState::Reopened),
            comment("c", "p2", CommentState::Open),
            comment("d", "gone", CommentState::Open),
            comment("e", "p1", CommentState::Open),
        ];
        // (plan pending, current ids, earlier (revision, id, reopenable))
        let cases = [
            (
                true,
                "c",
                vec![(1, "a", true), (1, "b", false), (1, "e", true)],
            ),
            (
                false,
                "c",
                vec![(1, "a", false), (1, "b", false), (1, "e", false)],
            ),
        ];
        for (pending, ids, earlier) in cases {
            let v = comments_view(&comments, &revisions, pending);
            assert_eq!(v.ids, ids);
            assert_eq!(v.current[0].heading, "Plan › Steps");
            let got: Vec<(u32, &str, bool)> = v
                .earlier
                .iter()
                .flat_map(|r| {
                    r.items
                        .iter()
                        .map(move |i| (r.revision, i.id.as_str(), i.reopenable))
                })
                .collect();
            assert_eq!(got, earlier, "pending {pending}");
            assert_eq!(v.previous.map(|p| p.revision), Some(1));
        }
    }

    #[test]
    fn the_page_says_whose_word_a_state_rests_on() {
        let by = |by| PlanComment {
            addressed_by: by,
            ..comment("a", "p1", CommentState::Addressed)
        };
        let open = comment("o", "p1", CommentState::Open);
        let cases = [
            (
                by(Some(AddressedBy::Agent)),
                true,
                "addressed",
                "the agent says",
            ),
            (
                by(Some(AddressedBy::Revision)),
                true,
                "addressed",
                "Revised since",
            ),
            (by(None), true, "addressed", "Revised since"),
            (open.clone(), true, "open", "did not say the next revision"),
            (open, false, "open", "Open"),
            (
                comment("r", "p1", CommentState::Reopened),
                true,
                "reopened",
                "Reopened",
            ),
        ];
        for (c, earlier, state, label) in cases {
            let (got, text) = state_text(&c, earlier);
            assert_eq!(got, state, "{c:?}");
            assert!(text.contains(label), "{text}");
        }
    }
}
