//! Stored inline comments on plan passages (`migrations/*/0009_plan_comments.sql`).

use ultraplan_protocol::comments::PlanComment;

use super::format_ms;
use crate::comments::{Verdict, comment_state};

/// One stored comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentRow {
    pub id: String,
    pub session_id: String,
    pub tool_use_id: String,
    pub quote: String,
    pub heading_path: Vec<String>,
    pub body: String,
    pub author_id: String,
    /// The author's user name (read back with the row; ignored on insert).
    pub author: String,
    pub created_at: i64,
    /// Carried over to a later revision by the reviewer.
    pub reopened: bool,
    pub reopened_from: Option<String>,
}

impl CommentRow {
    /// The API resource, given what the revision after the comment's plan said about it
    /// (`crate::comments::comment_state`).
    pub fn to_resource(&self, verdict: Verdict<'_>) -> PlanComment {
        let (state, addressed_by) = comment_state(&self.id, self.reopened, verdict);
        PlanComment {
            id: self.id.clone(),
            session_id: self.session_id.clone(),
            tool_use_id: self.tool_use_id.clone(),
            quote: self.quote.clone(),
            heading_path: self.heading_path.clone(),
            body: self.body.clone(),
            author: self.author.clone(),
            created_at: format_ms(self.created_at),
            state,
            addressed_by,
            reopened_from: self.reopened_from.clone(),
        }
    }
}

/// What adding (or carrying over) a comment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddComment {
    Added(Box<CommentRow>),
    /// The session has no plan with that tool_use id.
    UnknownPlan,
    /// The plan was decided: comments are closed.
    NotPending,
    /// The plan already carries the most comments allowed.
    Full,
    /// The comment to carry over was reopened already (or does not exist).
    AlreadyReopened,
}
