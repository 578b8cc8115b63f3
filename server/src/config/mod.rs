//! Server configuration, from flags and environment (docs/ARCHITECTURE.md §3.6). Secrets never
//! appear in `Debug` output or logs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use ultraplan_gateway::Secret;
use ultraplan_protocol::model_spec::ModelSpec;

use crate::blobs::{BlobError, BlobLocation, BlobStore};
use ultraplan_bundle::BundleLimits;

pub mod defaults;
mod limits;

pub use limits::{
    BodyDeadline, RateLimit, RateLimits, RequestLimits, RetentionConfig, UploadSlots,
};

pub use ultraplan_runner::sandbox::{SandboxKind, default_agent_binary};

/// Everything the server needs to run.
#[derive(Debug, Clone)]
pub struct Config {
    pub bind: SocketAddr,
    pub data_dir: PathBuf,
    /// Base URL for links (review pages); defaults to `http://<bind>`.
    pub public_url: String,
    /// Database URL; may carry a password.
    pub database_url: Secret,
    pub runner: SandboxKind,
    /// `anthropic:<model>`, `openai:<model>` or `offline`.
    pub model: String,
    pub anthropic_api_key: Option<Secret>,
    pub anthropic_base_url: Option<String>,
    pub openai_api_key: Option<Secret>,
    pub openai_base_url: Option<String>,
    /// Longest silence inside a streamed model answer before the gateway retries.
    pub model_idle_timeout: std::time::Duration,
    pub bundle_limits: BundleLimits,
    /// Largest JSON request body.
    pub max_json_body: usize,
    /// The static `ultraplan-agent` binary started in each sandbox.
    pub agent_binary: PathBuf,
    /// Sessions with a live agent at once; more wait in order.
    pub max_running_sessions: usize,
    /// The name this server's runner claims under (default: [`Config::default_runner_name`]).
    pub runner_name: Option<String>,
    /// Seconds a claim lasts without a renewal.
    pub lease_seconds: u64,
    /// This process runs agents; `false` leaves them to other processes on the database.
    pub local_runner: bool,
    /// Seconds an agent waiting on a person keeps its sandbox before it is parked.
    pub park_after_seconds: u64,
    /// Hours a cached environment is reused before it is built again.
    pub environment_ttl_hours: u64,
    /// Longest an environment's setup may run, in seconds.
    pub setup_timeout_seconds: u64,
    /// Tokens a session may spend before it is stopped.
    pub session_token_budget: u64,
    /// Requests per user, and per client address for requests that do not authenticate.
    pub rate_limits: RateLimits,
    /// Header and body deadlines, minimum body rate, concurrent upload slots.
    pub request_limits: RequestLimits,
    /// Size cap of an execution workspace (a tmpfs where the server can mount one).
    pub workspace_max_bytes: u64,
    /// Bundle grace period, retention interval, per-user bundle quota.
    pub retention: RetentionConfig,
    /// Where bundle archives live for good (`ULTRAPLAN_BLOB_STORE`); `None`: the data dir's
    /// `blobs/`.
    pub blob_store: Option<BlobLocation>,
    /// The 32-byte key that seals users' secrets (docs/ARCHITECTURE.md §6.5); made on first
    /// use where absent. Replicas sharing a database must share it.
    pub secrets_key_file: PathBuf,
}

impl Config {
    /// Defaults for a data directory: SQLite inside it, loopback bind, the offline model.
    pub fn for_data_dir(data_dir: &Path) -> Self {
        let bind = defaults::BIND;
        Config {
            bind,
            data_dir: data_dir.to_path_buf(),
            public_url: format!("http://{bind}"),
            database_url: Secret::new(sqlite_url(data_dir)),
            runner: defaults::RUNNER,
            model: defaults::OFFLINE_MODEL.to_owned(),
            anthropic_api_key: None,
            anthropic_base_url: None,
            openai_api_key: None,
            openai_base_url: None,
            model_idle_timeout: std::time::Duration::from_secs(defaults::MODEL_IDLE_TIMEOUT_SECS),
            bundle_limits: BundleLimits::default(),
            max_json_body: defaults::MAX_JSON_BODY,
            agent_binary: default_agent_binary(),
            max_running_sessions: defaults::MAX_RUNNING,
            runner_name: None,
            lease_seconds: defaults::LEASE_SECONDS,
            local_runner: true,
            park_after_seconds: defaults::PARK_AFTER_SECONDS,
            environment_ttl_hours: defaults::ENVIRONMENT_TTL_HOURS,
            setup_timeout_seconds: defaults::SETUP_TIMEOUT_SECONDS,
            session_token_budget: defaults::SESSION_TOKEN_BUDGET,
            rate_limits: RateLimits::default(),
            request_limits: RequestLimits::default(),
            workspace_max_bytes: defaults::WORKSPACE_MAX_BYTES,
            retention: RetentionConfig::default(),
            blob_store: None,
            secrets_key_file: data_dir.join(defaults::SECRETS_KEY_FILE),
        }
    }

