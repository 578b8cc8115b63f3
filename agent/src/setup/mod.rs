//! `ultraplan-agent setup`: run an environment's setup commands inside the setup sandbox
//! (docs/ARCHITECTURE.md §6.5).
//!
//! It reads one [`SetupInput`] from stdin, prepares `<env>/home`, `<env>/bin` and a Python
//! virtual environment, relays a loopback port to the egress socket when the input asks for
//! it (the only socket the agent ever opens), then runs the commands in order.
//!
//! - [`env`]: where things are, and the commands' environment (pure);
//! - [`relay`]: the loopback relay to the egress socket;
//! - `commands`: the virtual environment and the commands themselves.

mod commands;
pub mod env;
pub mod relay;

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::PathBuf;

use ultraplan_protocol::environment::SetupInput;

pub use env::{SetupPaths, base_env, command_env};

/// The largest setup input read from stdin.
pub const MAX_INPUT: u64 = 1024 * 1024;

/// Why setup could not run the commands at all (the process then exits with
/// `SETUP_INTERNAL_ERROR`).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot read the setup input: {0}")]
    ReadInput(std::io::Error),
    #[error("the setup input is larger than {MAX_INPUT} bytes")]
    InputTooLarge,
    /// Only the position: serde's message could quote a value of the input's `env`.
    #[error(
        "the setup input is not a valid setup document ({kind} error at line {line}, column {column})"
    )]
    InvalidInput {
        kind: &'static str,
        line: usize,
        column: usize,
    },
    #[error("{name} is {value:?}, not a port number")]
    BadPort { name: &'static str, value: String },
    #[error("cannot create {path}: {source}")]
    Prepare {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on 127.0.0.1:{port} for the egress relay: {source}")]
    Relay { port: u16, source: std::io::Error },
    #[error("cannot start /bin/sh in {workspace}: {source}")]
    Spawn {
        workspace: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write the setup output: {0}")]
    Output(std::io::Error),
}

/// Run setup: read the input, prepare, relay, run the commands. `out` gets the `$ <command>`
/// lines and notes, and (through its descriptor) every command's stdout and stderr. Gives
/// the exit status: 0, or the first failing command's.
pub fn run<R: Read, W: Write + AsFd>(
    input: R,
    out: &mut W,
    paths: &SetupPaths,
) -> Result<u8, SetupError> {
    let input = read_input(input)?;
    if input.egress {
        relay::start(paths.relay_port, paths.egress_socket.clone()).map_err(|source| {
            SetupError::Relay {
                port: paths.relay_port,
                source,
            }
        })?;
    }
    for dir in [paths.home(), paths.bin()] {
        std::fs::create_dir_all(&dir)
            .map_err(|source| SetupError::Prepare { path: dir, source })?;
    }
    commands::ensure_venv(paths, out)?;
    let env = command_env(paths, paths.venv().is_dir(), &input);
    tracing::info!(
        commands = input.commands.len(),
        egress = input.egress,
        "setup starting"
    );
    commands::run_all(&input.commands, &paths.workspace, &env, out)
}

fn read_input<R: Read>(input: R) -> Result<SetupInput, SetupError> {
    let mut bytes = Vec::new();
    input
        .take(MAX_INPUT + 1)
        .read_to_end(&mut bytes)
        .map_err(SetupError::ReadInput)?;
    if bytes.len() as u64 > MAX_INPUT {
        return Err(SetupError::InputTooLarge);
    }
    serde_json::from_slice(&bytes).map_err(|e| SetupError::InvalidInput {
        kind: match e.classify() {
            serde_json::error::Category::Io => "read",
            serde_json::error::Category::Syntax => "syntax",
            serde_json::error::Category::Data => "content",
            serde_json::error::Category::Eof => "truncation",
        },
        line: e.line(),
        column: e.column(),
    })
}
