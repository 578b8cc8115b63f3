//! Execution environments: where a prepared environment appears in a sandbox, and what a
//! runner hands `ultraplan-agent setup` (docs/ARCHITECTURE.md §6.5).
//!
//! Setup runs the environment's commands in the same sandbox as the agent, with `/env`
//! writable (it becomes the cached snapshot), the repository read-only, and the network
//! reachable only through the runner's egress proxy: a Unix socket bound into the sandbox,
//! which `ultraplan-agent setup` relays from a loopback port so ordinary `HTTP_PROXY`
//! clients can use it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a prepared environment appears in every sandbox that uses it (read-write during
/// setup only).
pub const ENV_MOUNT: &str = "/env";
/// `HOME` during setup, so per-user installs and caches land in the snapshot.
pub const ENV_HOME: &str = "/env/home";
/// The Python virtual environment setup creates (over the system's packages), so
/// `python3 -m pip install …` installs into the snapshot.
pub const ENV_VENV: &str = "/env/venv";
/// Where the runner's egress proxy socket appears inside a setup sandbox.
pub const EGRESS_SOCKET_MOUNT: &str = "/run/ultraplan/egress.sock";
/// The loopback port inside the setup sandbox on which `ultraplan-agent setup` relays to the
/// egress socket; `HTTP_PROXY` and `HTTPS_PROXY` point here.
pub const EGRESS_RELAY_PORT: u16 = 3128;
/// The variable every sandbox with an environment sets to [`ENV_MOUNT`].
pub const ENV_VAR: &str = "ULTRAPLAN_ENV";

/// What a runner writes to `ultraplan-agent setup`'s stdin: one JSON document, then EOF.
///
/// The agent runs the commands in order with `/bin/sh -c`, in the workspace, each with the
/// given variables over its own base environment, its stdout and stderr merged into the
/// agent's stdout. Before each command it prints one line `$ <command>`. It stops at the
/// first command that fails and exits with that command's exit status (128 + signal when a
/// signal ended it); 0 when all succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SetupInput {
    pub commands: Vec<String>,
    /// Variables for the commands: the secrets named by the environment, and extra settings.
    /// Never logged by the agent.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Whether the egress socket is mounted: the agent then relays
    /// `127.0.0.1:EGRESS_RELAY_PORT` to it and sets the proxy variables.
    #[serde(default)]
    pub egress: bool,
}

/// The exit status `ultraplan-agent setup` uses when it could not run the commands at all
/// (bad input, no shell, the relay's port taken); it then says why on stderr, which tells it
/// apart from a command that itself exits 125.
pub const SETUP_INTERNAL_ERROR: u8 = 125;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_input_round_trips_and_defaults() {
        let input: SetupInput = serde_json::from_str(r#"{"commands":["true"]}"#).unwrap();
        assert_eq!(input.commands, vec!["true"]);
        assert!(input.env.is_empty());
        assert!(!input.egress);
        let back: SetupInput =
            serde_json::from_str(&serde_json::to_string(&input).unwrap()).unwrap();
        assert_eq!(back, input);
    }
}
