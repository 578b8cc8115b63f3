//! `/v1/secrets`: the caller's secrets for environment setup (docs/ARCHITECTURE.md §6.5).
//! Values are accepted and never returned.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ultraplan_protocol::secrets::{SecretList, SetSecretRequest};

use super::extract::ApiJson;
use crate::auth::AuthUser;
use crate::http::error::ApiResult;
use crate::http::state::AppState;

/// Create or replace a secret. Names match `^[A-Z_][A-Z0-9_]{0,63}$` and are not one of the
/// variables the sandbox sets itself (PATH, HOME, the proxy variables, …); values are at most
/// 64 KiB without NUL bytes.
#[utoipa::path(put, path = "/v1/secrets/{name}", tag = "secrets",
    params(("name" = String, Path, description = "The environment variable it becomes, e.g. PIP_TOKEN")),
    request_body = SetSecretRequest,
    responses((status = 204, description = "stored"),
        (status = 400, description = "bad name (`invalid_secret_name`) or value (`invalid_secret_value`), with the reason", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    user: AuthUser,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<SetSecretRequest>,
) -> ApiResult<StatusCode> {
    state
        .core
        .secrets()
        .set(&user.id, &name, &body.value)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's secrets by name, with when each was last set; never their values.
#[utoipa::path(get, path = "/v1/secrets", tag = "secrets",
    responses((status = 200, body = SecretList)),
    security(("bearer" = [])))]
pub async fn list(State(state): State<AppState>, user: AuthUser) -> ApiResult<Json<SecretList>> {
    let secrets = state.core.secrets().list(&user.id).await?;
    Ok(Json(SecretList { secrets }))
}

/// Delete a secret.
#[utoipa::path(delete, path = "/v1/secrets/{name}", tag = "secrets",
    params(("name" = String, Path, description = "The secret's name")),
    responses((status = 204, description = "deleted"),
        (status = 400, description = "bad name (`invalid_secret_name`)", body = ultraplan_protocol::api::ErrorBody),
        (status = 404, description = "the caller has no secret of that name", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    user: AuthUser,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    state.core.secrets().delete(&user.id, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
