//! Answering the verifier: the read-only subagent an execution ends with, recognised by its
//! tools (Bash without Write and Edit) or its system prompt.
//!
//! 1. Read `.ultraplan/environment.toml` (when Read is offered and it was not read yet);
//! 2. run each command listed under `[verify] commands` with Bash, all in one turn (the agent
//!    runs them in order);
//! 3. report each command with its exit code, then `VERDICT: PASS` when all exited 0, else
//!    `VERDICT: FAIL` naming the failing commands with the last lines of their output. With no
//!    verify commands (no file, no section, an empty list) the verdict is `PARTIAL`: no test
//!    command was configured, and the offline planner does not guess one.
//!
//! The offline planner reviews nothing against the plan; its report says so.

use serde_json::json;
use ultraplan_protocol::model::ModelRequest;

use super::explore::{ToolCall, Turn};
use super::request::{Call, Conversation};
use super::{Action, LABEL};

/// The file naming the project's verify commands.
pub(super) const ENVIRONMENT_FILE: &str = ".ultraplan/environment.toml";

/// Output lines quoted from a failing command.
const TAIL_LINES: usize = 10;

/// What the verifier's system prompt asks for, to recognise it by.
const VERDICT_MARK: &str = "VERDICT: PARTIAL";

/// Whether `request` comes from the verifier.
pub(super) fn is_verifier(request: &ModelRequest, convo: &Conversation<'_>) -> bool {
    let by_tools = convo.offers("Bash") && !convo.offers("Write") && !convo.offers("Edit");
    let by_prompt = request.system.iter().any(|b| b.text.contains(VERDICT_MARK));
    by_tools || by_prompt
}

/// The verifier's next turn.
pub(super) fn next_action(convo: &Conversation<'_>) -> Action {
    let read = convo.calls.iter().find(|c| is_environment_read(c));
    if read.is_none() && convo.offers("Read") {
        return Action::Explore(Turn {
            note: format!("verifying: reading the verify commands in {ENVIRONMENT_FILE}."),
            calls: vec![ToolCall {
                name: "Read",
                input: json!({ "file_path": ENVIRONMENT_FILE }),
            }],
        });
    }
    let commands = read
        .and_then(|c| c.result.as_ref())
        .filter(|r| !r.is_error)
        .map(|r| verify_commands(&strip_line_numbers(&r.text)))
        .unwrap_or_default();
    if commands.is_empty() {
        return Action::Reply(no_commands());
    }
    if !convo.offers("Bash") {
        return Action::Reply(format!(
            "{LABEL} {ENVIRONMENT_FILE} lists verify commands, but Bash is not offered, so \
             none could run.\nVERDICT: PARTIAL"
        ));
    }
    let to_run: Vec<ToolCall> = commands
        .iter()
        .filter(|cmd| bash_call(convo, cmd).is_none())
        .map(|cmd| ToolCall {
            name: "Bash",
            input: json!({ "command": cmd, "description": "Run a verify command" }),
        })
        .collect();
    if !to_run.is_empty() {
        return Action::Explore(Turn {
            note: format!(
                "verifying: running the {} verify command(s) from {ENVIRONMENT_FILE}.",
                to_run.len()
            ),
            calls: to_run,
        });
    }
    let runs: Vec<Run> = commands
        .iter()
        .map(|cmd| Run::of(cmd, bash_call(convo, cmd)))
        .collect();
    Action::Reply(report(&runs))
}

fn is_environment_read(call: &Call<'_>) -> bool {
    call.name == "Read"
        && call
            .input_str("file_path")
            .is_some_and(|p| p.trim().trim_start_matches("./") == ENVIRONMENT_FILE)
}

fn bash_call<'c, 'a>(convo: &'c Conversation<'a>, command: &str) -> Option<&'c Call<'a>> {
    convo
        .calls
        .iter()
        .find(|c| c.name == "Bash" && c.input_str("command") == Some(command))
}

fn no_commands() -> String {
    format!(
        "{LABEL} no test command was configured: {ENVIRONMENT_FILE} is missing or lists no \
         `[verify] commands`, and the offline planner does not guess one. Nothing was run, and \
         the change was not reviewed against the plan.\nVERDICT: PARTIAL"
    )
}

