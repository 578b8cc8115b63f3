//! Rows as the store hands them out, and the pure decision comparison.

use ultraplan_protocol::api::{Decision, PlanResource, PlanStatus};
use ultraplan_protocol::events::Event;
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::{SessionContext, SessionStatus};

use super::format_ms;

/// A user account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRow {
    pub id: String,
    pub name: String,
    pub created_at: i64,
}

/// A stored secret: its value sealed by the caller (docs/ARCHITECTURE.md §6.5), never plain.
/// Times are unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRow {
    pub owner_id: String,
    pub name: String,
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The owner of an environment shared with every user.
pub const SHARED_OWNER: &str = "";

/// A named environment: an environment file's TOML kept under a name (docs/ARCHITECTURE.md
/// §6.5). Times are unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentRow {
    /// The owner's id, or [`SHARED_OWNER`].
    pub owner_id: String,
    pub name: String,
    pub definition: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl EnvironmentRow {
    /// Offered to every user.
    pub fn shared(&self) -> bool {
        self.owner_id == SHARED_OWNER
    }
}

/// A stored API token: only its salted hash is kept.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenRow {
    pub token_id: String,
    pub user_id: String,
    pub user_name: String,
    pub salt: String,
    pub hash: String,
}

impl std::fmt::Debug for TokenRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenRow")
            .field("token_id", &self.token_id)
            .field("user_id", &self.user_id)
            .field("user_name", &self.user_name)
            .finish_non_exhaustive()
    }
}

/// A validated, content-addressed bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleRow {
    pub sha256: String,
    pub files: i64,
    pub bytes: i64,
    pub unpacked_bytes: i64,
    pub created_at: i64,
}

/// What creating a session needs.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    pub id: String,
    pub user_id: String,
    pub title: String,
    pub bundle_id: Option<String>,
    pub context: SessionContext,
    pub status: SessionStatus,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    pub id: String,
    pub user_id: String,
    pub title: String,
    pub bundle_id: Option<String>,
    pub status: SessionStatus,
    pub context: SessionContext,
    pub usage: Usage,
    pub last_event_id: i64,
    pub plan_revisions: u32,
    pub created_at: i64,
    pub updated_at: i64,
    pub last_activity_at: i64,
    pub archived_at: Option<i64>,
    /// Whether an ExitPlanMode call awaits its decision.
    pub has_pending_plan: bool,
    pub agent_state: AgentState,
    /// Subagents and tool calls folded from the log.
    pub activity: ultraplan_protocol::activity::Activity,
    /// Remote execution, once a plan was approved for it.
    pub execution: Option<ultraplan_protocol::patch::Execution>,
    /// The runner holding the session's lease, if one does.
    pub runner: Option<String>,
    /// When the session last went back to the queue because its runner's lease lapsed.
    pub requeued_at: Option<i64>,
}

/// The patch a remote execution produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchRow {
    pub session_id: String,
    /// `git diff --binary` output, byte for byte.
    pub diff: Vec<u8>,
    pub summary: ultraplan_protocol::patch::PatchSummary,
    pub created_at: i64,
}

/// One ExitPlanMode call of the main agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRow {
    pub session_id: String,
    pub tool_use_id: String,
    pub revision: u32,
    pub plan: String,
    pub status: PlanStatus,
    pub decision: Option<Decision>,
    pub event_id: i64,
    pub decision_event_id: Option<i64>,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    /// The comment ids the agent's call named as addressed (shape-checked only); `None` when
    /// it named none.
    pub addressed_comment_ids: Option<Vec<String>>,
}

impl PlanRow {
    /// The API resource.
    pub fn to_resource(&self) -> PlanResource {
        PlanResource {
            session_id: self.session_id.clone(),
            tool_use_id: self.tool_use_id.clone(),
            revision: self.revision,
            status: self.status,
            plan: self.plan.clone(),
            decision: self.decision.clone(),
            decided_at: self.decided_at.map(format_ms),
            decision_event_id: self.decision_event_id,
        }
    }
}

/// A feature flag value: global when `user_id` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagRow {
    pub name: String,
    pub user_id: Option<String>,
    pub value: String,
    pub rollout_pct: Option<u8>,
    pub updated_at: i64,
}

/// Whether an agent is meant to run for a session (survives restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentState {
    /// Never started (no runner, or created before one existed).
    None,
    /// Waiting for a free slot under the running-sessions cap.
    Queued,
    /// An agent was started and has not finished.
    Running,
    /// The agent finished, failed or was stopped.
    Finished,
    /// The agent was stopped while it waited on a person; a decision or message queues the
    /// session again and it resumes from its log.
    Parked,
}

