//! Orchestrator settings.

use std::path::PathBuf;
use std::time::Duration;

use crate::runner::SandboxLimits;
use ultraplan_runner::environment::{EnvironmentCache, Environments};

/// How sessions are run.
#[derive(Debug, Clone)]
pub struct OrchestratorSettings {
    pub agent_binary: PathBuf,
    pub limits: SandboxLimits,
    /// Sessions with a live agent at once; the rest wait in order.
    pub max_running: usize,
    /// No heartbeat or frame for this long marks a session stalled.
    pub stall_after: Duration,
    pub max_turns: u32,
    /// Tokens (all kinds) a session may spend.
    pub token_budget: u64,
    /// Model calls in flight per session.
    pub max_model_calls: usize,
    /// How long a stopping agent gets before it is killed.
    pub stop_grace: Duration,
    pub agent_log_filter: String,
    /// Approved plans are executed remotely (needs `git` for the patch).
    pub execute: bool,
    /// The name this runner's leases carry: unique among the runners on one database.
    pub runner_name: String,
    /// How long a claim holds a session without a renewal.
    pub lease: Duration,
    /// How often the runner looks for waiting sessions when nothing wakes it.
    pub claim_poll: Duration,
    /// How long an agent waiting on a person keeps its sandbox before it is parked.
    pub park_after: Duration,
    /// Built environments on this machine (docs/ARCHITECTURE.md §6.5).
    pub environments: Environments,
    /// Longest an environment's setup may run.
    pub setup_timeout: Duration,
}

impl OrchestratorSettings {
    /// Defaults for an agent binary.
    pub fn new(agent_binary: PathBuf) -> Self {
        OrchestratorSettings {
            agent_binary,
            limits: SandboxLimits::default(),
            max_running: 16,
            stall_after: Duration::from_secs(60),
            max_turns: 60,
            token_budget: 5_000_000,
            max_model_calls: 8,
            stop_grace: Duration::from_millis(500),
            agent_log_filter: "info".to_owned(),
            execute: true,
            runner_name: "local".to_owned(),
            lease: Duration::from_secs(30),
            claim_poll: Duration::from_secs(1),
            park_after: Duration::from_secs(60),
            environments: Environments::new(EnvironmentCache::new(
                std::env::temp_dir().join("ultraplan-environments"),
                Duration::from_secs(7 * 24 * 3600),
            )),
            setup_timeout: Duration::from_secs(900),
        }
    }
}
