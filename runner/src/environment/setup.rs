//! Running an environment's setup in a sandbox: the egress proxy up for its network policy,
//! `ultraplan-agent setup` fed its input, output lines masked and passed on as they come,
//! and a time limit (docs/ARCHITECTURE.md §6.5).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use ultraplan_protocol::environment::SetupInput;

use super::output::{Redactor, Tail};
use crate::egress::{BlockedAttempt, EgressProxy, NetworkPolicy};
use crate::sandbox::spec::Purpose;
use crate::sandbox::{AgentControl, Sandbox, SandboxError, SandboxLimits, SandboxRequest};

/// How long output is still read after a setup past its limit was killed.
const KILL_GRACE: Duration = Duration::from_secs(10);

/// Everything one setup run needs.
#[derive(Debug, Clone)]
pub struct SetupRun {
    pub session_id: String,
    /// The repository (bound read-only).
    pub workspace: PathBuf,
    /// The directory being built (bound writable at `/env`).
    pub tree: PathBuf,
    pub commands: Vec<String>,
    /// The secrets setup gets, by name.
    pub secrets: std::collections::BTreeMap<String, String>,
    pub network: NetworkPolicy,
    pub timeout: Duration,
    pub agent_binary: PathBuf,
    pub limits: SandboxLimits,
    pub log_filter: String,
    /// The Docker image (its id) setup runs in, for an environment with a `[base] image`.
    pub base_image: Option<String>,
}

/// How setup ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupEnd {
    Succeeded,
    /// A command failed (its exit status), or the sandbox ended some other way.
    Failed {
        exit_code: Option<i32>,
        description: String,
    },
    /// Past its time limit; killed.
    TimedOut,
}

/// What a setup run reports.
#[derive(Debug, Clone)]
pub struct SetupReport {
    pub end: SetupEnd,
    pub duration: Duration,
    /// Hosts the proxy refused, in the order first seen.
    pub blocked: Vec<BlockedAttempt>,
    /// Refused attempts at further hosts once [`crate::egress::MAX_BLOCKED_DISTINCT`] were
    /// listed (counted, not named).
    pub blocked_beyond: u64,
    /// The last lines of output (masked).
    pub tail: Vec<String>,
}

/// Run setup; each output line (masked) goes to `lines` as it is read. Setup is killed
/// when `lines`' receiver is dropped before it ends.
pub async fn run(
    sandbox: &Sandbox,
    run: SetupRun,
    lines: mpsc::UnboundedSender<String>,
) -> Result<SetupReport, SandboxError> {
    let started = Instant::now();
    let proxy = start_proxy(&run.network)?;
    let request = SandboxRequest {
        session_id: run.session_id.clone(),
        workspace: run.workspace.clone(),
        writable: false,
        agent_binary: run.agent_binary.clone(),
        limits: run.limits.clone(),
        log_filter: run.log_filter.clone(),
        environment: Some(run.tree.clone()),
        purpose: Purpose::Setup {
            egress: proxy.as_ref().map(|(_, socket)| socket.clone()),
        },
        base_image: run.base_image.clone(),
        agent_egress: None,
    };
    let input = SetupInput {
        commands: run.commands.clone(),
        env: run.secrets.clone(),
        egress: proxy.is_some(),
    };
    let redactor = Redactor::new(run.secrets.values().map(String::as_str));
    let outcome = drive(sandbox, &request, &input, redactor, run.timeout, lines).await;
    let (blocked, blocked_beyond) = match proxy {
        Some((proxy, _)) => {
            let blocked = (proxy.blocked(), proxy.blocked_overflow());
            proxy.shutdown().await;
            blocked
        }
        None => (Vec::new(), 0),
    };
    let (end, tail) = outcome?;
    Ok(SetupReport {
        end,
        duration: started.elapsed(),
        blocked,
        blocked_beyond,
        tail,
    })
}

