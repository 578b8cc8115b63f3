//! The runner link: the messages a keyless runner (`ultraplan-runner`) and the server exchange
//! over one outbound WebSocket (`GET /v1/runner/connect`, a runner token as the bearer).
//!
//! The server claims sessions for the runner under leases and drives each session; the runner
//! only starts agents in its sandbox, relays their stdio, and (when it says it can) prepares
//! their environments on its own disk ([`crate::runner_environment`]). Every message about a session
//! names the lease epoch it belongs to: the server refuses (and tells the runner to kill)
//! anything of an epoch it no longer holds, so a runner cut off past its lease can never write.

use serde::{Deserialize, Serialize};

use crate::patch::PatchSummary;
pub use crate::runner_environment::*;

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
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The bundle (its sha256); the runner fetches it from `GET /v1/runner/bundles/{id}`.
    pub bundle_id: String,
    /// An executing agent: it works in a writable copy of the bundle, whose patch the runner
    /// sends back before the agent's exit.
    pub writable: bool,
    /// `RUST_LOG`-style filter for the agent's own log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_filter: Option<String>,
    /// The snapshot a `prepare` of this agent leased: bound read-only at `/env`. The runner
    /// refuses the launch unless it holds that key for the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_key: Option<String>,
    /// The Docker image (its id) the environment is built on, as the `prepare` reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
    /// Who an executing agent's Bash may reach (the environment's `[agent] network`
    /// entries); empty for nobody.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_network: Vec<String>,
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
        /// What it can do beyond launching agents (e.g. [`FEATURE_ENVIRONMENTS`]); absent
        /// from runners that predate it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        features: Vec<String>,
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
    /// Lines of a `prepare`'s setup or maintenance output, masked, in order.
    EnvironmentOutput { agent: AgentRef, lines: Vec<String> },
    /// How a `prepare` ended.
    EnvironmentDone {
        agent: AgentRef,
        outcome: EnvironmentOutcome,
    },
    /// The agent ended. `blocked` lists the hosts its network allow-list refused (an
    /// executing agent's, when its environment gives it one).
    Exited {
        agent: AgentRef,
        success: bool,
        description: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blocked: Vec<BlockedHost>,
        #[serde(default, skip_serializing_if = "is_zero")]
        blocked_beyond: u64,
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
    /// Make the agent's environment ready (only to runners that advertise
    /// [`FEATURE_ENVIRONMENTS`]); answered by `environment_output` and `environment_done`.
    Prepare {
        agent: AgentRef,
        spec: EnvironmentSpec,
    },
    /// Drop the snapshot a `prepare` holds for the agent, if no launch took it.
    Release { agent: AgentRef },
    /// One line for the agent's stdin (a frame, without its newline).
    Stdin { agent: AgentRef, line: String },
    /// Kill the agent and forget it; sent too for anything of a lease the server does not hold.
    Kill { agent: AgentRef, reason: String },
    /// Liveness, answered by nothing.
    Heartbeat {},
    /// The link is refused or closing, and why.
    Goodbye { reason: String },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
                    agent: agent.clone(),
                    success: true,
                    description: "exit status: 0".to_owned(),
                    blocked: vec![],
                    blocked_beyond: 0,
                },
                r#"{"type":"exited","agent":{"session_id":"s1","epoch":3},"success":true,"description":"exit status: 0"}"#,
            ),
            (
                RunnerMessage::Exited {
                    agent: agent.clone(),
                    success: true,
                    description: "exit status: 0".to_owned(),
                    blocked: vec![BlockedHost {
                        host: "127.0.0.1".to_owned(),
                        port: 9,
                        attempts: 2,
                    }],
                    blocked_beyond: 1,
                },
                r#"{"type":"exited","agent":{"session_id":"s1","epoch":3},"success":true,"description":"exit status: 0","blocked":[{"host":"127.0.0.1","port":9,"attempts":2}],"blocked_beyond":1}"#,
            ),
            (
                RunnerMessage::Hello {
                    protocol_version: 1,
                    name: "r1".to_owned(),
                    capacity: 2,
                    sandbox: "bwrap".to_owned(),
                    features: vec![FEATURE_ENVIRONMENTS.to_owned()],
                },
                r#"{"type":"hello","protocol_version":1,"name":"r1","capacity":2,"sandbox":"bwrap","features":["environments"]}"#,
            ),
            (
                RunnerMessage::EnvironmentOutput {
                    agent: agent.clone(),
                    lines: vec!["$ make".to_owned(), "token ***".to_owned()],
                },
                r#"{"type":"environment_output","agent":{"session_id":"s1","epoch":3},"lines":["$ make","token ***"]}"#,
            ),
            (
                RunnerMessage::EnvironmentDone {
                    agent: agent.clone(),
                    outcome: EnvironmentOutcome::Reused {
                        snapshot: SnapshotInfo {
                            key: "k".to_owned(),
                            built_at_ms: 5,
                            setup_ms: 7,
                            generation: 1,
                            base_image: None,
                        },
                    },
                },
                r#"{"type":"environment_done","agent":{"session_id":"s1","epoch":3},"outcome":{"kind":"reused","snapshot":{"key":"k","built_at_ms":5,"setup_ms":7,"generation":1}}}"#,
            ),
            (
                RunnerMessage::EnvironmentDone {
                    agent: agent.clone(),
                    outcome: EnvironmentOutcome::Failed {
                        report: RunReport {
                            end: RunEnd::Failed {
                                exit_code: Some(3),
                                description: "exit status: 3".to_owned(),
                            },
                            duration_ms: 12,
                            blocked: vec![],
                            blocked_beyond: 0,
                            tail: vec!["about to fail".to_owned()],
                        },
                    },
                },
                r#"{"type":"environment_done","agent":{"session_id":"s1","epoch":3},"outcome":{"kind":"failed","report":{"end":"failed","exit_code":3,"description":"exit status: 3","duration_ms":12,"blocked_beyond":0,"tail":["about to fail"]}}}"#,
            ),
            (
                RunnerMessage::EnvironmentDone {
                    agent: agent.clone(),
                    outcome: EnvironmentOutcome::Missing {
                        key: "k".to_owned(),
                    },
                },
                r#"{"type":"environment_done","agent":{"session_id":"s1","epoch":3},"outcome":{"kind":"missing","key":"k"}}"#,
            ),
            (
                RunnerMessage::EnvironmentDone {
                    agent,
                    outcome: EnvironmentOutcome::Gone {},
                },
                r#"{"type":"environment_done","agent":{"session_id":"s1","epoch":3},"outcome":{"kind":"gone"}}"#,
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
    fn control_messages_round_trip_with_their_tags() {
        let agent = AgentRef {
            session_id: "s1".to_owned(),
            epoch: 3,
        };
        let spec = EnvironmentSpec {
            phase: PreparePhase::Setup,
            bundle_id: "b".to_owned(),
            definition: "[setup]\n".to_owned(),
            lock_files: vec![LockDigest {
                path: "requirements.txt".to_owned(),
                sha256: None,
            }],
            scope: "u1".to_owned(),
            secrets: SecretValues([("TOKEN".to_owned(), "v".to_owned())].into()),
            timeout_seconds: 60,
            log_filter: None,
        };
        let launch = LaunchSpec {
            bundle_id: "b".to_owned(),
            writable: true,
            log_filter: None,
            environment_key: Some("k".to_owned()),
            base_image: None,
            agent_network: vec!["example.com".to_owned()],
        };
        let cases: Vec<(ControlMessage, &str)> = vec![
            (
                ControlMessage::Prepare {
                    agent: agent.clone(),
                    spec,
                },
                r#"{"type":"prepare","agent":{"session_id":"s1","epoch":3},"spec":{"phase":"setup","bundle_id":"b","definition":"[setup]\n","lock_files":[{"path":"requirements.txt"}],"scope":"u1","secrets":{"TOKEN":"v"},"timeout_seconds":60}}"#,
            ),
            (
                ControlMessage::Release {
                    agent: agent.clone(),
                },
                r#"{"type":"release","agent":{"session_id":"s1","epoch":3}}"#,
            ),
            (
                ControlMessage::Launch {
                    agent,
                    spec: launch,
                },
                r#"{"type":"launch","agent":{"session_id":"s1","epoch":3},"spec":{"bundle_id":"b","writable":true,"environment_key":"k","agent_network":["example.com"]}}"#,
            ),
        ];
        for (message, json) in cases {
            assert_eq!(serde_json::to_string(&message).unwrap(), json);
            assert_eq!(
                serde_json::from_str::<ControlMessage>(json).unwrap(),
                message
            );
        }
    }

    #[test]
    fn older_shapes_still_read_with_defaults() {
        let hello: RunnerMessage = serde_json::from_str(
            r#"{"type":"hello","protocol_version":1,"name":"r","capacity":1,"sandbox":"bwrap"}"#,
        )
        .unwrap();
        assert!(matches!(hello, RunnerMessage::Hello { features, .. } if features.is_empty()));
        let launch: LaunchSpec =
            serde_json::from_str(r#"{"bundle_id":"b","writable":false}"#).unwrap();
        assert_eq!(launch.environment_key, None);
        assert!(launch.agent_network.is_empty());
    }

    #[test]
    fn secret_values_never_show_in_debug_output() {
        let secrets = SecretValues([("TOKEN".to_owned(), "s3cr3t".to_owned())].into());
        let spec = format!("{secrets:?}");
        assert!(spec.contains("TOKEN"), "{spec}");
        assert!(!spec.contains("s3cr3t"), "{spec}");
    }

    #[test]
    fn unknown_message_types_are_refused() {
        assert!(serde_json::from_str::<ControlMessage>(r#"{"type":"format_disk"}"#).is_err());
    }
}
