//! `git` run against a workspace's private repository: the git dir lives outside the tree the
//! agent can write, and no user, system or repository config can add hooks, filters or other
//! commands.

use std::path::PathBuf;
use std::process::Stdio;

use tokio::io::AsyncReadExt;

use super::WorkspaceError;

/// Options every call gets: no hooks, no filters from config, byte-exact content, stable
/// paths.
const CONFIG: [&str; 24] = [
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "core.fileMode=true",
    "-c",
    "core.symlinks=true",
    "-c",
    "core.quotepath=off",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.excludesFile=/dev/null",
    "-c",
    "safe.directory=*",
    "-c",
    "gc.auto=0",
    "-c",
    "diff.noprefix=false",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
];

/// A repository whose git dir and work tree are kept apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub git_dir: PathBuf,
    pub work_tree: PathBuf,
}

impl Repo {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("git");
        command
            .args(CONFIG)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_AUTHOR_NAME", "ultraplan")
            .env("GIT_AUTHOR_EMAIL", "ultraplan@localhost")
            .env("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z")
            .env("GIT_COMMITTER_NAME", "ultraplan")
            .env("GIT_COMMITTER_EMAIL", "ultraplan@localhost")
            .env("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z")
            .current_dir(&self.work_tree)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs `git args…`; stdout on success, an error with stderr otherwise.
    pub async fn run(&self, args: &[&str]) -> Result<Vec<u8>, WorkspaceError> {
        let output = self
            .command(args)
            .output()
            .await
            .map_err(|e| spawn_error(args, &e))?;
        if output.status.success() {
            return Ok(output.stdout);
        }
        Err(failed(args, &output.stderr))
    }

    /// Like [`Repo::run`], but stops reading (and kills git) once stdout passes `max` bytes:
    /// the output is never held in memory past the cap.
    pub async fn run_capped(&self, args: &[&str], max: usize) -> Result<Vec<u8>, WorkspaceError> {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| spawn_error(args, &e))?;
        let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Err(failed(args, b"git's output was not piped"));
        };
        let errors = tokio::spawn(async move {
            let mut text = Vec::new();
            let _ = (&mut stderr).take(64 * 1024).read_to_end(&mut text).await;
            text
        });
        let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
        let mut out = Vec::new();
        stdout
            .take(limit)
            .read_to_end(&mut out)
            .await
            .map_err(|e| spawn_error(args, &e))?;
        if out.len() > max {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(WorkspaceError::TooLarge(max));
        }
        let status = child.wait().await.map_err(|e| spawn_error(args, &e))?;
        let stderr = errors.await.unwrap_or_default();
        if status.success() {
            return Ok(out);
        }
        Err(failed(args, &stderr))
    }

    /// Like [`Repo::run`], with `input` on stdin (written while stdout is read).
    pub async fn run_with_input(
        &self,
        args: &[&str],
        input: Vec<u8>,
    ) -> Result<Vec<u8>, WorkspaceError> {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| spawn_error(args, &e))?;
        let Some(mut stdin) = child.stdin.take() else {
            return Err(failed(args, b"git's input was not piped"));
        };
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| spawn_error(args, &e))?;
        let _ = writer.await;
        if output.status.success() {
            return Ok(output.stdout);
        }
        Err(failed(args, &output.stderr))
    }

    /// Like [`Repo::run`], with stdout as trimmed text.
    pub async fn text(&self, args: &[&str]) -> Result<String, WorkspaceError> {
        let out = self.run(args).await?;
        Ok(String::from_utf8_lossy(&out).trim().to_owned())
    }
}

fn spawn_error(args: &[&str], e: &std::io::Error) -> WorkspaceError {
    WorkspaceError::Git {
        command: args.join(" "),
        reason: format!("cannot run git: {e}"),
    }
}

fn failed(args: &[&str], stderr: &[u8]) -> WorkspaceError {
    WorkspaceError::Git {
        command: args.join(" "),
        reason: String::from_utf8_lossy(stderr).trim().to_owned(),
    }
}

/// Whether a usable `git` is on the PATH.
pub async fn available() -> bool {
    tokio::process::Command::new("git")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}
