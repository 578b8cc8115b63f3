//! The egress proxy: an HTTP proxy on a Unix socket that lets through only what a
//! [`NetworkPolicy`] allows and records the rest (docs/ARCHITECTURE.md §6.5).

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::blocked::{BlockedAttempt, BlockedLog};
use super::conn;
use super::policy::NetworkPolicy;

/// Bounds on what one client connection may do before it is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyLimits {
    /// The longest request head read (a longer one is answered 400).
    pub max_head: usize,
    /// How long a client has to send its whole request head (then it is closed).
    pub head_deadline: Duration,
    /// How long connecting upstream may take (then the client gets 502).
    pub connect_timeout: Duration,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        ProxyLimits {
            max_head: 16 * 1024,
            head_deadline: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// What the accept loop and every connection share.
pub(crate) struct Shared {
    pub(crate) policy: NetworkPolicy,
    pub(crate) limits: ProxyLimits,
    blocked: Mutex<BlockedLog>,
    connections: AtomicU64,
}

impl Shared {
    pub(crate) fn record_blocked(&self, host: &str, port: u16) {
        let mut log = self.blocked.lock().unwrap_or_else(PoisonError::into_inner);
        log.record(host, port);
    }

    pub(crate) fn record_connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running egress proxy. Dropping it (or [`EgressProxy::shutdown`]) stops accepting,
/// closes live connections and removes the socket file.
pub struct EgressProxy {
    socket: PathBuf,
    shared: Arc<Shared>,
    stop: CancellationToken,
    accept: Option<JoinHandle<()>>,
}

impl EgressProxy {
    /// Serve `policy` on a new Unix socket at `socket` (a stale socket there is replaced),
    /// with the default [`ProxyLimits`]. Must be called within a Tokio runtime (an error
    /// otherwise).
    pub fn start(socket: &Path, policy: NetworkPolicy) -> std::io::Result<EgressProxy> {
        EgressProxy::start_with(socket, policy, ProxyLimits::default())
    }

    /// [`EgressProxy::start`] with explicit limits.
    pub fn start_with(
        socket: &Path,
        policy: NetworkPolicy,
        limits: ProxyLimits,
    ) -> std::io::Result<EgressProxy> {
        // Outside a runtime, binding and spawning would panic.
        let runtime = tokio::runtime::Handle::try_current().map_err(std::io::Error::other)?;
        remove_stale_socket(socket)?;
        let listener = UnixListener::bind(socket)?;
        // The sandbox's user is another uid.
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o666))?;
        let shared = Arc::new(Shared {
            policy,
            limits,
            blocked: Mutex::new(BlockedLog::default()),
            connections: AtomicU64::new(0),
        });
        let stop = CancellationToken::new();
        let accept = runtime.spawn(accept_loop(listener, Arc::clone(&shared), stop.clone()));
        tracing::info!(socket = %socket.display(), policy = %shared.policy, "egress proxy started");
        Ok(EgressProxy {
            socket: socket.to_owned(),
            shared,
            stop,
            accept: Some(accept),
        })
    }

    /// The socket the proxy serves.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The policy the proxy enforces.
    pub fn policy(&self) -> &NetworkPolicy {
        &self.shared.policy
    }

    /// Refused `(host, port)` pairs in first-seen order with their attempt counts, at most
    /// [`super::MAX_BLOCKED_DISTINCT`] of them; see [`EgressProxy::blocked_overflow`].
    pub fn blocked(&self) -> Vec<BlockedAttempt> {
        let log = self
            .shared
            .blocked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        log.entries()
    }

    /// Refused attempts at pairs beyond those [`EgressProxy::blocked`] lists (each attempt
    /// counted, repeats included).
    pub fn blocked_overflow(&self) -> u64 {
        let log = self
            .shared
            .blocked
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        log.overflow()
    }

    /// Allowed upstream connections made so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Stop accepting, close every live connection and wait until they are closed, then
    /// remove the socket file.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(accept) = self.accept.take()
            && let Err(e) = accept.await
        {
            tracing::warn!(error = %e, "egress proxy accept loop failed");
        }
        // Drop removes the socket file.
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
        if let Err(e) = std::fs::remove_file(&self.socket)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            let socket = self.socket.display();
            tracing::warn!(socket = %socket, error = %e, "cannot remove the egress socket");
        }
    }
}

/// Remove a socket left by an earlier run; anything else at `path` is an error.
fn remove_stale_socket(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

async fn accept_loop(listener: UnixListener, shared: Arc<Shared>, stop: CancellationToken) {
    let mut clients = JoinSet::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    clients.spawn(conn::serve(stream, Arc::clone(&shared)));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "egress proxy cannot accept");
                    // Out of descriptors, most likely: let connections finish first.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = clients.join_next(), if !clients.is_empty() => {}
        }
    }
    drop(listener);
    clients.shutdown().await;
}