impl AgentState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentState::None => "none",
            AgentState::Queued => "queued",
            AgentState::Running => "running",
            AgentState::Finished => "finished",
            AgentState::Parked => "parked",
        }
    }

    /// Parse the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "none" => AgentState::None,
            "queued" => AgentState::Queued,
            "running" => AgentState::Running,
            "finished" => AgentState::Finished,
            "parked" => AgentState::Parked,
            _ => return None,
        })
    }
}

/// One model call made on a session's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    pub session_id: String,
    pub model: String,
    pub usage: Usage,
    pub attempts: u32,
    pub error: Option<String>,
}

/// What a batch of events does beyond the log, decided by the caller (the session rules in
/// `crate::sessions`): the store applies it in the same transaction as the append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendEffects {
    /// Plans the batch proposes, in order.
    pub plans: Vec<NewPlan>,
    /// Put the session into `requires_action` (unless it is archived).
    pub requires_action: bool,
    /// Who writes the batch.
    pub author: super::Author,
    /// The lease the writer holds: the append happens only while it still holds the session.
    pub fence: Option<super::Lease>,
}

/// A plan an appended event proposes: a main-agent ExitPlanMode call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPlan {
    /// Index in the appended batch of the event that carries the call.
    pub event: usize,
    pub tool_use_id: String,
    pub plan: String,
    /// [`ultraplan_protocol::comments::addressed_comment_ids`] of the call's input.
    pub addressed_comment_ids: Option<Vec<String>>,
}

/// A one-time login link (its secret only as a hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRow {
    pub id: String,
    pub user_id: String,
    pub hash: String,
    pub next_path: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A browser session (its secret only as a hash) and its CSRF token.
#[derive(Clone, PartialEq, Eq)]
pub struct WebSessionRow {
    pub id: String,
    pub user_id: String,
    /// The user's name (filled in when read; ignored when stored).
    pub user_name: String,
    pub hash: String,
    pub csrf: String,
    pub created_at: i64,
    pub expires_at: i64,
}

impl std::fmt::Debug for WebSessionRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSessionRow")
            .field("id", &self.id)
            .field("user_id", &self.user_id)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Outcome of [`super::Store::decide_plan`].
#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// This call took the decision and appended its tool_result event.
    Decided { plan: PlanRow, event: Box<Event> },
    /// The same decision already stood: nothing changed.
    AlreadyStands(PlanRow),
    /// A different decision already stands.
    Conflict(PlanRow),
    /// No plan with that tool_use id in the session.
    UnknownPlan,
}

/// The plan status a decision leads to.
pub fn status_for(decision: &Decision) -> PlanStatus {
    match decision {
        Decision::Approve { .. } => PlanStatus::Approved,
        Decision::Reject { .. } => PlanStatus::Rejected,
        Decision::Teleport {} => PlanStatus::Teleported,
    }
}

/// Whether a repeated decision is the same as the one that stands (so it is idempotent).
/// An approval without a plan means "the proposed plan as it is".
pub fn same_decision(standing: &Decision, requested: &Decision, proposed: &str) -> bool {
    match (standing, requested) {
        (Decision::Approve { plan: a }, Decision::Approve { plan: b }) => {
            let a = a.as_deref().unwrap_or(proposed).trim();
            let b = b.as_deref().unwrap_or(proposed).trim();
            a == b
        }
        (
            Decision::Reject {
                feedback: a,
                comment_ids: ca,
            },
            Decision::Reject {
                feedback: b,
                comment_ids: cb,
            },
        ) => a.trim() == b.trim() && same_ids(ca, cb),
        (Decision::Teleport {}, Decision::Teleport {}) => true,
        _ => false,
    }
}

/// Whether two lists name the same comments, in any order.
fn same_ids(a: &[String], b: &[String]) -> bool {
    let mut a: Vec<&String> = a.iter().collect();
    let mut b: Vec<&String> = b.iter().collect();
    a.sort();
    a.dedup();
    b.sort();
    b.dedup();
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approve(plan: Option<&str>) -> Decision {
        Decision::Approve {
            plan: plan.map(str::to_owned),
        }
    }

    fn reject(f: &str) -> Decision {
        Decision::Reject {
            feedback: f.to_owned(),
            comment_ids: Vec::new(),
        }
    }

    #[test]
    fn repeated_decisions_compare_by_effect() {
        let proposed = "the plan";
        let cases = [
            (approve(None), approve(None), true),
            (approve(None), approve(Some("the plan\n")), true),
            (approve(Some("edited")), approve(Some("edited")), true),
            (approve(Some("edited")), approve(None), false),
            (reject("no"), reject("no"), true),
            (reject("no"), reject("other"), false),
            (Decision::Teleport {}, Decision::Teleport {}, true),
            (approve(None), Decision::Teleport {}, false),
            (reject("no"), approve(None), false),
        ];
        for (standing, requested, want) in cases {
            assert_eq!(
                same_decision(&standing, &requested, proposed),
                want,
                "{standing:?} vs {requested:?}"
            );
        }
    }
}
