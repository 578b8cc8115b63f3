//! The `ultraplan` binary: parses the command line and dispatches.

mod bundle_cmd;
mod cli;
mod cmd;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tokio::runtime::Runtime;
use tracing_subscriber::EnvFilter;

use cli::{Cli, Command, HookTarget};
use cmd::Env;
use ultraplan::keyword;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            // Errors quote the server and file names: sanitised before they reach a terminal.
            eprintln!(
                "ultraplan: {}",
                ultraplan::sanitize::text(&format!("{err:#}"))
            );
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr, filtered by `ULTRAPLAN_LOG` (default: warnings).
fn init_tracing() {
    let filter =
        EnvFilter::try_from_env("ULTRAPLAN_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn runtime() -> anyhow::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Keyword { text }) => print_keyword(&text),
        Some(Command::Bundle {
            out,
            level,
            encoding,
            path,
        }) => {
            bundle_cmd::check_level(encoding, level);
            let report = bundle_cmd::run(&path, out.as_deref(), encoding, level)?;
            print_line(&report)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Login) => runtime()?.block_on(cmd::login::command(&cli.global)),
        Some(Command::Watch {
            session,
            json,
            detached,
        }) => {
            let env = Env::load(&cli.global)?;
            runtime()?.block_on(cmd::watch::command(&env, &session.id, json, detached))
        }
        Some(Command::Env { action }) => {
            let env = Env::load(&cli.global)?;
            runtime()?.block_on(cmd::environment::command(&env, action))
        }
        Some(Command::Secret { action }) => {
            let env = Env::load(&cli.global)?;
            runtime()?.block_on(cmd::secret::command(&env, action))
        }
        Some(Command::Hook {
            target: HookTarget::ClaudeCode,
        }) => {
            let env = Env::load(&cli.global)?;
            runtime()?.block_on(cmd::hook::claude_code(&env))
        }
        command => {
            let env = Env::load(&cli.global)?;
            let rt = runtime()?;
            rt.block_on(cmd::pending::offer_waiting(&env))?;
            match command {
                None if cli.launch.prompt.is_empty() && cli.launch.refine.is_none() => {
                    cmd::repl::run(env, &rt)
                }
                None => rt.block_on(cmd::launch::command(&env, &cli.launch)),
                Some(command) => rt.block_on(session_command(&env, command)),
            }
        }
    }
}

async fn session_command(env: &Env, command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Launch(args) => cmd::launch::command(env, &args).await,
        Command::Status { id, json } => cmd::sessions::status(env, id.as_deref(), json).await,
        Command::List { json } => cmd::sessions::list(env, json).await,
        Command::Open(s) => cmd::sessions::open(env, &s.id).await,
        Command::Stop { session, yes } => cmd::review::stop(env, &session.id, yes).await,
        Command::Approve(s) => cmd::review::approve(env, &s.id).await,
        Command::Reject { session, message } => {
            cmd::review::reject(env, &session.id, &message).await
        }
        Command::Teleport(s) => cmd::review::teleport(env, &s.id).await,
        Command::Pull(args) => cmd::pull::command(env, &args).await,
        Command::Logs {
            session,
            follow,
            json,
        } => cmd::logs::command(env, &session.id, follow, json).await,
        Command::Message {
            session,
            text,
            json,
        } => cmd::message::command(env, &session.id, &text, json).await,
        Command::Wait {
            session,
            until,
            timeout,
            json,
        } => cmd::wait::command(env, &session.id, until, timeout, json).await,
        other => anyhow::bail!("`{}` is handled elsewhere", other.name()),
    }
}

fn print_keyword(text: &str) -> anyhow::Result<ExitCode> {
    let found = keyword::detect(text);
    let json = serde_json::to_string(&found).context("encoding the keyword result")?;
    print_line(&json)?;
    Ok(ExitCode::SUCCESS)
}

fn print_line(line: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").context("writing to stdout")?;
    out.flush().context("writing to stdout")
}
