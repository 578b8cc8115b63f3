//! The HTTP layer: the JSON API (`api`), the review pages (`pages`), request limits
//! (`ratelimit`), the one `IntoResponse` error type (`error`), the OpenAPI document and the
//! accept loop (`serve`). It is the only part of the server that speaks axum; everything below it
//! is called through plain functions (docs/ARCHITECTURE.md §2).

pub mod api;
pub mod auth;
pub mod error;
pub mod openapi;
pub mod pages;
pub mod ratelimit;
pub mod runner_auth;
mod serve;
pub mod state;

use std::future::Future;

use axum::Router;
use axum::http::header::{AUTHORIZATION, COOKIE};
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::trace::TraceLayer;

use crate::http::state::AppState;

/// The whole application.
pub fn router(state: AppState) -> Router {
    let limited = axum::middleware::from_fn_with_state(state.clone(), ratelimit::limit);
    let timed = axum::middleware::from_fn_with_state(state.clone(), ratelimit::deadline);
    api::routes(state.core.config.max_json_body)
        .merge(pages::routes())
        .layer(limited)
        .layer(timed)
        .layer(TraceLayer::new_for_http())
        .layer(SetSensitiveRequestHeadersLayer::new([
            AUTHORIZATION,
            COOKIE,
        ]))
        .layer(CatchPanicLayer::new())
        .with_state(state)
}

/// Serve until `shutdown` resolves, then finish in-flight requests. Each connection must send
/// a request's headers within the configured header timeout (idle keep-alive connections are
/// closed after it too); each request carries its peer address as `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let header_timeout = state.core.config.request_limits.header_timeout;
    let app = router(state);
    serve::run(listener, app, header_timeout, shutdown).await
}
