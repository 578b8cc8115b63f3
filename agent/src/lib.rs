//! `ultraplan-agent`: the in-container agent runtime.
//!
//! It speaks newline-delimited JSON frames on stdin/stdout with the server (docs/ARCHITECTURE.md
//! §3.5) and runs the agent loop (docs/ARCHITECTURE.md §4) in one of two modes: plan mode
//! (read-only, ends with a plan submitted through ExitPlanMode) and execution mode (implements an
//! approved plan with the writable tools, then exits so the server can diff the workspace):
//!
//! - [`runtime`]: the IO layer — frame reader/writer threads, handshake, heartbeats, the loop
//!   that drives the state machine and runs tools;
//! - [`lifecycle`]: the agent lifecycle as a pure state machine (input in, effects out);
//! - [`conversation`]: message helpers and the rebuild of a conversation from a transcript;
//! - [`context`]: spilling, clearing, snipping and compaction of the history;
//! - [`prompts`]: system prompt, first message and variants;
//! - [`plan_tools`]: TodoWrite, AskUserQuestion and ExitPlanMode;
//! - [`subagents`]: the `Task` tool's agent types, tool layers, forks and notifications;
//! - [`tools`]: the workspace tools inside a [`Workspace`]: `Glob`, `Grep`, `Read`, and in
//!   execution mode `Write`, `Edit` and `Bash`;
//! - [`workspace_copy`]: the throw-away copy of the workspace the verifier runs in.
//! - [`setup`]: `ultraplan-agent setup`, which runs an environment's setup commands.

pub mod config;
pub mod context;
pub mod conversation;
pub mod lifecycle;
pub mod plan_tools;
pub mod prompts;
pub mod runtime;
pub mod setup;
pub mod subagents;
pub mod tools;
pub mod workspace;
pub mod workspace_copy;
pub mod workspace_stamps;

#[cfg(test)]
mod test_support;

pub use runtime::{Outcome, RunEnv, run};
pub use tools::{ToolOutput, ToolRegistry};
pub use workspace::{Workspace, WorkspaceError};