    /// The model to use when none is configured: Anthropic when its key is set, else offline.
    pub fn default_model(anthropic_key: bool, openai_key: bool) -> String {
        let model = if anthropic_key {
            defaults::ANTHROPIC_MODEL
        } else if openai_key {
            defaults::OPENAI_MODEL
        } else {
            defaults::OFFLINE_MODEL
        };
        model.to_owned()
    }

    /// The name this server's runner claims sessions under: the configured one, else the host
    /// name and [`Config::instance_id`], so a restarted process knows its own claims and two
    /// hosts sharing a data dir path never take each other's.
    pub fn runner_name(&self) -> String {
        if let Some(name) = &self.runner_name {
            return name.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "local".to_owned());
        format!("{host}-{}", self.instance_id())
    }

    /// A stable name for this server instance: a hash of its data dir.
    pub fn instance_id(&self) -> String {
        use sha2::Digest as _;
        let dir = self
            .data_dir
            .canonicalize()
            .unwrap_or_else(|_| self.data_dir.clone());
        let digest = sha2::Sha256::digest(dir.display().to_string().as_bytes());
        hex::encode(&digest[..8])
    }

    /// Where bundles live.
    /// Where this process caches built environments.
    pub fn environments_dir(&self) -> PathBuf {
        self.data_dir.join("environments")
    }

    pub fn bundles_dir(&self) -> PathBuf {
        self.data_dir.join("bundles")
    }

    /// Where the blob store is: the configured location, else the data dir's `blobs/`.
    pub fn blob_location(&self) -> BlobLocation {
        self.blob_store
            .clone()
            .unwrap_or_else(|| BlobLocation::in_data_dir(&self.data_dir))
    }

    /// The blob store (opened once per process and location).
    pub fn blobs(&self) -> Result<BlobStore, BlobError> {
        BlobStore::shared(&self.blob_location())
    }

    /// Why the configured model cannot be used, if it cannot.
    pub fn model_problem(&self) -> Option<String> {
        model_problem(
            &self.model,
            self.anthropic_api_key.is_some(),
            self.openai_api_key.is_some() || self.openai_base_url.is_some(),
        )
    }
}

/// Why `model` cannot be used given which providers are configured.
pub fn model_problem(model: &str, anthropic: bool, openai: bool) -> Option<String> {
    match ModelSpec::parse(model) {
        Ok(ModelSpec::Offline) => None,
        Ok(ModelSpec::Anthropic(_)) => {
            (!anthropic).then(|| "ANTHROPIC_API_KEY is not set on the server".to_owned())
        }
        Ok(ModelSpec::OpenAi(_)) => (!openai)
            .then(|| "neither OPENAI_API_KEY nor OPENAI_BASE_URL is set on the server".to_owned()),
        Err(unknown) => Some(unknown.to_string()),
    }
}

/// The SQLite URL for a data dir.
pub fn sqlite_url(data_dir: &Path) -> String {
    format!("sqlite://{}", data_dir.join("ultraplan.db").display())
}

/// `$XDG_DATA_HOME/ultraplan`, else `~/.local/share/ultraplan`, else `./.ultraplan-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("ultraplan");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/share/ultraplan");
    }
    PathBuf::from(".ultraplan-data")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_debug() {
        let mut config = Config::for_data_dir(Path::new("/tmp/x"));
        config.anthropic_api_key = Some(Secret::new("sk-ant-very-secret"));
        config.database_url = Secret::new("postgres://u:pw@h/db");
        let printed = format!("{config:?}");
        assert!(!printed.contains("very-secret"), "{printed}");
        assert!(!printed.contains("pw@"), "{printed}");
        assert!(printed.contains("[redacted]"));
    }

    #[test]
    fn model_problems_are_explained() {
        let cases = [
            ("offline", false, false, None),
            ("anthropic:claude", true, false, None),
            ("anthropic:claude", false, false, Some("ANTHROPIC_API_KEY")),
            ("openai:gpt", false, true, None),
            ("openai:gpt", false, false, Some("OPENAI")),
            ("anthropic:", true, true, Some("unknown model")),
            ("gpt-4", true, true, Some("unknown model")),
        ];
        for (model, a, o, want) in cases {
            let got = model_problem(model, a, o);
            match want {
                None => assert_eq!(got, None, "{model}"),
                Some(fragment) => {
                    assert!(
                        got.as_deref().is_some_and(|g| g.contains(fragment)),
                        "{model}: {got:?}"
                    )
                }
            }
        }
    }
}
