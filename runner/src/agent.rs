//! One agent the server asked for: fetch its bundle, make the writable copy an executing
//! agent works in, start it in the sandbox (with its environment's snapshot bound at `/env`
//! and, for an executing agent, the egress proxy of its `[agent] network`), relay its stdio,
//! and say how it ended (with the patch of its copy first, for an executing agent).

use std::sync::Arc;

use crate::sandbox::{AgentControl, AgentProcess, SandboxRequest};
use crate::workspace::{MAX_PATCH_BYTES, Workspace, patch_of};
use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use ultraplan_protocol::constants::MAX_FRAME_BYTES;
use ultraplan_protocol::runner::{AgentRef, LaunchSpec, RunnerMessage, WorkspaceOrigin};

use crate::context::{Context, Held, Up};
use crate::egress::{EgressProxy, NetworkPolicy};
use crate::environment::start_proxy;
use crate::environment::wire::blocked_to_wire;

/// The link's end of a running agent: its stdin, and a kill switch (dropping it kills too).
pub(crate) struct AgentHandle {
    pub(crate) stdin: mpsc::UnboundedSender<String>,
    pub(crate) kill: oneshot::Sender<()>,
    /// Tells this launch apart from a later one of the same lease (an execution after its
    /// plan's agent), whose handle a late end of this one must not remove.
    pub(crate) launch: u64,
}

/// Numbers the launches of this runner.
static LAUNCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Start the agent's task; its handle goes in the link's table.
pub(crate) fn spawn(
    ctx: Arc<Context>,
    agent: AgentRef,
    spec: LaunchSpec,
    environment: Option<Held>,
    up: mpsc::UnboundedSender<Up>,
) -> AgentHandle {
    let (stdin, stdin_rx) = mpsc::unbounded_channel();
    let (kill, kill_rx) = oneshot::channel();
    let launch = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tokio::spawn(async move {
        ctx.ledger
            .record(&agent.session_id, agent.epoch, "start")
            .await;
        let last = run(&ctx, &agent, &spec, environment, (stdin_rx, kill_rx), &up).await;
        ctx.ledger
            .record(&agent.session_id, agent.epoch, "end")
            .await;
        // The slot is free before the server hears the agent ended, so its next launch (an
        // execution after its plan's agent) never finds this runner full.
        let _ = up.send(Up::Ended(agent, launch));
        say(&up, last);
    });
    AgentHandle {
        stdin,
        kill,
        launch,
    }
}

fn say(up: &mpsc::UnboundedSender<Up>, message: RunnerMessage) {
    let _ = up.send(Up::Message(message));
}

/// The agent's stdin lines and kill switch, from the link.
type Inputs = (mpsc::UnboundedReceiver<String>, oneshot::Receiver<()>);

/// The agent's egress proxy and its socket.
type Proxy = Option<(EgressProxy, std::path::PathBuf)>;

async fn run(
    ctx: &Context,
    agent: &AgentRef,
    spec: &LaunchSpec,
    environment: Option<Held>,
    (stdin_rx, kill_rx): Inputs,
    up: &mpsc::UnboundedSender<Up>,
) -> RunnerMessage {
    let failed = |reason: String| RunnerMessage::LaunchFailed {
        agent: agent.clone(),
        reason,
    };
    // Held until the agent ends: its snapshot is not swept meanwhile.
    let proxy = match agent_proxy(spec) {
        Ok(proxy) => proxy,
        Err(reason) => return failed(reason),
    };
    let (process, workspace) = match start(ctx, agent, spec, environment.as_ref(), &proxy).await {
        Ok(started) => started,
        Err(reason) => {
            tracing::warn!(session_id = %agent.session_id, %reason, "cannot start the agent");
            return failed(reason);
        }
    };
    let Some((stdin, stdout, stderr, mut control)) = process.into_parts() else {
        return failed("the agent's stdio was not available".to_owned());
    };
    say(
        up,
        RunnerMessage::Started {
            agent: agent.clone(),
            workspace,
        },
    );
    tracing::info!(session_id = %agent.session_id, epoch = agent.epoch, writable = spec.writable, "agent started");
    tokio::spawn(feed_stdin(stdin, stdin_rx));
    tokio::spawn(relay_stderr(stderr, agent.clone(), up.clone()));
    relay_stdout(stdout, agent, up, kill_rx, &mut control).await;
    let exit = control.wait().await;
    if spec.writable {
        finish_workspace(ctx, agent, up).await;
    }
    let (success, description) = exit
        .map_or((false, "it could not be waited on".to_owned()), |e| {
            (e.success, e.description)
        });
    tracing::info!(session_id = %agent.session_id, epoch = agent.epoch, success, %description, "agent ended");
    let (blocked, blocked_beyond) = match proxy {
        Some((proxy, _socket)) => {
            let refused = (blocked_to_wire(&proxy.blocked()), proxy.blocked_overflow());
            proxy.shutdown().await;
            refused
        }
        None => (Vec::new(), 0),
    };
    drop(environment);
    RunnerMessage::Exited {
        agent: agent.clone(),
        success,
        description,
        blocked,
        blocked_beyond,
    }
}

