//! `/v1/environments`: the caller's named environments (docs/ARCHITECTURE.md §6.5), which a
//! session can use instead of its repository's environment file. Shared ones are listed and
//! used here, and set only by the operator (`ultraplan-server env add --shared`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ultraplan_protocol::environments::{EnvironmentInfo, EnvironmentList, PutEnvironmentRequest};

use super::extract::ApiJson;
use crate::auth::AuthUser;
use crate::environments::Scope;
use crate::http::error::ApiResult;
use crate::http::state::AppState;

/// Create or replace one of the caller's environments. The name matches
/// `^[a-z0-9][a-z0-9._-]{0,63}$`; the definition is checked exactly as a session reads an
/// environment file.
#[utoipa::path(put, path = "/v1/environments/{name}", tag = "environments",
    params(("name" = String, Path, description = "The environment's name, e.g. py312")),
    request_body = PutEnvironmentRequest,
    responses((status = 204, description = "stored"),
        (status = 400, description = "bad name (`invalid_environment_name`) or definition (`invalid_environment`), with the reason", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    user: AuthUser,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<PutEnvironmentRequest>,
) -> ApiResult<StatusCode> {
    let environments = state.core.environments();
    environments
        .set(Scope::Owner(&user.id), &name, &body.definition)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's environments and the shared ones, by name.
#[utoipa::path(get, path = "/v1/environments", tag = "environments",
    responses((status = 200, body = EnvironmentList)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    user: AuthUser,
) -> ApiResult<Json<EnvironmentList>> {
    let environments = state.core.environments().list(&user.id).await?;
    Ok(Json(EnvironmentList { environments }))
}

/// One environment as the caller sees it: their own, else a shared one.
#[utoipa::path(get, path = "/v1/environments/{name}", tag = "environments",
    params(("name" = String, Path, description = "The environment's name")),
    responses((status = 200, body = EnvironmentInfo),
        (status = 404, description = "no such environment for the caller", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    user: AuthUser,
    Path(name): Path<String>,
) -> ApiResult<Json<EnvironmentInfo>> {
    let row = state.core.environments().resolve(&user.id, &name).await?;
    Ok(Json(crate::environments::info(&row)))
}

/// Delete one of the caller's environments (a shared one is the operator's to delete).
#[utoipa::path(delete, path = "/v1/environments/{name}", tag = "environments",
    params(("name" = String, Path, description = "The environment's name")),
    responses((status = 204, description = "deleted"),
        (status = 404, description = "the caller has no environment of that name", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    user: AuthUser,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let environments = state.core.environments();
    environments.delete(Scope::Owner(&user.id), &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
