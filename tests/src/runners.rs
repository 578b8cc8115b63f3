//! Keyless runners (`ultraplan-runner`) as real processes, linked to a [`ServerProcess`].

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::bail;
use tempfile::TempDir;
use tokio::process::{Child, Command};

use crate::harness::{ServerProcess, agent_bin, workspace_bin};

/// A runner process with a data dir (bundles, workspaces, its agent ledger) of its own.
pub struct RunnerProcess {
    child: Option<Child>,
    /// The name leases carry: `<token name>:<runner name>`.
    pub lease_name: String,
    pub data_dir: PathBuf,
    _dir: TempDir,
}

/// Mint a runner token named `name` on `server`'s database.
pub async fn runner_token(server: &ServerProcess, name: &str) -> anyhow::Result<String> {
    Ok(server
        .admin(&["runner-token", "add", name])
        .await?
        .trim()
        .to_owned())
}

impl RunnerProcess {
    /// Start runner `name` (token `token_name`'s) with `capacity` bwrap slots, linked to
    /// `server`'s address, and wait until the server welcomed it.
    pub async fn start(
        server_url: &str,
        token: &str,
        token_name: &str,
        name: &str,
        capacity: u32,
    ) -> anyhow::Result<Self> {
        Self::start_in(server_url, (token, token_name), name, capacity, "bwrap").await
    }

    /// [`RunnerProcess::start`] with the runner's sandbox (`bwrap` or `docker`).
    pub async fn start_in(
        server_url: &str,
        (token, token_name): (&str, &str),
        name: &str,
        capacity: u32,
        sandbox: &str,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("runner");
        std::fs::create_dir_all(&data_dir)?;
        let log = std::fs::File::create(data_dir.join("runner.log"))?;
        let child = Command::new(workspace_bin("ultraplan-runner")?)
            .args(["--server", server_url, "--name", name, "--sandbox", sandbox])
            .arg("--capacity")
            .arg(capacity.to_string())
            .arg("--data-dir")
            .arg(&data_dir)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("ULTRAPLAN_RUNNER_TOKEN", token)
            .env("ULTRAPLAN_AGENT_BIN", agent_bin()?)
            .env("ULTRAPLAN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()?;
        let runner = RunnerProcess {
            child: Some(child),
            lease_name: format!("{token_name}:{name}"),
            data_dir,
            _dir: dir,
        };
        runner.wait_linked().await?;
        Ok(runner)
    }

    async fn wait_linked(&self) -> anyhow::Result<()> {
        for _ in 0..600 {
            if self.log().contains("linked to the server") {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the runner never linked; its log:\n{}", self.log())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("runner.log")).unwrap_or_default()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// SIGKILL the runner, as a crash would; its agents die with their sandboxes' parent.
    pub async fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Wait for the runner to exit on its own (after SIGTERM); its exit status.
    pub async fn wait(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        match self.child.take() {
            Some(mut child) => Ok(child.wait().await?),
            None => bail!("the runner was already reaped"),
        }
    }
}
