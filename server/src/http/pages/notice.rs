//! One-line notices shown after a form post. The redirect carries only a fixed code, so no
//! text is ever reflected from the URL.

/// What happened to the last form post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    Approved,
    Rejected,
    Teleported,
    AlreadyDecided,
    Conflict,
    Archived,
    FeedbackRequired,
    EmptyPlan,
    NoPendingPlan,
    TerminalGone,
    Answered,
    AnswerRequired,
    QuestionGone,
    Stopped,
    AlreadyStopped,
    Commented,
    CommentReopened,
    QuoteNotInPlan,
    CommentInvalid,
    EnvironmentUnknown,
    ExecutionStarted,
}

const ALL: [Notice; 21] = [
    Notice::Approved,
    Notice::Rejected,
    Notice::Teleported,
    Notice::AlreadyDecided,
    Notice::Conflict,
    Notice::Archived,
    Notice::FeedbackRequired,
    Notice::EmptyPlan,
    Notice::NoPendingPlan,
    Notice::TerminalGone,
    Notice::Answered,
    Notice::AnswerRequired,
    Notice::QuestionGone,
    Notice::Stopped,
    Notice::AlreadyStopped,
    Notice::Commented,
    Notice::CommentReopened,
    Notice::QuoteNotInPlan,
    Notice::CommentInvalid,
    Notice::EnvironmentUnknown,
    Notice::ExecutionStarted,
];

impl Notice {
    /// The code in the redirect URL.
    pub fn code(self) -> &'static str {
        match self {
            Notice::Approved => "approved",
            Notice::Rejected => "rejected",
            Notice::Teleported => "teleported",
            Notice::AlreadyDecided => "already_decided",
            Notice::Conflict => "conflict",
            Notice::Archived => "archived",
            Notice::FeedbackRequired => "feedback_required",
            Notice::EmptyPlan => "empty_plan",
            Notice::NoPendingPlan => "no_pending_plan",
            Notice::TerminalGone => "terminal_gone",
            Notice::Answered => "answered",
            Notice::AnswerRequired => "answer_required",
            Notice::QuestionGone => "question_gone",
            Notice::Stopped => "stopped",
            Notice::AlreadyStopped => "already_stopped",
            Notice::Commented => "commented",
            Notice::CommentReopened => "comment_reopened",
            Notice::QuoteNotInPlan => "quote_not_in_plan",
            Notice::CommentInvalid => "comment_invalid",
            Notice::EnvironmentUnknown => "environment_unknown",
            Notice::ExecutionStarted => "execution_started",
        }
    }

    /// Parse a code from the URL; unknown codes show nothing.
    pub fn parse(code: &str) -> Option<Notice> {
        ALL.into_iter().find(|n| n.code() == code)
    }

    /// `ok` for success, `warn` for everything the reviewer should look at.
    pub fn tone(self) -> &'static str {
        match self {
            Notice::Approved
            | Notice::Rejected
            | Notice::Teleported
            | Notice::Answered
            | Notice::Stopped
            | Notice::Commented
            | Notice::CommentReopened => "ok",
            _ => "warn",
        }
    }

    /// The message.
    pub fn text(self) -> &'static str {
        match self {
            Notice::Approved => "Plan approved. The agent carries on with it remotely.",
            Notice::Rejected => "Feedback sent. The agent is revising the plan.",
            Notice::Teleported => "Plan sent back to your terminal. Continue there.",
            Notice::AlreadyDecided => "That decision had already been recorded; nothing changed.",
            Notice::Conflict => {
                "A different decision was already taken on this plan (another tab or the terminal). It is shown below."
            }
            Notice::Archived => {
                "This session is stopped; it can no longer take decisions or answers."
            }
            Notice::FeedbackRequired => {
                "Write some feedback for the agent before rejecting the plan."
            }
            Notice::EmptyPlan => {
                "The edited plan is empty. Write the plan you approve, or approve it as proposed."
            }
            Notice::NoPendingPlan => "That plan is no longer waiting for a decision.",
            Notice::TerminalGone => {
                "Your terminal is no longer connected, so the plan cannot be sent back to it. Approve or reject it here."
            }
            Notice::Answered => "Answer sent to the agent.",
            Notice::AnswerRequired => "Write an answer before sending it.",
            Notice::QuestionGone => "That question was already answered.",
            Notice::Stopped => "Session stopped.",
            Notice::AlreadyStopped => "The session was already stopped.",
            Notice::Commented => {
                "Comment added. Request changes to send the plan's comments to the agent."
            }
            Notice::CommentReopened => "Comment reopened on the current revision.",
            Notice::QuoteNotInPlan => {
                "The selected passage was not found in the plan's text. Select plain text within one block, or focus a block and press C."
            }
            Notice::CommentInvalid => {
                "The comment needs a passage and a body of at most 4000 characters; a plan takes at most 50 comments, and a comment is reopened once."
            }
            Notice::EnvironmentUnknown => {
                "That environment is not one you can use (it may have been deleted); the plan was not approved."
            }
            Notice::ExecutionStarted => {
                "The execution has already started with its environment; the plan was not approved again."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for notice in ALL {
            assert_eq!(Notice::parse(notice.code()), Some(notice));
            assert!(!notice.text().is_empty());
        }
        assert_eq!(Notice::parse("<script>"), None);
    }
}
