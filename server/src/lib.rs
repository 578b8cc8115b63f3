//! The ultraplan server: HTTP API, event log, bundle store and plan decisions.
//!
//! Build the app with [`router`] and run it with [`serve`]; [`open`] connects and migrates
//! the configured store.

pub mod auth;
pub mod blobs;
pub mod comments;
pub mod config;
pub mod core;
pub mod environments;
pub mod execution;
pub mod flags;
pub mod fleet;
pub mod http;
pub mod hub;
pub mod model_router;
pub mod orchestrator;
pub mod plans;
pub mod replicas;
pub mod retention;
pub mod runner;
pub mod secrets;
pub mod sessions;
pub mod store;
pub mod telemetry;

use std::sync::Arc;

pub use config::Config;
pub use http::state::AppState;
pub use http::{router, serve};

/// Open the store, pick a sandbox runner, and start the orchestrator; sessions a previous
/// process left running get their agents back (or a clear error when no runner exists).
pub async fn start(
    config: Config,
    models: Arc<dyn orchestrator::ModelBackend>,
) -> Result<AppState, store::StoreError> {
    let (store, changes) = open_store(&config, true).await?;
    let core = core::Core::new(config, store);
    if let Some(changes) = changes {
        replicas::follow(core.clone(), changes);
    }
    retention::spawn(core.clone());
    let config = core.config.clone();
    ultraplan_runner::sandbox::tmpfs::set_workspace_cap(config.workspace_max_bytes);
    let template = runner_settings(&config);
    let fleet = fleet::Fleet::new(core.clone(), models.clone(), template.clone());
    let state = AppState::over(core.clone()).with_fleet(fleet);
    if !config.local_runner {
        tracing::info!("no local runner: sessions wait for linked runners and other processes'");
        return Ok(state.with_runners_elsewhere());
    }
    match runner::select(config.runner, &config.agent_binary, &config.instance_id()).await {
        Ok(sandbox) => {
            let runner = runner::Runner::Local(sandbox);
            let mut settings = template;
            settings.execute = executes(&runner).await;
            let orchestrator =
                orchestrator::Orchestrator::new(core.clone(), runner, models, settings);
            let resumed = orchestrator.start(only_process(&config)).await?;
            tracing::info!(
                runner = orchestrator.runner_name(),
                resumed,
                "agents enabled"
            );
            Ok(state.with_orchestrator(orchestrator))
        }
        Err(error) if !only_process(&config) => {
            // Other processes on the database may run agents: leave the sessions to them.
            tracing::warn!(problem = %error, "no sandbox here: sessions wait for the runners of other processes");
            Ok(state.with_runners_elsewhere())
        }
        Err(error) => {
            let problem = error.to_string();
            tracing::warn!(%problem, "sessions can be created but no agent will run them");
            orchestrator::fail_orphans(&core, &problem).await?;
            Ok(state.without_agents(problem))
        }
    }
}

/// How this process's runners (its own, and the keyless runners linked to it) run sessions.
fn runner_settings(config: &Config) -> orchestrator::OrchestratorSettings {
    let mut settings = orchestrator::OrchestratorSettings::new(config.agent_binary.clone());
    settings.max_running = config.max_running_sessions;
    settings.token_budget = config.session_token_budget;
    settings.runner_name = config.runner_name();
    settings.lease = std::time::Duration::from_secs(config.lease_seconds);
    settings.park_after = std::time::Duration::from_secs(config.park_after_seconds);
    settings.environments = ultraplan_runner::environment::Environments::new(
        ultraplan_runner::environment::EnvironmentCache::new(
            config.environments_dir(),
            std::time::Duration::from_secs(config.environment_ttl_hours.saturating_mul(3600)),
        ),
    );
    settings.setup_timeout = std::time::Duration::from_secs(config.setup_timeout_seconds);
    settings
}

/// A SQLite database belongs to this process alone: every claim on it was this process's, and
/// no other process will run its sessions.
pub fn only_process(config: &Config) -> bool {
    config.database_url.expose().starts_with("sqlite:")
}

/// Whether approved plans can be executed: the patch needs git, and Bash must run in a real
/// sandbox (the unsandboxed process runner would run it on the host).
async fn executes(runner: &runner::Runner) -> bool {
    if runner.is_unsandboxed() {
        tracing::warn!(
            "ULTRAPLAN_RUNNER=process: approved plans are not executed remotely (Bash would run \
             on the host)"
        );
        return false;
    }
    if !execution::git_available().await {
        tracing::warn!("git is not installed: approved plans cannot be executed remotely");
        return false;
    }
    true
}

/// Connect to the configured database, apply migrations, and clear uploads that a previous
/// process left half-done.
pub async fn open(config: &Config) -> Result<Arc<dyn store::Store>, store::StoreError> {
    Ok(open_store(config, false).await?.0)
}

/// Like [`open`]; with `follow`, also the changes other processes announce on the database.
async fn open_store(
    config: &Config,
    follow: bool,
) -> Result<(Arc<dyn store::Store>, Option<store::Changes>), store::StoreError> {
    let staging = config.bundles_dir().join(".staging");
    if staging.exists()
        && let Err(error) = std::fs::remove_dir_all(&staging)
    {
        tracing::warn!(%error, path = %staging.display(), "could not clear interrupted uploads");
    }
    if config.database_url.expose().starts_with("sqlite:") {
        std::fs::create_dir_all(&config.data_dir).map_err(|e| {
            store::StoreError::Corrupt(format!(
                "cannot create data dir {}: {e}",
                config.data_dir.display()
            ))
        })?;
    }
    let url = config.database_url.expose();
    let (store, changes) = match follow {
        true => store::connect_following(url).await?,
        false => (store::connect(url).await?, None),
    };
    store.migrate().await?;
    Ok((store, changes))
}
