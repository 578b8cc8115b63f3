//! HTTP request and response bodies of the `/v1` API.

use serde::{Deserialize, Serialize};

use crate::events::{Event, EventBody};
use crate::session::{SessionContext, SessionResource};

/// Stable codes for why a user may not launch a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// No valid API token was presented.
    NotLoggedIn,
    /// The `ultraplan_enabled` flag is off for this user.
    PolicyBlocked,
    /// The server has no sandbox runner that can start an agent.
    NoRunner,
    /// The configured model provider is missing its key or is unknown.
    NoModel,
}

/// A reason with human text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Reason {
    pub code: ReasonCode,
    pub message: String,
}

/// The flag values in force for the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EffectiveFlags {
    pub prompt_variant: String,
    pub timeout_seconds: u64,
    pub model: String,
}

/// `GET /v1/eligibility`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Eligibility {
    pub eligible: bool,
    pub reasons: Vec<Reason>,
    /// Absent when the caller is not logged in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<EffectiveFlags>,
    /// Bundle compressions `PUT /v1/bundles/{sha256}` accepts, preferred first (`zstd`,
    /// `gzip`). Empty from servers that predate it: those accept gzip only.
    #[serde(default)]
    pub accepts_bundle_encodings: Vec<String>,
    /// Whether `/v1/bundles/{sha256}/upload` takes resumable uploads (`HEAD` for the offset,
    /// `PATCH` to continue). `false` from servers that predate it.
    #[serde(default)]
    pub resumable_bundle_uploads: bool,
    /// The largest bundle archive the server accepts, in bytes, so a client can refuse a
    /// larger one before sending it. Absent from servers that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bundle_bytes: Option<u64>,
    /// Whether `POST /v1/manifests` and `PUT /v1/manifests/{bundle_id}/contents` take
    /// incremental bundles (a manifest of the tree, then only the contents the server lacks).
    /// `false` from servers that predate them: those take full bundles only.
    #[serde(default)]
    pub incremental_bundles: bool,
}

/// `PUT /v1/bundles/{sha256}` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BundleUploaded {
    /// The bundle's sha256 (hex); pass it as `bundle_id` when creating a session.
    pub bundle_id: String,
    /// Regular files in the bundle.
    pub files: u64,
    /// Size of the uploaded archive.
    pub bytes: u64,
    /// Size of the files once unpacked.
    pub unpacked_bytes: u64,
}

/// One file or symlink of a tree, as `POST /v1/manifests` carries it. A file has `mode`
/// (`0o644` or `0o755`: only the owner's execute bit counts), `size` and `blake3` (the BLAKE3
/// of its bytes, 64 lowercase hex); a symlink has `target` and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ManifestEntry {
    /// Relative to the tree's root, `/`-separated, with no `.`, `..` or empty components.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// `POST /v1/manifests`: a tree as files and symlinks. Without `base`, `entries` is the whole
/// tree; with it, a change to the manifest `base` names (a bundle id this server accepted from
/// the caller): `entries` are added or replaced and `removed` paths taken out.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ManifestRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    #[serde(default)]
    pub entries: Vec<ManifestEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

/// `POST /v1/manifests` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ManifestAccepted {
    /// The tree's bundle id; pass it as `bundle_id` when creating a session.
    pub bundle_id: String,
    /// The caller already holds this bundle: nothing more to send.
    pub held: bool,
    /// BLAKE3 digests (hex) of the contents the server lacks for the caller: send them with
    /// `PUT /v1/manifests/{bundle_id}/contents`.
    pub missing: Vec<String>,
    /// Files and symlinks in the tree.
    pub files: u64,
    /// Bytes of the tree's files.
    pub unpacked_bytes: u64,
}

/// `POST /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateSessionRequest {
    pub title: String,
    pub bundle_id: String,
    /// The first events: a `set_permission_mode` control request and the user's prompt.
    pub events: Vec<EventBody>,
    #[serde(default)]
    pub session_context: SessionContext,
}

/// `GET /v1/sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionList {
    pub data: Vec<SessionResource>,
    pub has_more: bool,
}

/// `GET /v1/sessions/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventsPage {
    pub data: Vec<Event>,
    pub has_more: bool,
    pub first_id: Option<i64>,
    pub last_id: Option<i64>,
    /// With `include=session`: the session as of this page (read after its events, so never
    /// older than them), so a poll needs one request instead of two. Absent otherwise (and
    /// from older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Box<crate::session::SessionResource>>,
}

/// `POST /v1/sessions/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PostEventsRequest {
    pub events: Vec<EventBody>,
}

/// `POST /v1/sessions/{id}/events` response: the stored events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PostEventsResponse {
    pub data: Vec<Event>,
}

/// A reviewer's decision on a pending plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Approve; `plan`, when given and different, is the reviewer's edited version.
    Approve {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan: Option<String>,
    },
    /// Reject with feedback the agent must address, and the ids of the plan's inline
    /// comments it carries (feedback may be empty when comments are given).
    Reject {
        feedback: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        comment_ids: Vec<String>,
    },
    /// Send the plan back to the terminal to implement locally.
    Teleport {},
}

impl Decision {
    /// The wire name of the decision.
    pub fn kind(&self) -> &'static str {
        match self {
            Decision::Approve { .. } => "approve",
            Decision::Reject { .. } => "reject",
            Decision::Teleport {} => "teleport",
        }
    }
}

/// Review state of one ExitPlanMode call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    Approved,
    Rejected,
    Teleported,
}

impl PlanStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Pending => "pending",
            PlanStatus::Approved => "approved",
            PlanStatus::Rejected => "rejected",
            PlanStatus::Teleported => "teleported",
        }
    }

    /// Parse the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => PlanStatus::Pending,
            "approved" => PlanStatus::Approved,
            "rejected" => PlanStatus::Rejected,
            "teleported" => PlanStatus::Teleported,
            _ => return None,
        })
    }
}

/// One ExitPlanMode call and its review.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanResource {
    pub session_id: String,
    pub tool_use_id: String,
    /// 1 for the first ExitPlanMode call of the session, then 2, 3, …
    pub revision: u32,
    pub status: PlanStatus,
    /// The plan as the agent proposed it.
    pub plan: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// Id of the tool_result event that carries the decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_event_id: Option<i64>,
}

/// Every error body: `{error:{code, message}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// A stable error code and a human message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    pub status: String,
    pub version: String,
}
