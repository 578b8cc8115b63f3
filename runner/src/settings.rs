//! What a runner is told at start.

use std::path::PathBuf;

use crate::sandbox::SandboxKind;
use crate::sandbox::SandboxLimits;
use ultraplan_bundle::BundleLimits;

/// A runner's settings.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    /// The server's base URL (`http://` or `https://`).
    pub server: String,
    /// A runner token from `ultraplan-server runner-token add NAME`.
    pub token: String,
    /// This runner's own name; leases carry `<token name>:<name>`.
    pub name: String,
    /// Agents run at once.
    pub capacity: u32,
    /// Fetched bundles, execution workspaces, environment snapshots and the agent ledger.
    pub data_dir: PathBuf,
    pub agent_binary: PathBuf,
    pub sandbox: SandboxKind,
    pub limits: SandboxLimits,
    pub bundle_limits: BundleLimits,
    /// How long an environment snapshot is reused after its setup (docs/ARCHITECTURE.md §6.5).
    pub environment_ttl: std::time::Duration,
}

impl RunnerSettings {
    pub(crate) fn bundles_dir(&self) -> PathBuf {
        self.data_dir.join("bundles")
    }

    /// Environment snapshots this runner built for its agents.
    pub(crate) fn environments_dir(&self) -> PathBuf {
        self.data_dir.join("environments")
    }

    pub(crate) fn workspace_root(&self, session_id: &str) -> PathBuf {
        self.data_dir.join("workspaces").join(session_id)
    }

    /// The WebSocket address of the server's runner link.
    pub(crate) fn connect_url(&self) -> Result<String, String> {
        let base = self.server.trim_end_matches('/');
        let rest = base
            .strip_prefix("http://")
            .map(|r| format!("ws://{r}"))
            .or_else(|| base.strip_prefix("https://").map(|r| format!("wss://{r}")))
            .ok_or_else(|| format!("the server URL {base:?} is not http:// or https://"))?;
        Ok(format!("{rest}/v1/runner/connect"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_server(server: &str) -> RunnerSettings {
        RunnerSettings {
            server: server.to_owned(),
            token: String::new(),
            name: "r".to_owned(),
            capacity: 1,
            data_dir: PathBuf::from("/tmp"),
            agent_binary: PathBuf::from("/bin/true"),
            sandbox: SandboxKind::Bwrap,
            limits: SandboxLimits::default(),
            bundle_limits: BundleLimits::default(),
            environment_ttl: std::time::Duration::from_secs(3600),
        }
    }

    #[test]
    fn connect_urls_follow_the_scheme() {
        let cases = [
            ("http://h:1", Ok("ws://h:1/v1/runner/connect")),
            ("https://h/", Ok("wss://h/v1/runner/connect")),
            ("https://h/base", Ok("wss://h/base/v1/runner/connect")),
            ("ftp://h", Err(())),
        ];
        for (server, want) in cases {
            let got = with_server(server).connect_url().map_err(|_| ());
            assert_eq!(got.as_deref().map_err(|_| ()), want, "{server}");
        }
    }
}
