//! The runner link: the messages a keyless runner (`ultraplan-runner`) and the server exchange
//! over one outbound WebSocket (`GET /v1/runner/connect`, a runner token as the bearer).
//!
//! The server claims sessions for the runner under leases and drives each session; the runner
//! only starts agents in its sandbox and relays their stdio. Every message about a session
//! names the lease epoch it belongs to: the server refuses (and tells the runner to kill)
//! anything of an epoch it no longer holds, so a runner cut off past its lease can never write.

use serde::{Deserialize, Serialize};

use crate::patch::PatchSummary;

/// The runner link's version; both sides refuse another.
pub const RUNNER_PROTOCOL_VERSION: u32 = 1;

/// Largest text message either side sends (a frame line plus its envelope).
pub const MAX_RUNNER_MESSAGE_BYTES: usize = 24 * 1024 * 1024;

/// One agent of one lease: the address every session message carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AgentRef {
    pub session_id: String,
    pub epoch: i64,
}

/// What the server asks a runner to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The bundle (its sha256); the runner fetches it from `GET /v1/runner/bundles/{id}`.
    pub bundle_id: String,
    /// An executing agent: it works in a writable copy of the bundle, whose patch the runner
    /// sends back before the agent's exit.
    pub writable: bool,
    /// `RUST_LOG`-style filter for the agent's own log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_filter: Option<String>,
}

/// Where an executing agent's writable copy came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceOrigin {
    /// Copied from the bundle for this launch: edits of an earlier launch elsewhere are not
    /// in it.
    Fresh,
    /// This runner's copy from an earlier launch of the same session, edits included.
    Kept,
}

/// Runner → server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunnerMessage {
    /// The first message: who the runner is and how many agents it runs at once.
    Hello {
        protocol_version: u32,
        name: String,
        capacity: u32,
        /// Its sandbox (`bwrap`, `docker`, `process`).
        sandbox: String,
    },
    /// The agent is running. For an executing agent, `workspace` says whether its writable
    /// copy was made fresh from the bundle for this launch or kept from an earlier one of
    /// this runner (absent for a planning agent, and from runners that predate it).
    Started {
        agent: AgentRef,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace: Option<WorkspaceOrigin>,
    },
    /// The agent could not be started.
    LaunchFailed { agent: AgentRef, reason: String },
    /// One line the agent wrote on stdout (a frame, without its newline).
    Stdout { agent: AgentRef, line: String },
    /// Text the agent wrote on stderr.
    Stderr { agent: AgentRef, text: String },
    /// The executing agent's workspace diff, sent before its exit.
    Patch {
        agent: AgentRef,
        /// The unified diff, base64 (it may hold binary hunks).
        diff_base64: String,
        summary: PatchSummary,
    },
    /// The patch could not be made.
    PatchFailed { agent: AgentRef, reason: String },
    /// The agent ended.
    Exited {
        agent: AgentRef,
        success: bool,
        description: String,
    },
    /// Liveness, answered by nothing.
    Heartbeat {},
}

/// Server → runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlMessage {
    /// The answer to `hello`: the name leases carry, and how often the server expects to hear
    /// from the runner (a runner silent past the lease is cut off).
    Welcome {
        protocol_version: u32,
        runner: String,
        lease_seconds: u64,
    },
    /// Start an agent.
    Launch { agent: AgentRef, spec: LaunchSpec },
    /// One line for the agent's stdin (a frame, without its newline).
    Stdin { agent: AgentRef, line: String },
    /// Kill the agent and forget it; sent too for anything of a lease the server does not hold.
    Kill { agent: AgentRef, reason: String },
    /// Liveness, answered by nothing.
    Heartbeat {},
    /// The link is refused or closing, and why.
    Goodbye { reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_their_tags() {
        let agent = AgentRef {
            session_id: "s1".to_owned(),
            epoch: 3,
        };
        let cases: Vec<(RunnerMessage, &str)> = vec![
            (
                RunnerMessage::Stdout {
                    agent: agent.clone(),
                    line: "{}".to_owned(),
                },
                r#"{"type":"stdout","agent":{"session_id":"s1","epoch":3},"line":"{}"}"#,
            ),
            (RunnerMessage::Heartbeat {}, r#"{"type":"heartbeat"}"#),
            (
                RunnerMessage::Exited {
                    agent,
                    success: true,
                    description: "exit status: 0".to_owned(),
                },
                r#"{"type":"exited","agent":{"session_id":"s1","epoch":3},"success":true,"description":"exit status: 0"}"#,
            ),
        ];
        for (message, json) in cases {
            assert_eq!(serde_json::to_string(&message).unwrap(), json);
            assert_eq!(
                serde_json::from_str::<RunnerMessage>(json).unwrap(),
                message
            );
        }
    }

    #[test]
    fn unknown_message_types_are_refused() {
        assert!(serde_json::from_str::<ControlMessage>(r#"{"type":"format_disk"}"#).is_err());
    }
}
