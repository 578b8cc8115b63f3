//! The session resource, its statuses and phases.

use serde::{Deserialize, Serialize};

use crate::model::Usage;

/// Lifecycle status of a session, as the Sessions API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// No turn in progress (waiting for a runner, or between turns).
    Idle,
    /// The agent is working.
    Running,
    /// The agent waits on the user: a plan review or a question.
    RequiresAction,
    /// Stopped for good; events stay readable.
    Archived,
}

impl SessionStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Idle => "idle",
            SessionStatus::Running => "running",
            SessionStatus::RequiresAction => "requires_action",
            SessionStatus::Archived => "archived",
        }
    }

    /// Parse the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "idle" => SessionStatus::Idle,
            "running" => SessionStatus::Running,
            "requires_action" => SessionStatus::RequiresAction,
            "archived" => SessionStatus::Archived,
            _ => return None,
        })
    }
}

/// What the terminal pill shows; derived by [`crate::derive_phase`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Running,
    NeedsInput,
    PlanReady,
    /// The session is archived (server-side only; the client's poll has ended by then).
    Ended,
}

impl Phase {
    /// The pill text the terminal shows for this phase.
    pub fn pill(self) -> &'static str {
        use crate::constants::{PILL_TEXT_NEEDS_INPUT, PILL_TEXT_READY, PILL_TEXT_RUNNING};
        match self {
            Phase::Running | Phase::Ended => PILL_TEXT_RUNNING,
            Phase::NeedsInput => PILL_TEXT_NEEDS_INPUT,
            Phase::PlanReady => PILL_TEXT_READY,
        }
    }
}

/// Prompt variants the agent knows, chosen by the server flag `prompt_variant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PromptVariant {
    #[default]
    SimplePlan,
    VisualPlan,
    ThreeSubagentsWithCritique,
}

impl PromptVariant {
    /// Every variant, in documentation order.
    pub const ALL: [PromptVariant; 3] = [
        PromptVariant::SimplePlan,
        PromptVariant::VisualPlan,
        PromptVariant::ThreeSubagentsWithCritique,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PromptVariant::SimplePlan => "simple_plan",
            PromptVariant::VisualPlan => "visual_plan",
            PromptVariant::ThreeSubagentsWithCritique => "three_subagents_with_critique",
        }
    }

    /// Parse the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

/// The git state the bundle was taken from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BaseRef {
    /// HEAD commit, absent in a repository with no commits.
    #[serde(default)]
    pub commit: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    /// Whether tracked files had uncommitted edits.
    #[serde(default)]
    pub dirty: bool,
}

/// What the client put in the bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BundleManifest {
    #[serde(default)]
    pub base_commit: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    #[serde(default)]
    pub dirty_files: Vec<String>,
    #[serde(default)]
    pub untracked_files: Vec<String>,
    #[serde(default)]
    pub files: u64,
    #[serde(default)]
    pub bytes: u64,
}

/// Client-supplied context of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionContext {
    #[serde(default)]
    pub base: BaseRef,
    /// Model override (`anthropic:<model>`, `openai:<model>` or `offline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Prompt variant override; validated by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_variant: Option<String>,
    /// A display name for the repository (usually its folder name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<BundleManifest>,
    /// A local draft plan to refine remotely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_plan: Option<String>,
    /// A named environment on the server (`/v1/environments`) to use instead of the
    /// repository's `.ultraplan/environment.toml`; validated by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

/// Always `"session"`: the resource kind tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    #[default]
    Session,
}

/// A session as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionResource {
    #[serde(rename = "type")]
    pub kind: SessionKind,
    pub id: String,
    pub title: String,
    pub session_status: SessionStatus,
    pub phase: Phase,
    /// The review page.
    pub url: String,
    pub created_at: String,
    pub updated_at: String,
    pub session_context: SessionContext,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_id: Option<String>,
    /// Id of the newest event in the log (0 when empty).
    pub last_event_id: i64,
    /// Revision number of the newest plan, 0 before the first ExitPlanMode.
    pub plan_revisions: u32,
    /// No heartbeat or event for longer than the server's stall threshold. Informational: the
    /// client does not treat it as terminal.
    #[serde(default)]
    pub stalled: bool,
    /// Subagents by state.
    #[serde(default)]
    pub agents: crate::activity::AgentCounts,
    /// Tool calls of the main agent and its subagents.
    #[serde(default)]
    pub tool_calls: u64,
    /// Remote execution of the approved plan, once one started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<crate::patch::Execution>,
    /// The runner whose claim holds the session, while one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// When the session last went back to the queue because its runner stopped answering
    /// (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeued_at: Option<String>,
    /// The agent gave its sandbox up while it waits on a person; a decision or message
    /// resumes it from the log.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parked: bool,
}