/// One verify command and how it went.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    command: String,
    /// `Some(0)` for success; `None` when it did not exit with a code (timed out, killed, not
    /// run).
    exit_code: Option<i32>,
    output: String,
}

impl Run {
    fn of(command: &str, call: Option<&Call<'_>>) -> Self {
        let result = call.and_then(|c| c.result.as_ref());
        let (exit_code, output) = match result {
            None => (None, "(no result)".to_owned()),
            Some(r) if !r.is_error => (Some(0), r.text.clone()),
            Some(r) => {
                let last = r.text.trim_end().lines().last().unwrap_or_default();
                match last
                    .strip_prefix("Exit code ")
                    .and_then(|c| c.trim().parse().ok())
                {
                    Some(code) => {
                        let body = r.text.trim_end();
                        (Some(code), body[..body.len() - last.len()].to_owned())
                    }
                    None => (None, r.text.clone()),
                }
            }
        };
        Run {
            command: command.to_owned(),
            exit_code,
            output,
        }
    }

    fn passed(&self) -> bool {
        self.exit_code == Some(0)
    }

    fn status(&self) -> String {
        match self.exit_code {
            Some(code) => format!("exit code {code}"),
            None => "no exit code (it did not finish)".to_owned(),
        }
    }
}

fn report(runs: &[Run]) -> String {
    let mut out =
        format!("{LABEL} ran the verify commands from {ENVIRONMENT_FILE}.\n\nCommands:\n");
    for run in runs {
        out.push_str(&format!("- `{}`: {}\n", run.command, run.status()));
    }
    let failed: Vec<&Run> = runs.iter().filter(|r| !r.passed()).collect();
    for run in &failed {
        let lines: Vec<&str> = run.output.trim_end().lines().collect();
        let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
        out.push_str(&format!(
            "\nFailing command: `{}` ({}). The last lines of its output:\n```\n{}\n```\n",
            run.command,
            run.status(),
            if tail.trim().is_empty() {
                "(no output)"
            } else {
                &tail
            }
        ));
    }
    out.push_str(
        "\nThe offline planner (no model configured) ran the commands only; it did not review \
         the change against the plan step by step.\n",
    );
    out.push_str(if failed.is_empty() {
        "VERDICT: PASS"
    } else {
        "VERDICT: FAIL"
    });
    out
}

/// Read output without its `     1\t` line numbers (lines without one are kept as they are).
fn strip_line_numbers(text: &str) -> String {
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            match trimmed.split_once('\t') {
                Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => rest,
                _ => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The strings of `commands` in the `[verify]` table of a TOML text (a list of strings, or one
/// string). A small reader for this one key: basic and literal strings, comments, arrays over
/// several lines.
pub(super) fn verify_commands(toml: &str) -> Vec<String> {
    let mut section = String::new();
    let mut lines = toml.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.trim_start_matches('[');
            let name = name.split(']').next().unwrap_or_default();
            section = name.trim().to_owned();
            continue;
        }
        if section != "verify" {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim().trim_matches('"') != "commands" {
            continue;
        }
        let mut value = value.to_owned();
        while !balanced(&value) {
            let Some(more) = lines.next() else { break };
            value.push('\n');
            value.push_str(more);
        }
        return strings_in(&value);
    }
    Vec::new()
}

/// Whether every `[` outside strings and comments is closed.
fn balanced(value: &str) -> bool {
    let mut depth = 0_i32;
    scan(value, |c| match c {
        '[' => depth += 1,
        ']' => depth -= 1,
        _ => {}
    });
    depth <= 0
}

/// The strings in a TOML value, in order.
fn strings_in(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some(other) => s.push(other),
                            None => {}
                        },
                        other => s.push(other),
                    }
                }
                out.push(s);
            }
            '\'' => out.push(chars.by_ref().take_while(|c| *c != '\'').collect()),
            _ => {}
        }
    }
    out.retain(|s| !s.trim().is_empty());
    out
}

/// Calls `f` with each character outside strings and comments.
fn scan(value: &str, mut f: impl FnMut(char)) {
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            chars.next();
                        }
                        _ => {}
                    }
                }
            }
            '\'' => for _ in chars.by_ref().take_while(|c| *c != '\'') {},
            other => f(other),
        }
    }
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