/// The egress proxy an executing agent's `[agent] network` asks for (none for a planning
/// agent, or an empty allow-list).
fn agent_proxy(spec: &LaunchSpec) -> Result<Proxy, String> {
    if !spec.writable || spec.agent_network.is_empty() {
        return Ok(None);
    }
    let policy =
        NetworkPolicy::parse(&spec.agent_network).map_err(|e| format!("[agent] network: {e}"))?;
    start_proxy(&policy).map_err(|e| e.to_string())
}

/// Start the agent; for an executing one, say whether its copy was made for this launch.
async fn start(
    ctx: &Context,
    agent: &AgentRef,
    spec: &LaunchSpec,
    environment: Option<&Held>,
    proxy: &Proxy,
) -> Result<(AgentProcess, Option<WorkspaceOrigin>), String> {
    let bundle = crate::bundle::ensure(ctx, &spec.bundle_id).await?;
    let (workspace, origin) = if spec.writable {
        let workspace = Workspace::at(&ctx.settings.workspace_root(&agent.session_id));
        let origin = if workspace.is_prepared().await {
            WorkspaceOrigin::Kept
        } else {
            let owner = ctx.sandbox.workspace_owner();
            workspace
                .prepare(&bundle, owner)
                .await
                .map_err(|e| e.to_string())?;
            WorkspaceOrigin::Fresh
        };
        (workspace.tree, Some(origin))
    } else {
        (bundle, None)
    };
    let request = SandboxRequest {
        session_id: agent.session_id.clone(),
        workspace,
        writable: spec.writable,
        agent_binary: ctx.settings.agent_binary.clone(),
        limits: ctx.settings.limits.clone(),
        log_filter: spec.log_filter.clone().unwrap_or_else(|| "info".to_owned()),
        environment: environment.map(|held| held.lease.tree.clone()),
        purpose: Default::default(),
        base_image: environment.and_then(|held| held.base_image.clone()),
        agent_egress: proxy.as_ref().map(|(_, socket)| socket.clone()),
    };
    let process = ctx
        .sandbox
        .launch(&request)
        .await
        .map_err(|e| e.to_string())?;
    Ok((process, origin))
}

async fn feed_stdin(
    mut stdin: crate::sandbox::AgentInput,
    mut lines: mpsc::UnboundedReceiver<String>,
) {
    while let Some(line) = lines.recv().await {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if stdin.write_all(&bytes).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

async fn relay_stderr(
    mut stderr: crate::sandbox::AgentOutput,
    agent: AgentRef,
    up: mpsc::UnboundedSender<Up>,
) {
    let mut chunk = vec![0u8; 8192];
    while let Ok(n) = stderr.read(&mut chunk).await {
        if n == 0 {
            return;
        }
        let text = String::from_utf8_lossy(&chunk[..n]).into_owned();
        say(
            &up,
            RunnerMessage::Stderr {
                agent: agent.clone(),
                text,
            },
        );
    }
}

/// Relay stdout lines until the agent closes it, a line is too long, or the server (or a lost
/// link) says to kill it.
async fn relay_stdout(
    stdout: crate::sandbox::AgentOutput,
    agent: &AgentRef,
    up: &mpsc::UnboundedSender<Up>,
    mut kill_rx: oneshot::Receiver<()>,
    control: &mut AgentControl,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        tokio::select! {
            read = crate::lines::read_capped(&mut reader, &mut line, MAX_FRAME_BYTES) => match read {
                Ok(true) => {
                    let line = String::from_utf8_lossy(&line).into_owned();
                    say(up, RunnerMessage::Stdout { agent: agent.clone(), line });
                }
                Ok(false) => return,
                Err(error) => {
                    tracing::warn!(session_id = %agent.session_id, %error, "killing the agent");
                    control.start_kill();
                    return;
                }
            },
            _ = &mut kill_rx => {
                tracing::info!(session_id = %agent.session_id, epoch = agent.epoch, "killing the agent as the server asked (or its link was lost)");
                control.start_kill();
                return;
            }
        }
    }
}

/// An executing agent ended: send the patch of its copy (when the link is still up), then
/// drop the copy. A session resumed later starts from its bundle again.
async fn finish_workspace(ctx: &Context, agent: &AgentRef, up: &mpsc::UnboundedSender<Up>) {
    let root = ctx.settings.workspace_root(&agent.session_id);
    if !up.is_closed() {
        let message = match patch_of(&root, MAX_PATCH_BYTES).await {
            Ok(patch) => RunnerMessage::Patch {
                agent: agent.clone(),
                diff_base64: base64::engine::general_purpose::STANDARD.encode(&patch.diff),
                summary: patch.summary,
            },
            Err(error) => RunnerMessage::PatchFailed {
                agent: agent.clone(),
                reason: error.to_string(),
            },
        };
        say(up, message);
    }
    let removed = tokio::task::spawn_blocking(move || crate::workspace::remove_root(&root)).await;
    if let Ok(Err(error)) | Err(error) = removed.map_err(std::io::Error::other) {
        tracing::warn!(session_id = %agent.session_id, %error, "cannot remove the execution workspace");
    }
}
