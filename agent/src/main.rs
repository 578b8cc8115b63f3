//! `ultraplan-agent`: the in-container agent (plan and execution modes; `ultraplan-agent setup`
//! runs an environment's setup commands). Frames on stdin/stdout, logs on
//! stderr (filter from `ULTRAPLAN_LOG`, default `info`).

use std::process::ExitCode;

use anyhow::Context as _;
use tracing_subscriber::EnvFilter;
use ultraplan_agent::RunEnv;

fn main() -> ExitCode {
    let version = env!("CARGO_PKG_VERSION");
    if std::env::args().nth(1).as_deref() == Some("--version") {
        eprintln!("ultraplan-agent {version}");
        return ExitCode::SUCCESS;
    }
    init_logging();
    if std::env::args().nth(1).as_deref() == Some("setup") {
        return setup();
    }
    match serve(version) {
        Ok(outcome) => {
            if let Some(reason) = outcome.reason {
                eprintln!("ultraplan-agent: {reason}");
            }
            ExitCode::from(outcome.code)
        }
        Err(e) => {
            eprintln!("ultraplan-agent: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn serve(version: &str) -> anyhow::Result<ultraplan_agent::Outcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        // The IO driver reaps the Bash tool's child processes.
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the async runtime")?;
    let env = RunEnv::from_process(version);
    let stdin = std::io::BufReader::new(std::io::stdin());
    let outcome = runtime.block_on(ultraplan_agent::run(stdin, std::io::stdout(), env));
    // Tool threads still running are abandoned: the process is about to exit (`run` already
    // killed any command still running).
    runtime.shutdown_background();
    Ok(outcome)
}

/// `ultraplan-agent setup` (docs/ARCHITECTURE.md §6.5): the exit status is the failing
/// command's, or `SETUP_INTERNAL_ERROR` when the commands could not run at all.
fn setup() -> ExitCode {
    use ultraplan_agent::setup;
    use ultraplan_protocol::environment::SETUP_INTERNAL_ERROR;
    let result = setup::SetupPaths::from_process()
        .and_then(|paths| setup::run(std::io::stdin().lock(), &mut std::io::stdout(), &paths));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("ultraplan-agent setup: {e}");
            ExitCode::from(SETUP_INTERNAL_ERROR)
        }
    }
}

fn init_logging() {
    let filter =
        EnvFilter::try_from_env("ULTRAPLAN_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}
