//! The runner's link to its server: dial out, say hello, then relay until the link goes;
//! redial with backoff. Every agent dies with the link it was started on: the server hands its
//! sessions to the next runner, so an agent left running here would be a second agent.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use ultraplan_protocol::runner::{
    ControlMessage, FEATURE_ENVIRONMENTS, MAX_RUNNER_MESSAGE_BYTES, RUNNER_PROTOCOL_VERSION,
    RunnerMessage,
};

use crate::context::{Context, Up};
use crate::control::LinkState;
use crate::environment::{EnvironmentCache, Environments};
use crate::ledger::Ledger;
use crate::settings::RunnerSettings;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Longest wait between two dials.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Run until `shutdown`: link, relay, and redial whenever the link goes.
pub async fn run(
    settings: RunnerSettings,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    settings.connect_url().map_err(anyhow::Error::msg)?;
    clear_workspaces(&settings).await;
    let instance = format!("runner-{}", settings.name);
    let sandbox =
        crate::sandbox::select(settings.sandbox, &settings.agent_binary, &instance).await?;
    tracing::info!(sandbox = sandbox.name(), name = %settings.name, capacity = settings.capacity, "runner ready");
    let environments = Environments::new(EnvironmentCache::new(
        settings.environments_dir(),
        settings.environment_ttl,
    ));
    sweep_environments(environments.cache().clone());
    let ctx = Arc::new(Context {
        ledger: Ledger::at(&settings.data_dir),
        settings,
        sandbox,
        http: reqwest::Client::new(),
        fetching: tokio::sync::Mutex::new(()),
        environments,
    });
    let mut shutdown = pin!(shutdown);
    let mut backoff = Duration::from_millis(250);
    loop {
        match link_once(&ctx, &mut shutdown, &mut backoff).await {
            Ok(End::Shutdown) => return Ok(()),
            // The server's words are quoted (`?`), never written raw to a terminal.
            Ok(End::Lost(reason)) => tracing::warn!(?reason, "the link to the server was lost"),
            Err(error) => tracing::warn!(error = ?error.to_string(), "cannot link to the server"),
        }
        tokio::select! {
            () = &mut shutdown => return Ok(()),
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

enum End {
    Shutdown,
    Lost(String),
}

/// Sessions held before a restart are the server's to resume: leftover copies are dropped.
async fn clear_workspaces(settings: &RunnerSettings) {
    let dir = settings.data_dir.join("workspaces");
    let Ok(mut entries) = tokio::fs::read_dir(&dir).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let root = entry.path();
        let removed =
            tokio::task::spawn_blocking(move || crate::workspace::remove_root(&root)).await;
        if let Ok(Err(error)) = removed {
            tracing::warn!(%error, "cannot remove a leftover workspace");
        }
    }
}

/// Remove expired environment snapshots no agent holds, now and every hour: they are this
/// runner's own (docs/ARCHITECTURE.md §6.5).
fn sweep_environments(cache: EnvironmentCache) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(3600));
        loop {
            every.tick().await;
            let cache = cache.clone();
            let removed = tokio::task::spawn_blocking(move || cache.sweep())
                .await
                .unwrap_or(0);
            if removed > 0 {
                tracing::info!(removed, "removed expired environment snapshots");
            }
        }
    });
}

