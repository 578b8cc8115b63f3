//! The review pages: login, sessions list, session timeline and plan review.
//!
//! Pages are server-rendered askama templates (`web/templates`) with a little vanilla JS
//! (`web/static/app.js`) for live updates over server-sent events. Every form carries a CSRF
//! token; every page and stream is scoped to its owner; all agent and plan text is escaped or
//! rendered from Markdown and sanitised.

mod actions;
mod assets;
mod auth;
mod bundle_files;
mod changes;
mod citations;
mod code;
mod comments;
mod diff;
mod digest;
mod download;
mod environments;
mod error;
mod evidence;
mod expiry;
mod format;
mod git_paths;
mod headers;
mod highlight;
mod list;
pub mod login;
mod markdown;
mod notice;
mod reads;
mod session;
mod stream;
mod templates;
mod timeline;
mod unified;
mod view;

#[cfg(test)]
mod snapshot_tests;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};

pub use headers::CSP;

use crate::http::state::AppState;

/// Largest form body (an edited plan).
const MAX_FORM_BYTES: usize = 1024 * 1024;

/// Routes of the web pages, and `POST /v1/login-links`.
pub fn routes() -> Router<AppState> {
    let pages = Router::new()
        .route("/", get(list::index))
        .route("/sessions", get(list::index))
        .route("/fragments/sessions", get(list::rows))
        .route("/sessions/{id}", get(session::page))
        .route("/sessions/{id}/stream", get(stream::stream))
        .route("/sessions/{id}/patch.diff", get(download::patch_diff))
        .route("/sessions/{id}/code/{*path}", get(code::page))
        .route(
            "/sessions/{id}/plans/{tool_use_id}/decision",
            post(actions::decide),
        )
        .route(
            "/sessions/{id}/plans/{tool_use_id}/comments",
            post(comments::add),
        )
        .route(
            "/sessions/{id}/plans/{tool_use_id}/comments/{comment_id}/reopen",
            post(comments::reopen),
        )
        .route("/sessions/{id}/answer", post(actions::answer))
        .route("/sessions/{id}/stop", post(actions::stop))
        .route("/login", get(login::form).post(login::submit))
        .route("/login/{token}", get(login::exchange))
        .route("/logout", post(login::logout))
        .route("/static/{hash}/{name}", get(assets::serve))
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(middleware::map_response(headers::secure));
    Router::new()
        .route("/v1/login-links", post(login::mint))
        .merge(pages)
}
