//! `/v1/sessions`: create, list, get, archive, plans and decisions.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use ultraplan_protocol::api::{CreateSessionRequest, Decision, PlanResource, SessionList};
use ultraplan_protocol::events::{EventBody, SystemEvent};
use ultraplan_protocol::session::{SessionResource, SessionStatus};

use super::extract::{ApiJson, ApiQuery};
use crate::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult};
use crate::flags::{Defaults, UserFlags};
use crate::sessions::{self, DecisionOutcome};
use crate::state::AppState;
use crate::store::{NewSession, SessionRow};
use crate::telemetry::names;

/// The caller's session, or 404 (also for other users' sessions).
pub async fn owned_session(state: &AppState, user: &AuthUser, id: &str) -> ApiResult<SessionRow> {
    state
        .store
        .session_for_user(&user.id, id)
        .await?
        .ok_or(ApiError::NotFound("session"))
}

/// The flags in force for a user.
pub async fn user_flags(state: &AppState, user_id: &str) -> ApiResult<UserFlags> {
    let rows = state.store.list_flags().await?;
    let defaults = Defaults {
        model: state.config.model.clone(),
    };
    Ok(UserFlags::resolve(user_id, &rows, &defaults))
}

async fn create_failed(state: &AppState, user: &AuthUser, error: ApiError) -> ApiError {
    let reason = match &error {
        ApiError::BadRequest { code, .. } | ApiError::Conflict { code, .. } => *code,
        ApiError::Forbidden(_) => "policy_blocked",
        ApiError::PayloadTooLarge(_) => "too_large",
        ApiError::NotFound(_) => "bundle_not_found",
        _ => "internal",
    };
    state
        .telemetry(
            names::CREATE_FAILED,
            &[("reason", reason)],
            Some(&user.id),
            None,
        )
        .await;
    error
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
    let result = match body {
        Ok(ApiJson(req)) => create_inner(&state, &user, req).await,
        Err(error) => Err(error),
    };
    match result {
        Ok(resource) => Ok((StatusCode::CREATED, Json(resource))),
        Err(error) => Err(create_failed(&state, &user, error).await),
    }
}

async fn create_inner(
    state: &AppState,
    user: &AuthUser,
    mut req: CreateSessionRequest,
) -> ApiResult<SessionResource> {
    let flags = user_flags(state, &user.id).await?;
    if !flags.enabled {
        return Err(ApiError::Forbidden(
            "ultraplan is disabled for this account by the server's policy".to_owned(),
        ));
    }
    let title = sessions::validate_create(&req, &state.config)?;
    if state
        .store
        .owned_bundle(&user.id, &req.bundle_id)
        .await?
        .is_none()
    {
        return Err(ApiError::NotFound("bundle"));
    }
    req.session_context
        .prompt_variant
        .get_or_insert_with(|| flags.prompt_variant.as_str().to_owned());
    req.session_context.model.get_or_insert(flags.model);
    let new = NewSession {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: user.id.clone(),
        title,
        bundle_id: Some(req.bundle_id.clone()),
        context: req.session_context,
        status: SessionStatus::Idle,
    };
    let (row, events) = state.store.create_session(&new, &req.events).await?;
    sessions::after_append(state, &row, &events).await;
    if let Some(orchestrator) = &state.orchestrator {
        orchestrator.launch(
            row.clone(),
            crate::orchestrator::Launch {
                timeout_seconds: flags.timeout_seconds,
                resumed: false,
            },
        );
    }
    state
        .telemetry(names::LAUNCHED, &[], Some(&user.id), Some(&row.id))
        .await;
    tracing::info!(session_id = %row.id, user = %user.name, "session created");
    Ok(sessions::resource(state, &row))
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
    let mut rows = state.store.list_sessions(&user.id, limit + 1).await?;
    let has_more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let data = rows.iter().map(|r| sessions::resource(&state, r)).collect();
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
    Ok(Json(sessions::resource(&state, &row)))
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
    if row.status == SessionStatus::Archived {
        return Err(ApiError::conflict(
            "already_archived",
            "the session is already archived",
        ));
    }
    if let Some(orchestrator) = &state.orchestrator {
        orchestrator.stop(&id).await;
    }
    let row = owned_session(&state, &user, &id).await?;
    if row.status == SessionStatus::Archived {
        return Err(ApiError::conflict(
            "already_archived",
            "the session is already archived",
        ));
    }
    let note = EventBody::System(SystemEvent {
        subtype: "archived".to_owned(),
        message: Some(format!("Session archived by {}.", user.name)),
        data: serde_json::Value::Null,
    });
    sessions::append(&state, &row, &[note]).await?;
    if !state.store.archive_session(&id).await? {
        return Err(ApiError::conflict(
            "already_archived",
            "the session is already archived",
        ));
    }
    state.hub.forget(&id);
    let row = owned_session(&state, &user, &id).await?;
    Ok(Json(sessions::resource(&state, &row)))
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
    let plans = state.store.list_plans(&row.id).await?;
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
    match sessions::decide(&state, &row, &tool_use_id, &decision).await? {
        DecisionOutcome::Decided(plan) | DecisionOutcome::AlreadyStands(plan) => Ok(Json(plan)),
    }
}
