//! The accept loop: HTTP/1.1 connections served by hyper with a header read timeout (axum's
//! own `serve` sets no timer, so a client that trickles its headers would hold a connection
//! forever), each request carrying its peer address, and a graceful shutdown.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt as _;

/// Accept and serve connections until `shutdown` resolves; then stop accepting and wait for
/// the connections in flight to finish.
pub(crate) async fn run(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Each connection holds a sender: once the last is gone, every connection has finished.
    let (alive, mut all_done) = tokio::sync::mpsc::channel::<()>(1);
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                let service = app
                    .clone()
                    .map_request(move |mut request: Request<Incoming>| {
                        request.extensions_mut().insert(ConnectInfo(peer));
                        request.map(Body::new)
                    });
                let mut builder = http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout);
                // Upgrades carry the runners' WebSocket links.
                let connection = builder
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                    .with_upgrades();
                let (alive, stopping) = (alive.clone(), stopping.clone());
                tokio::spawn(async move {
                    let _alive = alive;
                    if let Err(error) = graceful(connection, stopping).await {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                });
            }
            // Out of file descriptors and the like: wait a little rather than spin.
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    drop(alive);
    let _ = all_done.recv().await;
    Ok(())
}

/// Serve one connection; once `stopping` turns true, finish the request in flight and close.
/// (An upgraded connection, a runner's link, lives on in its own task.)
async fn graceful<C>(
    connection: C,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) -> Result<(), hyper::Error>
where
    C: Future<Output = Result<(), hyper::Error>> + GracefulShutdown,
{
    let mut connection = pin!(connection);
    tokio::select! {
        served = connection.as_mut() => served,
        () = async { let _ = stopping.wait_for(|stop| *stop).await; } => {
            connection.as_mut().shut_down();
            connection.await
        }
    }
}

/// A connection that can be asked to finish its request in flight and close.
trait GracefulShutdown {
    fn shut_down(self: std::pin::Pin<&mut Self>);
}

impl<I, S> GracefulShutdown for http1::UpgradeableConnection<I, S>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: hyper::body::Body + 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn shut_down(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}
