//! Inline comments on a plan's passages: the request that adds one and the resource the API
//! returns (docs/ARCHITECTURE.md §3.2).

use serde::{Deserialize, Serialize};

/// Longest comment body, in characters.
pub const MAX_COMMENT_BODY_CHARS: usize = 4000;
/// Longest quoted passage, in characters.
pub const MAX_COMMENT_QUOTE_CHARS: usize = 2000;
/// Most comments one plan revision may carry.
pub const MAX_COMMENTS_PER_PLAN: usize = 50;

/// `POST /v1/sessions/{id}/plans/{tool_use_id}/comments`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NewComment {
    /// The passage commented on, exactly as it appears in the plan text.
    pub quote: String,
    /// What the reviewer says about it.
    pub body: String,
}

/// Where a comment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CommentState {
    /// On the current revision, waiting for the agent.
    Open,
    /// A newer revision of the plan exists: the agent revised against it.
    Addressed,
    /// The reviewer reopened it: it was carried over to a later revision as a new comment.
    Reopened,
}

impl CommentState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CommentState::Open => "open",
            CommentState::Addressed => "addressed",
            CommentState::Reopened => "reopened",
        }
    }
}

/// One comment on a passage of one plan revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanComment {
    pub id: String,
    pub session_id: String,
    /// The ExitPlanMode call (plan revision) the comment is on.
    pub tool_use_id: String,
    /// The passage, verbatim.
    pub quote: String,
    /// The markdown headings above the passage, outermost first.
    pub heading_path: Vec<String>,
    pub body: String,
    /// The name of the user who wrote it.
    pub author: String,
    pub created_at: String,
    pub state: CommentState,
    /// The comment this one reopens, from an earlier revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reopened_from: Option<String>,
}
