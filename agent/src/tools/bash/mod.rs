//! `Bash`: run a shell command in the workspace (execution mode).
//!
//! Each call is a fresh `/bin/bash -c` (or `/bin/sh -c` where bash is missing) started in the
//! workspace root, so a `cd` never carries over. stdin is /dev/null and the environment is
//! cleared down to [`process::SHELL_ENV`]: nothing of the agent's own environment leaks.
//!
//! The command runs in its own process group. When it times out, or when the call is
//! cancelled (its future dropped, the agent stopping), the whole group is killed with
//! SIGKILL; when the shell exits, anything it left running in the background is killed too.
//!
//! Output: stdout and stderr interleaved in the order their chunks arrive, as lossy UTF-8,
//! capped at [`MAX_OUTPUT_CHARS`] characters keeping the head and the tail (see [`capture`]).
//! A non-zero exit status, a fatal signal or a timeout makes the result an error.

pub mod capture;
pub mod group;
pub mod process;

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use ultraplan_protocol::model::ToolDefinition;

use super::{ToolOutput, object_tool, parse_input};
use crate::workspace::Workspace;
use group::LiveGroups;
use process::{Ending, Finished, Job};

/// The tool's name as the model calls it.
pub const NAME: &str = "Bash";
/// Timeout when none is given, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Longest timeout allowed, in milliseconds; larger values are lowered to it.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Characters of output returned at most.
pub const MAX_OUTPUT_CHARS: usize = 30_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with a `command` string")]
struct BashInput {
    command: String,
    #[serde(default)]
    timeout: Option<u64>,
    /// For people reading the transcript (and the log); not used to run the command.
    #[serde(default)]
    description: Option<String>,
}

/// The tool as offered to the model.
pub fn definition() -> ToolDefinition {
    object_tool(
        NAME,
        DESCRIPTION,
        json!({
            "command": {"type": "string", "minLength": 1,
                "description": "The shell command to run."},
            "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS,
                "description": "Timeout in milliseconds (default 120000, at most 600000)."},
            "description": {"type": "string", "description": "What the command does, in \
                a few words (e.g. \"Run the unit tests\")."}
        }),
        &["command"],
    )
}

const DESCRIPTION: &str = "Run a shell command with bash in the repository root and return its \
output. Use it to build, run tests, linters and formatters, and for git inspection (git status, \
git diff). Every call starts a fresh shell in the repository root: `cd`, variables and aliases \
do not carry over to the next call, so chain dependent steps with `&&` in one command (`cd web \
&& npm test`). stdin is empty, so interactive programs fail: pass non-interactive flags. There \
is no network access. The environment is minimal (PATH=/usr/local/bin:/usr/bin:/bin, \
HOME=/tmp, TMPDIR=/tmp). The default timeout is 2 minutes; pass `timeout` in milliseconds for \
longer builds, up to 10 minutes. On timeout the command and everything it started are killed, \
and nothing started in the background outlives the call. stdout and stderr come back together, \
at most 30000 characters (the start and the end are kept), followed by the exit code when it is \
not zero. Prefer Read, Glob, Grep, Edit and Write over cat, find, grep, sed or shell \
redirections for looking at and changing files.";

/// Runs the tool on raw model input. Every failure becomes an error output.
pub async fn run(workspace: &Workspace, input: Value, live: &LiveGroups) -> ToolOutput {
    run_with_shells(workspace, input, live, &process::SHELLS).await
}

/// [`run`] with the first existing shell of `shells`.
async fn run_with_shells(
    workspace: &Workspace,
    input: Value,
    live: &LiveGroups,
    shells: &[&str],
) -> ToolOutput {
    let input: BashInput = match parse_input(NAME, input) {
        Ok(input) => input,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    if input.command.trim().is_empty() {
        return ToolOutput::error(format!("Invalid input for {NAME}: `command` is empty"));
    }
    let timeout_ms = match input.timeout {
        None => DEFAULT_TIMEOUT_MS,
        Some(0) => {
            return ToolOutput::error(format!(
                "Invalid input for {NAME}: `timeout` must be at least 1 ms"
            ));
        }
        Some(ms) => ms.min(MAX_TIMEOUT_MS),
    };
    let Some(shell) = process::find_shell(shells) else {
        return ToolOutput::error(
            "The sandbox has no shell (neither /bin/bash nor /bin/sh exists), so commands \
             cannot run here; use the other tools.",
        );
    };
    // The sandbox sets this where a prepared environment is bound (read-only).
    let env_root = std::env::var_os(ultraplan_protocol::environment::ENV_VAR)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from);
    let job = Job {
        shell: &shell,
        command: &input.command,
        cwd: workspace.root(),
        timeout: Duration::from_millis(timeout_ms),
        max_chars: MAX_OUTPUT_CHARS,
        env_root: env_root.as_deref(),
    };
    let description = input.description.as_deref().unwrap_or_default();
    tracing::debug!(command = %input.command, description, timeout_ms, "running a command");
    match process::run(&job, live).await {
        Ok(finished) => report(&finished, timeout_ms),
        Err(e) => ToolOutput::error(format!("The command could not be started: {e}")),
    }
}

/// The tool result for a finished command.
fn report(finished: &Finished, timeout_ms: u64) -> ToolOutput {
    let output = finished.output.render();
    let output = output.trim_end_matches('\n');
    let status = match &finished.ending {
        Ending::TimedOut => {
            let head = format!("Command timed out after {timeout_ms} ms and was killed.");
            return ToolOutput::error(join(&head, output));
        }
        Ending::Lost(e) => {
            return ToolOutput::error(join(&format!("The command was lost: {e}"), output));
        }
        Ending::Exited(status) => status,
    };
    if let Some(code) = status.code() {
        if code == 0 {
            return ToolOutput::ok(if output.is_empty() {
                "(no output)"
            } else {
                output
            });
        }
        return ToolOutput::error(join(output, &format!("Exit code {code}")));
    }
    let signal = std::os::unix::process::ExitStatusExt::signal(status).unwrap_or_default();
    ToolOutput::error(join(
        output,
        &format!("Killed by signal {signal}{}", signal_name(signal)),
    ))
}

/// `first`, a blank line, then `second`, leaving out an empty part.
fn join(first: &str, second: &str) -> String {
    match (first.is_empty(), second.is_empty()) {
        (true, _) => second.to_owned(),
        (_, true) => first.to_owned(),
        _ => format!("{first}\n\n{second}"),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGHUP => " (SIGHUP)",
        libc::SIGINT => " (SIGINT)",
        libc::SIGQUIT => " (SIGQUIT)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGPIPE => " (SIGPIPE)",
        libc::SIGTERM => " (SIGTERM)",
        _ => "",
    }
}

#[cfg(test)]
mod tests;
