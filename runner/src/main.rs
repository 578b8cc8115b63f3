//! `ultraplan-runner --server URL --token TOKEN [--capacity N] [--name NAME]`.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use ultraplan_bundle::BundleLimits;
use ultraplan_runner::RunnerSettings;
use ultraplan_runner::sandbox::SandboxKind;
use ultraplan_runner::sandbox::SandboxLimits;

/// A keyless runner: links out to an ultraplan server and runs its sessions' agents in a
/// local sandbox. It holds no model keys and no database access.
#[derive(Parser)]
#[command(name = "ultraplan-runner", version)]
struct Args {
    /// The server's base URL.
    #[arg(long, env = "ULTRAPLAN_SERVER")]
    server: String,
    /// A runner token from `ultraplan-server runner-token add NAME`.
    #[arg(long, env = "ULTRAPLAN_RUNNER_TOKEN", hide_env_values = true)]
    token: String,
    /// Agents run at once.
    #[arg(long, env = "ULTRAPLAN_RUNNER_CAPACITY", default_value_t = 2)]
    capacity: u32,
    /// This runner's name (default: the host name); leases carry `<token name>:<name>`.
    #[arg(long, env = "ULTRAPLAN_RUNNER_NAME")]
    name: Option<String>,
    /// Fetched bundles, execution workspaces, environment snapshots and the agent ledger.
    #[arg(long, env = "ULTRAPLAN_RUNNER_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The sandbox agents run in.
    #[arg(long, env = "ULTRAPLAN_RUNNER", value_enum, default_value_t = SandboxKind::Auto)]
    sandbox: SandboxKind,
    /// The static `ultraplan-agent` binary.
    #[arg(long, env = "ULTRAPLAN_AGENT_BIN")]
    agent_bin: Option<PathBuf>,
    /// Hours an environment snapshot is reused after its setup; expired snapshots no agent
    /// holds are swept hourly.
    #[arg(long, env = "ULTRAPLAN_ENVIRONMENT_TTL_HOURS", default_value_t = 168)]
    environment_ttl_hours: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_logging();
    let args = Args::parse();
    let settings = settings(args)?;
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("creating {}", settings.data_dir.display()))?;
    ultraplan_runner::run(settings, shutdown_signal()).await?;
    tracing::info!("runner stopped");
    Ok(())
}

fn settings(args: Args) -> anyhow::Result<RunnerSettings> {
    let name = match args.name {
        Some(name) => name,
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .context("reading the host name (or pass --name)")?,
    };
    let data_dir = match args.data_dir {
        Some(dir) => dir,
        None => std::env::var_os("HOME")
            .map(|home| PathBuf::from(home).join(".local/share/ultraplan-runner"))
            .context("HOME is not set (pass --data-dir)")?,
    };
    let agent_binary = match args.agent_bin {
        Some(path) => path,
        None => ultraplan_runner::sandbox::default_agent_binary(),
    };
    Ok(RunnerSettings {
        server: args.server,
        token: args.token,
        name,
        capacity: args.capacity,
        data_dir,
        agent_binary,
        sandbox: args.sandbox,
        limits: SandboxLimits::default(),
        bundle_limits: BundleLimits::default(),
        environment_ttl: std::time::Duration::from_secs(
            args.environment_ttl_hours.max(1).saturating_mul(3600),
        ),
    })
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ULTRAPLAN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// SIGTERM or Ctrl-C: the link closes, every agent is killed, and the server hands the
/// sessions to other runners at once.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
