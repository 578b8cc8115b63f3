//! The `/v1` JSON API (docs/ARCHITECTURE.md §3.1).

pub mod bundle_uploads;
pub mod bundles;
pub mod comments;
pub mod environments;
pub mod events;
mod extract;
pub mod manifests;
pub mod meta;
pub mod patch;
pub mod runner_bundles;
pub mod runner_connect;
pub mod secrets;
pub mod sessions;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, head, post, put};

use crate::http::state::AppState;

/// Routes of the API, health and metrics.
pub fn routes(max_json_body: usize) -> Router<AppState> {
    Router::new()
        .route("/healthz", get(meta::healthz))
        .route("/metrics", get(meta::metrics))
        .route("/v1/openapi.json", get(meta::openapi))
        .route("/v1/eligibility", get(meta::eligibility))
        .route(
            "/v1/bundles/{sha256}",
            head(bundles::head).put(bundles::put),
        )
        .route(
            "/v1/bundles/{sha256}/upload",
            head(bundle_uploads::head).patch(bundle_uploads::patch),
        )
        .route("/v1/manifests", post(manifests::post))
        .route(
            "/v1/manifests/{bundle_id}/contents",
            put(manifests::put_contents),
        )
        .route("/v1/runner/bundles/{bundle_id}", get(runner_bundles::get))
        .route("/v1/runner/connect", get(runner_connect::connect))
        .route("/v1/environments", get(environments::list))
        .route(
            "/v1/environments/{name}",
            get(environments::get)
                .put(environments::put)
                .delete(environments::delete),
        )
        .route("/v1/secrets", get(secrets::list))
        .route(
            "/v1/secrets/{name}",
            put(secrets::put).delete(secrets::delete),
        )
        .route("/v1/sessions", get(sessions::list).post(sessions::create))
        .route("/v1/sessions/{id}", get(sessions::get))
        .route(
            "/v1/sessions/{id}/events",
            get(events::list).post(events::post),
        )
        .route("/v1/sessions/{id}/archive", post(sessions::archive))
        .route("/v1/sessions/{id}/plans", get(sessions::plans))
        .route("/v1/sessions/{id}/patch", get(patch::get))
        .route(
            "/v1/sessions/{id}/plans/{tool_use_id}/decision",
            post(sessions::decide),
        )
        .route(
            "/v1/sessions/{id}/plans/{tool_use_id}/comments",
            get(comments::list).post(comments::create),
        )
        .route(
            "/v1/sessions/{id}/plans/{tool_use_id}/comments/{comment_id}/reopen",
            post(comments::reopen),
        )
        .layer(DefaultBodyLimit::max(max_json_body))
}
