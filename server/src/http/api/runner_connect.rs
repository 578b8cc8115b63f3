//! `GET /v1/runner/connect`: a keyless runner's link (docs/ARCHITECTURE.md §5.3). The runner
//! dials out with its runner token, says `hello`, and from then on the WebSocket carries the
//! messages of `ultraplan_protocol::runner` both ways until either side goes.

use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use ultraplan_protocol::runner::{
    ControlMessage, MAX_RUNNER_MESSAGE_BYTES, RUNNER_PROTOCOL_VERSION, RunnerMessage,
};

use crate::fleet::{Fleet, Member};
use crate::http::error::ApiError;
use crate::http::runner_auth::RunnerAuth;
use crate::http::state::AppState;
use crate::runner::remote::RemoteLink;

/// How long a runner has to say `hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn connect(
    State(state): State<AppState>,
    RunnerAuth(runner): RunnerAuth,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let Some(fleet) = state.fleet.clone() else {
        return Err(ApiError::Conflict {
            code: "no_runner_links",
            message: "this server takes no runner links".to_owned(),
        });
    };
    let token_name = runner.name;
    Ok(upgrade
        .max_message_size(MAX_RUNNER_MESSAGE_BYTES)
        .max_frame_size(MAX_RUNNER_MESSAGE_BYTES)
        .on_upgrade(move |socket| async move {
            if let Err(reason) = serve_link(socket, &token_name, fleet).await {
                tracing::info!(runner_token = %token_name, ?reason, "runner link ended");
            }
        }))
}

/// One link from `hello` to its end.
async fn serve_link(mut socket: WebSocket, token_name: &str, fleet: Fleet) -> Result<(), String> {
    let Hello {
        name: own_name,
        capacity,
        sandbox,
        features,
    } = hello(&mut socket).await?;
    let name = format!("{token_name}:{own_name}");
    let (link, mut outgoing) = RemoteLink::new(&name, &features);
    let member = match fleet.join(&name, capacity, link).await {
        Ok(member) => member,
        Err(error) => {
            let reason = error.to_string();
            let _ = send(
                &mut socket,
                &ControlMessage::Goodbye {
                    reason: reason.clone(),
                },
            )
            .await;
            return Err(reason);
        }
    };
    tracing::info!(runner = %name, capacity, ?sandbox, ?features, "runner link up");
    let lease = fleet.lease();
    let welcome = ControlMessage::Welcome {
        protocol_version: RUNNER_PROTOCOL_VERSION,
        runner: name.clone(),
        lease_seconds: lease.as_secs(),
    };
    let ended = match send(&mut socket, &welcome).await {
        Ok(()) => pump(&mut socket, &member, &mut outgoing, lease).await,
        Err(error) => Err(error),
    };
    fleet.leave(member).await;
    ended
}

/// What a runner's `hello` said.
struct Hello {
    name: String,
    capacity: u32,
    sandbox: String,
    features: Vec<String>,
}

/// Most features a runner may name, and their longest name.
const MAX_FEATURES: usize = 32;
const MAX_FEATURE_BYTES: usize = 64;

/// Wait for the runner's `hello`: its own name, capacity, sandbox and features.
async fn hello(socket: &mut WebSocket) -> Result<Hello, String> {
    let first = tokio::time::timeout(HELLO_TIMEOUT, socket.recv())
        .await
        .map_err(|_| "the runner said nothing".to_owned())?;
    let message = match first {
        Some(Ok(Message::Text(text))) => serde_json::from_str::<RunnerMessage>(&text)
            .map_err(|e| format!("the runner's hello is malformed: {e}"))?,
        _ => return Err("the runner's first message is not a hello".to_owned()),
    };
    match message {
        RunnerMessage::Hello {
            protocol_version,
            name,
            capacity,
            sandbox,
            features,
        } if protocol_version == RUNNER_PROTOCOL_VERSION => Ok(Hello {
            name,
            capacity,
            sandbox,
            features: features
                .into_iter()
                .filter(|f| f.len() <= MAX_FEATURE_BYTES)
                .take(MAX_FEATURES)
                .collect(),
        }),
        RunnerMessage::Hello {
            protocol_version, ..
        } => {
            let reason = format!(
                "the runner speaks link protocol {protocol_version}, this server {RUNNER_PROTOCOL_VERSION}"
            );
            let _ = send(
                socket,
                &ControlMessage::Goodbye {
                    reason: reason.clone(),
                },
            )
            .await;
            Err(reason)
        }
        _ => Err("the runner's first message is not a hello".to_owned()),
    }
}

/// Relay until either side goes. A runner silent for a whole lease is cut off: its sessions
/// must not wait on a runner that may be stopped or partitioned.
async fn pump(
    socket: &mut WebSocket,
    member: &Member,
    outgoing: &mut tokio::sync::mpsc::UnboundedReceiver<ControlMessage>,
    lease: Duration,
) -> Result<(), String> {
    let mut heartbeat = tokio::time::interval(lease / 3);
    let mut heard = tokio::time::Instant::now();
    loop {
        tokio::select! {
            received = socket.recv() => match received {
                Some(Ok(Message::Text(text))) => {
                    heard = tokio::time::Instant::now();
                    let message = serde_json::from_str::<RunnerMessage>(&text)
                        .map_err(|e| format!("a malformed message: {e}"))?;
                    member.link.dispatch(message);
                }
                Some(Ok(Message::Close(_))) | None => return Ok(()),
                Some(Ok(_)) => heard = tokio::time::Instant::now(),
                Some(Err(error)) => return Err(error.to_string()),
            },
            Some(message) = outgoing.recv() => send(socket, &message).await?,
            _ = heartbeat.tick() => {
                if heard.elapsed() > lease {
                    return Err(format!("the runner was silent for {lease:?}"));
                }
                send(socket, &ControlMessage::Heartbeat {}).await?;
            }
        }
    }
}

/// Send one message; a runner that does not take it within [`SEND_TIMEOUT`] is cut off (a
/// stopped runner must not stall the link's heartbeat check).
async fn send(socket: &mut WebSocket, message: &ControlMessage) -> Result<(), String> {
    let text = serde_json::to_string(message).map_err(|e| e.to_string())?;
    match tokio::time::timeout(SEND_TIMEOUT, socket.send(Message::Text(text.into()))).await {
        Ok(sent) => sent.map_err(|e| e.to_string()),
        Err(_) => Err(format!("the runner took nothing for {SEND_TIMEOUT:?}")),
    }
}

const SEND_TIMEOUT: Duration = Duration::from_secs(20);