/// The proxy for a policy that lets anything out, on a socket of its own (`None` for a policy
/// that lets nothing out).
pub fn start_proxy(policy: &NetworkPolicy) -> Result<Option<(EgressProxy, PathBuf)>, SandboxError> {
    if matches!(policy, NetworkPolicy::None) {
        return Ok(None);
    }
    // Unix socket paths are short (108 bytes): the system's temp directory, not the data dir.
    let name = uuid::Uuid::new_v4().simple().to_string();
    let socket = std::env::temp_dir().join(format!("ultraplan-egress-{}.sock", &name[..12]));
    let proxy = EgressProxy::start(&socket, policy.clone()).map_err(|e| SandboxError::Spawn {
        program: "egress proxy".to_owned(),
        reason: e.to_string(),
    })?;
    Ok(Some((proxy, socket)))
}

async fn drive(
    sandbox: &Sandbox,
    request: &SandboxRequest,
    input: &SetupInput,
    redactor: Redactor,
    timeout: Duration,
    lines: mpsc::UnboundedSender<String>,
) -> Result<(SetupEnd, Vec<String>), SandboxError> {
    let process = sandbox.launch(request).await?;
    let (mut stdin, stdout, stderr, mut control) =
        process.into_parts().ok_or_else(|| SandboxError::Spawn {
            program: "setup".to_owned(),
            reason: "stdio was not piped".to_owned(),
        })?;
    let body = serde_json::to_vec(input).map_err(|e| SandboxError::Spawn {
        program: "setup".to_owned(),
        reason: e.to_string(),
    })?;
    // A sandbox that died at once closes its stdin; its exit says why.
    let _ = stdin.write_all(&body).await;
    let _ = stdin.shutdown().await;
    drop(stdin);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let readers = [read_lines(stdout, tx.clone()), read_lines(stderr, tx)];
    let mut deadline = tokio::time::Instant::now() + timeout;
    let mut tail = Tail::default();
    let mut stopped = None;
    loop {
        tokio::select! {
            line = rx.recv() => match line {
                Some(raw) => {
                    let line = redactor.line(&raw);
                    tail.push(&line);
                    let _ = lines.send(line);
                }
                None => break,
            },
            () = tokio::time::sleep_until(deadline) => {
                if stopped.is_some() {
                    // Killed, yet something still holds its output open: stop reading.
                    break;
                }
                stopped = Some(Stopped::TimedOut);
                control.start_kill();
                deadline = tokio::time::Instant::now() + KILL_GRACE;
            }
            // Whoever waits for the output is gone (a linked runner told to stop): kill it.
            () = lines.closed(), if stopped.is_none() => {
                stopped = Some(Stopped::Cancelled);
                control.start_kill();
                deadline = tokio::time::Instant::now() + KILL_GRACE;
            }
        }
    }
    for reader in readers {
        reader.abort();
    }
    let end = finish(&mut control, stopped).await;
    Ok((end, tail.lines()))
}

/// Why setup was killed before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    TimedOut,
    Cancelled,
}

async fn finish(control: &mut AgentControl, stopped: Option<Stopped>) -> SetupEnd {
    let exit = control.wait().await;
    match stopped {
        Some(Stopped::TimedOut) => return SetupEnd::TimedOut,
        Some(Stopped::Cancelled) => {
            return SetupEnd::Failed {
                exit_code: None,
                description: "stopped: nobody waits for it any more".to_owned(),
            };
        }
        None => {}
    }
    match exit {
        Some(exit) if exit.success => SetupEnd::Succeeded,
        Some(exit) => SetupEnd::Failed {
            exit_code: exit.code,
            description: exit.description,
        },
        None => SetupEnd::Failed {
            exit_code: None,
            description: "the setup sandbox did not report how it ended".to_owned(),
        },
    }
}

/// Pass each line of a stream on (a line over the cap is cut and the rest of it dropped).
fn read_lines(
    stream: impl AsyncRead + Send + Unpin + 'static,
    tx: mpsc::UnboundedSender<Vec<u8>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut reader)
                .take(64 * 1024)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    if tx.send(line.clone()).is_err() {
                        return;
                    }
                }
            }
        }
    })
}
