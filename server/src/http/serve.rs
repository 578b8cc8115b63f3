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
use hyper_util::server::graceful::GracefulShutdown;
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
    let graceful = GracefulShutdown::new();
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
                let connection = builder
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
                let watched = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(error) = watched.await {
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
    graceful.shutdown().await;
    Ok(())
}
