//! Running one command: a shell in its own process group, in the workspace root, with a
//! cleared environment, stdin on /dev/null, and its output read in chunks into a bounded
//! [`Capture`] until it exits or its time is up.
//!
//! When the shell exits, whatever it left running in its group is killed (nothing outlives the
//! call). When the time is up, the whole group is killed. Either way the pipes are then drained
//! for a short grace period, so the output written before the end is kept.

use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use super::capture::Capture;
use super::group::{GroupGuard, LiveGroups};

/// Shells tried, in order.
pub const SHELLS: [&str; 2] = ["/bin/bash", "/bin/sh"];

/// The whole environment of a command.
pub const SHELL_ENV: [(&str, &str); 5] = [
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("HOME", "/tmp"),
    ("TMPDIR", "/tmp"),
    ("LANG", "C.UTF-8"),
    ("TERM", "dumb"),
];

/// The environment of a command: [`SHELL_ENV`], and when a prepared environment is bound
/// (`env_root`, from `ULTRAPLAN_ENV`), its programs first on `PATH` and its Python virtual
/// environment active (docs/ARCHITECTURE.md §6.5).
/// The egress relay's URL, once the runtime started one for an executing agent whose
/// environment lets it reach the network; commands get it as their proxy.
pub static PROXY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn shell_env(env_root: Option<&Path>) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = SHELL_ENV
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    if let Some(proxy) = PROXY.get() {
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            vars.push((name.to_owned(), proxy.clone()));
        }
    }
    let Some(root) = env_root else {
        return vars;
    };
    let venv = root.join("venv");
    let mut path = vec![venv.join("bin"), root.join("bin")];
    path.retain(|p| p.is_dir());
    let base = SHELL_ENV[0].1;
    let joined: Vec<String> = path.iter().map(|p| p.display().to_string()).collect();
    if let Some(entry) = vars.iter_mut().find(|(k, _)| k == "PATH") {
        entry.1 = joined
            .into_iter()
            .chain([base.to_owned()])
            .collect::<Vec<_>>()
            .join(":");
    }
    vars.push((
        ultraplan_protocol::environment::ENV_VAR.to_owned(),
        root.display().to_string(),
    ));
    if venv.is_dir() {
        vars.push(("VIRTUAL_ENV".to_owned(), venv.display().to_string()));
    }
    vars
}

/// How long the pipes are still read after the command ended or was killed.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// Bytes read from a pipe at a time.
const CHUNK: usize = 8192;

/// What to run.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    pub shell: &'a Path,
    pub command: &'a str,
    pub cwd: &'a Path,
    pub timeout: Duration,
    /// Characters of output kept (head and tail).
    pub max_chars: usize,
    /// A prepared environment bound into the sandbox, if any.
    pub env_root: Option<&'a Path>,
}

/// How the command ended.
#[derive(Debug)]
pub enum Ending {
    Exited(ExitStatus),
    TimedOut,
    /// Waiting for it failed (it was killed).
    Lost(std::io::Error),
}

/// A finished command.
#[derive(Debug)]
pub struct Finished {
    pub ending: Ending,
    pub output: Capture,
}

/// The first of `candidates` that exists.
pub fn find_shell(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Runs `job`; its process group is listed in `live` while it runs and killed when it ends,
/// times out, or when the returned future is dropped.
pub async fn run(job: &Job<'_>, live: &LiveGroups) -> std::io::Result<Finished> {
    let mut child = Command::new(job.shell)
        .arg("-c")
        .arg(job.command)
        .current_dir(job.cwd)
        .env_clear()
        .envs(shell_env(job.env_root))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()?;
    let pgid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| std::io::Error::other("the command exited before it could be tracked"))?;
    let mut guard = GroupGuard::new(pgid, live);
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(std::io::Error::other(
            "the command's output pipes are missing",
        ));
    };
    let mut output = Capture::new(job.max_chars);
    let ending = supervise(
        &mut child,
        &mut guard,
        pump(stdout, stderr, &mut output),
        job.timeout,
    )
    .await;
    Ok(Finished { ending, output })
}

/// Waits for the shell to exit or the timeout, whichever is first, while `pump` reads the
/// output; then kills the group and drains what is left.
async fn supervise(
    child: &mut Child,
    guard: &mut GroupGuard,
    pump: impl Future<Output = ()>,
    timeout: Duration,
) -> Ending {
    let mut pump = pin!(pump);
    let mut deadline = pin!(tokio::time::sleep(timeout));
    let mut drained = false;
    let waited = loop {
        tokio::select! {
            status = child.wait() => break Some(status),
            () = &mut pump, if !drained => drained = true,
            () = &mut deadline => break None,
        }
    };
    guard.kill();
    if !drained && tokio::time::timeout(DRAIN_GRACE, &mut pump).await.is_err() {
        tracing::warn!("output pipes still open after the command ended; output may be cut");
    }
    match waited {
        Some(Ok(status)) => Ending::Exited(status),
        Some(Err(e)) => Ending::Lost(e),
        None => {
            let _ = child.wait().await;
            Ending::TimedOut
        }
    }
}

/// Reads both pipes until both end, chunks going into `output` as they arrive.
async fn pump(
    mut stdout: impl AsyncRead + Unpin,
    mut stderr: impl AsyncRead + Unpin,
    output: &mut Capture,
) {
    let mut out_buf = vec![0u8; CHUNK];
    let mut err_buf = vec![0u8; CHUNK];
    let (mut out_open, mut err_open) = (true, true);
    while out_open || err_open {
        tokio::select! {
            read = stdout.read(&mut out_buf), if out_open => match read {
                Ok(n) if n > 0 => output.push(&out_buf[..n]),
                _ => out_open = false,
            },
            read = stderr.read(&mut err_buf), if err_open => match read {
                Ok(n) if n > 0 => output.push(&err_buf[..n]),
                _ => err_open = false,
            },
        }
    }
}