async fn dial(ctx: &Context) -> anyhow::Result<(Socket, Duration)> {
    let url = ctx.settings.connect_url().map_err(anyhow::Error::msg)?;
    let mut request = url.as_str().into_client_request()?;
    let bearer = format!("Bearer {}", ctx.settings.token);
    request
        .headers_mut()
        .insert("authorization", bearer.parse()?);
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_RUNNER_MESSAGE_BYTES))
        .max_frame_size(Some(MAX_RUNNER_MESSAGE_BYTES));
    let (mut socket, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(config), false).await?;
    let hello = RunnerMessage::Hello {
        protocol_version: RUNNER_PROTOCOL_VERSION,
        name: ctx.settings.name.clone(),
        capacity: ctx.settings.capacity,
        sandbox: ctx.sandbox.name().to_owned(),
        features: vec![FEATURE_ENVIRONMENTS.to_owned()],
    };
    socket
        .send(Message::text(serde_json::to_string(&hello)?))
        .await?;
    let answer = tokio::time::timeout(Duration::from_secs(30), socket.next()).await;
    let Ok(Some(Ok(Message::Text(text)))) = answer else {
        anyhow::bail!("the server did not welcome this runner");
    };
    match serde_json::from_str::<ControlMessage>(&text)? {
        ControlMessage::Welcome {
            runner,
            lease_seconds,
            ..
        } => {
            tracing::info!(%runner, lease_seconds, "linked to the server");
            Ok((socket, Duration::from_secs(lease_seconds.max(3))))
        }
        ControlMessage::Goodbye { reason } => {
            anyhow::bail!("the server refused this runner: {reason}")
        }
        _ => anyhow::bail!("the server's first answer was not a welcome"),
    }
}

async fn link_once(
    ctx: &Arc<Context>,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    backoff: &mut Duration,
) -> anyhow::Result<End> {
    let (mut socket, lease) = tokio::select! {
        () = shutdown.as_mut() => return Ok(End::Shutdown),
        dialed = dial(ctx) => dialed?,
    };
    *backoff = Duration::from_millis(250);
    let mut held = LinkState::default();
    let (up, mut from_agents) = mpsc::unbounded_channel::<Up>();
    // Agents die before the server could give their sessions away: it cuts a runner off
    // after a lease of silence, so the runner gives up after two thirds of one.
    let mut tick = tokio::time::interval(lease / 6);
    let mut heard = tokio::time::Instant::now();
    let end = loop {
        tokio::select! {
            () = shutdown.as_mut() => break End::Shutdown,
            received = socket.next() => match received {
                Some(Ok(Message::Text(text))) => {
                    heard = tokio::time::Instant::now();
                    match serde_json::from_str::<ControlMessage>(&text) {
                        Ok(message) => {
                            if let Some(reason) = held.on_control(ctx, &up, message) {
                                break End::Lost(reason);
                            }
                        }
                        Err(error) => tracing::warn!(%error, "ignoring a malformed message from the server"),
                    }
                }
                Some(Ok(Message::Close(_))) | None => break End::Lost("the server closed the link".to_owned()),
                Some(Ok(_)) => heard = tokio::time::Instant::now(),
                Some(Err(error)) => break End::Lost(error.to_string()),
            },
            Some(up) = from_agents.recv() => {
                let Some(message) = held.on_up(up) else {
                    continue;
                };
                if let Err(error) = send(&mut socket, &message).await {
                    break End::Lost(error);
                }
            }
            _ = tick.tick() => {
                if heard.elapsed() > lease * 2 / 3 {
                    break End::Lost(format!("the server was silent for {:?}", heard.elapsed()));
                }
                if let Err(error) = send(&mut socket, &RunnerMessage::Heartbeat {}).await {
                    break End::Lost(error);
                }
            }
        }
    };
    let mut left = held.agents();
    if left > 0 {
        tracing::warn!(agents = left, "killing every agent of the link");
    }
    // Agents are killed, runs of setup stopped and held snapshots released.
    drop(held);
    let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
    // Wait for the killed agents to be reaped (and their ends recorded in the ledger).
    let reaped = async {
        while left > 0 {
            match from_agents.recv().await {
                Some(Up::Ended(..)) => left -= 1,
                Some(Up::Message(_) | Up::Prepared { .. }) => {}
                None => return,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), reaped).await;
    Ok(end)
}

async fn send(socket: &mut Socket, message: &RunnerMessage) -> Result<(), String> {
    let text = serde_json::to_string(message).map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(20), socket.send(Message::text(text))).await {
        Ok(sent) => sent.map_err(|e| e.to_string()),
        Err(_) => Err("the server took nothing for 20 s".to_owned()),
    }
}
