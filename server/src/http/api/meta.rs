//! Liveness, metrics, eligibility and the OpenAPI document.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use ultraplan_protocol::api::{Eligibility, Health, Reason, ReasonCode};

use crate::http::auth::MaybeUser;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::store::now_ms;

/// `/healthz`: liveness, plus the sandbox limits in force once a runner is chosen.
#[derive(Debug, serde::Serialize)]
pub struct HealthReport {
    #[serde(flatten)]
    pub health: Health,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::runner::SandboxStatus>,
}

// Once a runner is chosen, `sandbox` says which limits it enforces on this host (`cgroup`,
// `seccomp`, `unprivileged_uid`, `workspace_quota`, and `not_enforced` with reasons); the
// route always answers 200. (A `///` comment here would become the OpenAPI description.)
/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "meta", responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<HealthReport> {
    Json(HealthReport {
        health: Health {
            status: "ok".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        },
        sandbox: crate::runner::sandbox_status(),
    })
}

/// Prometheus text exposition.
#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus text", content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    #[allow(clippy::cast_precision_loss)]
    let waiting = state.core.hub.len() as f64;
    // A failed count is left out rather than reported as an empty queue.
    let queued = state.core.store.sessions_waiting(now_ms()).await.ok();
    #[allow(clippy::cast_precision_loss)]
    let running = (state
        .agents
        .orchestrator()
        .map_or(0, crate::orchestrator::Orchestrator::live_count)
        + state
            .fleet
            .as_ref()
            .map_or(0, crate::fleet::Fleet::agents_running)) as f64;
    let mut gauges = vec![
        (
            "event_waiters",
            "Sessions with a long-poll waiter or a recent append.",
            waiting,
        ),
        (
            "agents_running",
            "Sessions whose agent this process's runner, or a runner linked to it, runs.",
            running,
        ),
    ];
    #[allow(clippy::cast_precision_loss)]
    if let Some(fleet) = &state.fleet {
        gauges.push((
            "runners_linked",
            "Keyless runners (ultraplan-runner) linked to this process.",
            fleet.len() as f64,
        ));
    }
    #[allow(clippy::cast_precision_loss)]
    if let Some(queued) = queued {
        gauges.push((
            "sessions_queued",
            "Sessions waiting for a runner (queued, or under a lapsed lease).",
            queued as f64,
        ));
    }
    let body = state.core.counters.render(&gauges);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
}

/// Whether the caller may launch a session, why not, and the flags in force.
#[utoipa::path(get, path = "/v1/eligibility", tag = "meta",
    responses((status = 200, body = Eligibility)), security((), ("bearer" = [])))]
pub async fn eligibility(
    State(state): State<AppState>,
    MaybeUser(user): MaybeUser,
) -> ApiResult<Json<Eligibility>> {
    let Some(user) = user else {
        return Ok(Json(Eligibility {
            eligible: false,
            reasons: vec![Reason {
                code: ReasonCode::NotLoggedIn,
                message: "Not logged in: run `ultraplan login --server URL --token TOKEN` with a \
                          token from `ultraplan-server user add NAME`."
                    .to_owned(),
            }],
            flags: None,
            accepts_bundle_encodings: bundle_encodings(),
            resumable_bundle_uploads: true,
            max_bundle_bytes: Some(state.core.config.bundle_limits.max_archive_bytes),
            incremental_bundles: true,
        }));
    };
    let flags = crate::flags::for_user(&state.core, &user.id).await?;
    let mut reasons = Vec::new();
    if !flags.enabled {
        reasons.push(Reason {
            code: ReasonCode::PolicyBlocked,
            message: "ultraplan is disabled for this account by the server's policy \
                      (flag ultraplan_enabled)."
                .to_owned(),
        });
    }
    let openai =
        state.core.config.openai_api_key.is_some() || state.core.config.openai_base_url.is_some();
    if let Some(problem) = crate::config::model_problem(
        &flags.model,
        state.core.config.anthropic_api_key.is_some(),
        openai,
    ) {
        reasons.push(Reason {
            code: ReasonCode::NoModel,
            message: format!("The model '{}' cannot be used: {problem}.", flags.model),
        });
    }
    if let Some(problem) = state.agents.problem() {
        reasons.push(Reason {
            code: ReasonCode::NoRunner,
            message: format!("No agent can run on this server: {problem}."),
        });
    }
    Ok(Json(Eligibility {
        eligible: reasons.is_empty(),
        reasons,
        flags: Some(flags.effective()),
        accepts_bundle_encodings: bundle_encodings(),
        resumable_bundle_uploads: true,
        max_bundle_bytes: Some(state.core.config.bundle_limits.max_archive_bytes),
        incremental_bundles: true,
    }))
}

/// What eligibility advertises for bundle uploads, preferred first.
fn bundle_encodings() -> Vec<String> {
    ultraplan_bundle::BundleEncoding::ALL
        .iter()
        .map(|encoding| encoding.name().to_owned())
        .collect()
}

/// The OpenAPI document, generated from the handlers and wire types.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "OpenAPI 3.1 document")))]
pub async fn openapi() -> impl IntoResponse {
    Json(crate::http::openapi::document())
}
