//! One client connection of the egress proxy: read the head, check the policy, then tunnel
//! or forward (docs/ARCHITECTURE.md §6.5).

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::time::timeout;

use super::head::{self, ProxyRequest};
use super::policy::normalize_host;
use super::proxy::Shared;

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection Established\r\n\r\n";

/// How reading a request head ended.
enum HeadRead {
    /// `buf[..end]` is the head; anything after it was sent early by the client.
    Complete {
        buf: Vec<u8>,
        end: usize,
    },
    TooLarge,
    Closed,
}

pub(crate) async fn serve(mut client: UnixStream, shared: Arc<Shared>) {
    if let Err(e) = serve_client(&mut client, &shared).await {
        tracing::debug!(error = %e, "egress connection ended with an error");
    }
}

async fn serve_client(client: &mut UnixStream, shared: &Shared) -> std::io::Result<()> {
    let limits = shared.limits;
    let read = timeout(limits.head_deadline, read_head(client, limits.max_head)).await;
    let (buf, end) = match read {
        Err(_) => {
            tracing::debug!("egress client sent no complete request head in time");
            return Ok(());
        }
        Ok(read) => match read? {
            HeadRead::Complete { buf, end } => (buf, end),
            HeadRead::Closed => return Ok(()),
            HeadRead::TooLarge => {
                let reason = format!("request head longer than {} bytes", limits.max_head);
                return respond(client, "400 Bad Request", &reason).await;
            }
        },
    };
    let request = match head::parse(&buf[..end]) {
        Ok(request) => request,
        Err(e) => return respond(client, "400 Bad Request", &e.to_string()).await,
    };
    let (host, port) = match &request {
        ProxyRequest::Connect { host, port } | ProxyRequest::Forward { host, port, .. } => {
            (host.clone(), *port)
        }
    };
    if !shared.policy.allows(&host, port) {
        return refuse(client, shared, &host, port).await;
    }
    let Some(mut upstream) = connect(client, shared, &host, port).await? else {
        return Ok(());
    };
    match request {
        ProxyRequest::Connect { .. } => client.write_all(ESTABLISHED).await?,
        ProxyRequest::Forward { head, .. } => upstream.write_all(&head).await?,
    }
    upstream.write_all(&buf[end..]).await?;
    tokio::io::copy_bidirectional(client, &mut upstream).await?;
    Ok(())
}

async fn read_head(client: &mut UnixStream, max: usize) -> std::io::Result<HeadRead> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(HeadRead::Closed);
        }
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = head::head_end(&buf[from..]).map(|e| from + e) {
            if end > max {
                return Ok(HeadRead::TooLarge);
            }
            return Ok(HeadRead::Complete { buf, end });
        }
        if buf.len() > max {
            return Ok(HeadRead::TooLarge);
        }
    }
}

/// Connect upstream; on failure answer 502 and give `None`.
async fn connect(
    client: &mut UnixStream,
    shared: &Shared,
    host: &str,
    port: u16,
) -> std::io::Result<Option<TcpStream>> {
    let limit = shared.limits.connect_timeout;
    let reason = match timeout(limit, TcpStream::connect((host, port))).await {
        Ok(Ok(stream)) => {
            shared.record_connection();
            tracing::debug!(host, port, "egress connected");
            return Ok(Some(stream));
        }
        Ok(Err(e)) => format!("cannot connect to {}: {e}", target(host, port)),
        Err(_) => format!("connecting to {} timed out", target(host, port)),
    };
    tracing::info!(host, port, reason = %reason, "egress upstream unreachable");
    respond(client, "502 Bad Gateway", &reason).await?;
    Ok(None)
}

async fn refuse(
    client: &mut UnixStream,
    shared: &Shared,
    host: &str,
    port: u16,
) -> std::io::Result<()> {
    let host = normalize_host(host);
    tracing::warn!(host = %host, port, "egress refused");
    shared.record_blocked(&host, port);
    let reason = format!(
        "{} is not in this environment's network allow-list",
        target(&host, port)
    );
    respond(client, "403 Forbidden", &reason).await
}

fn target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Answer with a one-line text body and close.
async fn respond(client: &mut UnixStream, status: &str, reason: &str) -> std::io::Result<()> {
    let body = format!("ultraplan egress: {reason}\n");
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    client.write_all(response.as_bytes()).await?;
    client.shutdown().await
}
