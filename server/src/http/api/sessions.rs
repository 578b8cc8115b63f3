//! `/v1/sessions`: create, list, get, archive, plans and decisions.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use ultraplan_protocol::api::{CreateSessionRequest, Decision, PlanResource, SessionList};
use ultraplan_protocol::session::SessionResource;

use super::extract::{ApiJson, ApiQuery};
use crate::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::sessions::{self, DecisionOutcome};
use crate::store::SessionRow;

/// The caller's session, or 404 (also for other users' sessions).
pub async fn owned_session(state: &AppState, user: &AuthUser, id: &str) -> ApiResult<SessionRow> {
    Ok(sessions::owned(&state.core, &user.id, id).await?)
}

/// Create a session from an uploaded bundle and its first events.
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions",
    request_body = CreateSessionRequest,
    responses((status = 201, body = SessionResource),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 403, body = ultraplan_protocol::api::ErrorBody),
        (status = 404, description = "bundle not uploaded by this user", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    user: AuthUser,
    body: Result<ApiJson<CreateSessionRequest>, ApiError>,
) -> ApiResult<(StatusCode, Json<SessionResource>)> {
    let req = match body {
        Ok(ApiJson(req)) => req,
        Err(error) => {
            let reason = match &error {
                ApiError::BadRequest { code, .. } => code,
                ApiError::PayloadTooLarge(_) => "too_large",
                _ => "internal",
            };
            sessions::record_create_failure(&state.core, &user.id, reason).await;
            return Err(error);
        }
    };
    let resource = sessions::create(&state.core, &state.agents, &user, req).await?;
    Ok((StatusCode::CREATED, Json(resource)))
}

/// Query of `GET /v1/sessions`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct ListQuery {
    /// At most this many sessions (default 50, max 100).
    pub limit: Option<u32>,
}

/// The caller's sessions, newest first.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", params(ListQuery),
    responses((status = 200, body = SessionList)), security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    user: AuthUser,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<SessionList>> {
    let limit = q.limit.unwrap_or(50).clamp(1, 100);
    let mut rows = state.core.store.list_sessions(&user.id, limit + 1).await?;
    let has_more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let data = rows
        .iter()
        .map(|r| sessions::resource(&state.core, &state.agents, r))
        .collect();
    Ok(Json(SessionList { data, has_more }))
}

/// One session.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = SessionResource), (status = 404, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
) -> ApiResult<Json<SessionResource>> {
    let row = owned_session(&state, &user, &id).await?;
    Ok(Json(sessions::resource(&state.core, &state.agents, &row)))
}

/// Stop a session for good. 409 when it already is archived (clients treat both as success).
#[utoipa::path(post, path = "/v1/sessions/{id}/archive", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = SessionResource), (status = 409, body = ultraplan_protocol::api::ErrorBody),
        (status = 404, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn archive(
    State(state): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
) -> ApiResult<Json<SessionResource>> {
    let row = owned_session(&state, &user, &id).await?;
    let note = format!("Session archived by {}.", user.name);
    let row = sessions::archive(&state.core, &state.agents, &row, note).await?;
    Ok(Json(sessions::resource(&state.core, &state.agents, &row)))
}

/// Every ExitPlanMode call of the session with its review state, oldest first.
#[utoipa::path(get, path = "/v1/sessions/{id}/plans", tag = "plans",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = Vec<PlanResource>)), security(("bearer" = [])))]
pub async fn plans(
    State(state): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
) -> ApiResult<Json<Vec<PlanResource>>> {
    let row = owned_session(&state, &user, &id).await?;
    let plans = state.core.store.list_plans(&row.id).await?;
    Ok(Json(plans.iter().map(|p| p.to_resource()).collect()))
}

/// Approve (optionally edited), reject with feedback, or teleport a pending plan. The
/// decision becomes the ExitPlanMode tool_result. Idempotent; 409 when a different decision
/// stands; 400 when no such plan is pending.
#[utoipa::path(post, path = "/v1/sessions/{id}/plans/{tool_use_id}/decision", tag = "plans",
    params(("id" = String, Path, description = "Session id"),
        ("tool_use_id" = String, Path, description = "The ExitPlanMode tool_use id")),
    request_body = Decision,
    responses((status = 200, body = PlanResource),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 409, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn decide(
    State(state): State<AppState>,
    user: AuthUser,
    Path((id, tool_use_id)): Path<(String, String)>,
    ApiJson(decision): ApiJson<Decision>,
) -> ApiResult<Json<PlanResource>> {
    let row = owned_session(&state, &user, &id).await?;
    match sessions::decide(&state.core, &state.agents, &row, &tool_use_id, &decision).await? {
        DecisionOutcome::Decided(plan) | DecisionOutcome::AlreadyStands(plan) => Ok(Json(plan)),
    }
}
