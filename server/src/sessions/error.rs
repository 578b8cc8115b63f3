//! Why a session use case refused: one enum the HTTP layer maps to statuses and codes at its
//! boundary (`http::error`), and the review pages map to notices.

use crate::store::StoreError;

/// A use case's refusal.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The session, or the bundle it names, does not exist for this user.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The server's policy turned ultraplan off for this user.
    #[error("ultraplan is disabled for this account by the server's policy")]
    Disabled,
    /// The request breaks a rule of the API; `code` is stable.
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// A rejection without feedback for the agent.
    #[error("a rejection needs feedback for the agent")]
    FeedbackRequired,
    /// An edited plan with nothing in it.
    #[error("an edited plan cannot be empty")]
    EmptyPlan,
    /// Archiving a session that already is.
    #[error("the session is already archived")]
    AlreadyArchived,
    /// Changing an archived session; the message says what cannot be done.
    #[error("{0}")]
    Archived(&'static str),
    /// A different decision already stands on the plan.
    #[error("a different decision already stands on plan {tool_use_id}: {standing}")]
    DecisionConflict {
        tool_use_id: String,
        standing: &'static str,
    },
    /// No such plan is pending.
    #[error("no plan {0} is pending in this session")]
    NoPendingPlan(String),
    /// The plan exists but was decided: it takes no more comments.
    #[error("plan {0} is no longer pending")]
    PlanNotPending(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SessionError {
    /// A refusal under a stable code.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        SessionError::Invalid {
            code,
            message: message.into(),
        }
    }

    /// The stable code clients see for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::NotFound(_) => "not_found",
            SessionError::Disabled => "policy_blocked",
            SessionError::Invalid { code, .. } => code,
            SessionError::FeedbackRequired => "feedback_required",
            SessionError::EmptyPlan => "empty_plan",
            SessionError::AlreadyArchived => "already_archived",
            SessionError::Archived(_) => "session_archived",
            SessionError::DecisionConflict { .. } => "decision_conflict",
            SessionError::NoPendingPlan(_) => "no_pending_plan",
            SessionError::PlanNotPending(_) => "plan_not_pending",
            SessionError::Store(_) => "internal",
        }
    }
}

/// Result of a session use case.
pub type SessionResult<T> = Result<T, SessionError>;
