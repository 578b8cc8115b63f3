//! Environments over the runner link (docs/ARCHITECTURE.md §5.3, §6.5): the server asks a
//! linked runner to make a session's environment ready on its own disk (`prepare`), the
//! runner streams setup's output back (already masked) and says how it ended. Snapshots live
//! on the runner whose agents use them; the server keeps the decisions and the log.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a runner that prepares environments advertises in its `hello`.
pub const FEATURE_ENVIRONMENTS: &str = "environments";

/// Most output lines one `environment_output` message carries.
pub const MAX_ENVIRONMENT_LINES_PER_MESSAGE: usize = 256;

/// The owner's secret values for one setup or maintenance run, by name. They cross the
/// runner link only in a `prepare` of those phases; `Debug` names them without their values,
/// so no log line can hold one.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValues(pub BTreeMap<String, String>);

impl SecretValues {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(self.0.keys().map(|name| format!("{name}=<redacted>")))
            .finish()
    }
}

/// Which step of making an environment ready a `prepare` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreparePhase {
    /// Key the environment on the runner's base and look its snapshot up (no commands run).
    Check,
    /// Run setup unless a snapshot of the key is there already.
    Setup,
    /// Run `[maintenance]` on a copy of the snapshot, which becomes its next generation.
    Maintenance,
}

/// A lock file the environment names, with its contents' SHA-256 (hex) as the server read
/// it from the bundle; `None` when the repository lacks it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockDigest {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// What a runner needs to make one session's environment ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentSpec {
    pub phase: PreparePhase,
    /// The session's bundle: setup runs on it, read-only.
    pub bundle_id: String,
    /// The environment's TOML (its repository's file, or a named environment's definition);
    /// the runner parses and checks it itself.
    pub definition: String,
    /// The lock files the definition names, as keyed.
    #[serde(default)]
    pub lock_files: Vec<LockDigest>,
    /// Who may reuse the snapshot: the owner's id, or `shared`.
    pub scope: String,
    /// Setup's and maintenance's secrets (never sent for `check`).
    #[serde(default, skip_serializing_if = "SecretValues::is_empty")]
    pub secrets: SecretValues,
    /// The run's time limit: the file's own, capped by the server.
    pub timeout_seconds: u64,
    /// `RUST_LOG`-style filter for the setup agent's own log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_filter: Option<String>,
}

/// A snapshot on the runner, as it was leased for the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Its key on this runner (keyed on the runner's own base).
    pub key: String,
    /// When setup finished, in Unix milliseconds (the runner's clock).
    pub built_at_ms: i64,
    pub setup_ms: u64,
    #[serde(default)]
    pub generation: u32,
    /// The Docker image (its id on the runner's engine) of a `[base] image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
}

/// A host the egress proxy refused, and how often.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedHost {
    pub host: String,
    pub port: u16,
    pub attempts: u32,
}

/// How a setup or maintenance run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum RunEnd {
    Succeeded,
    Failed {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        description: String,
    },
    TimedOut,
}

/// What a setup or maintenance run reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    #[serde(flatten)]
    pub end: RunEnd,
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<BlockedHost>,
    #[serde(default)]
    pub blocked_beyond: u64,
    /// The last lines of output, masked.
    #[serde(default)]
    pub tail: Vec<String>,
}

/// How a `prepare` ended. A snapshot in `reused` or `built` is held for the agent until it
/// is launched and ends, another `prepare` or a `release` of the same agent, or the link's
/// end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EnvironmentOutcome {
    /// A snapshot was there (for `setup`: another build of the key finished first).
    Reused { snapshot: SnapshotInfo },
    /// `check` found no snapshot of `key`.
    Missing { key: String },
    /// Setup or maintenance ran now and succeeded.
    Built {
        snapshot: SnapshotInfo,
        report: RunReport,
    },
    /// Setup or maintenance ran and did not succeed.
    Failed { report: RunReport },
    /// `maintenance` found no snapshot to maintain (it expired meanwhile).
    Gone {},
    /// The environment could not be made ready at all, and why.
    Error { reason: String },
}
