//! The types of the lease a runner holds on a session (docs/ARCHITECTURE.md §5.2).

use super::SessionRow;

/// A runner's hold on one session. Every write the runner makes for the session carries it,
/// and the store refuses the write once a newer epoch exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub session_id: String,
    /// The runner's name.
    pub runner: String,
    /// Bumped by every claim: the fencing token.
    pub epoch: i64,
}

/// A session a runner just claimed.
#[derive(Debug, Clone)]
pub struct Claim {
    pub session: SessionRow,
    pub lease: Lease,
    /// An agent ran for the session before: this one resumes from the log.
    pub resumed: bool,
    /// The session was taken over from a lease that lapsed.
    pub took_over: bool,
    /// How long the session waited for this claim (ms), from its queueing.
    pub waited_ms: i64,
}

/// Who wrote an event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Author {
    /// The agent, or the harness on its behalf.
    #[default]
    Runner,
    /// A person: a message or a decision, which the session's runner hands to its agent.
    User,
}

impl Author {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Author::Runner => "runner",
            Author::User => "user",
        }
    }
}
