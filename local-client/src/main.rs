//! The `ultraplan` binary: parses the command line and dispatches.

mod bundle_cmd;
mod cli;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use cli::{Cli, Command};
use ultraplan::keyword;

/// Exit code for a command this build does not implement yet (same as a usage error).
const UNAVAILABLE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("ultraplan: {err:#}");
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

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Keyword { text }) => print_keyword(&text),
        Some(Command::Bundle { out, level, path }) => {
            let report = bundle_cmd::run(&path, out.as_deref(), level)?;
            print_line(&report)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(other) => Ok(unavailable(&format!("`{}`", other.name()))),
        None if cli.launch.prompt.is_empty() => Ok(unavailable("the interactive prompt")),
        None => Ok(unavailable("`launch`")),
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

/// `what` is the feature as the user knows it, e.g. "`status`".
fn unavailable(what: &str) -> ExitCode {
    eprintln!("ultraplan: {what} is not available in this build yet");
    ExitCode::from(UNAVAILABLE)
}
