//! `GET /v1/sessions/{id}/patch`: the unified diff remote execution produced.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use ultraplan_protocol::patch::{ExecutionState, PatchResource};

use super::sessions::owned_session;
use crate::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::store::{PatchRow, SessionRow, format_ms};

/// The patch of the session's remote execution: the raw `git diff --binary` output
/// (`text/x-diff`, empty when nothing changed), or with `Accept: application/json` a
/// `PatchResource`. 409 `execution_running` while the agent still executes; 404 `no_patch`
/// when the session has no execution or it produced none.
#[utoipa::path(get, path = "/v1/sessions/{id}/patch", tag = "sessions", operation_id = "get_patch",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The unified diff (text/x-diff), or PatchResource as JSON",
            body = PatchResource),
        (status = 404, body = ultraplan_protocol::api::ErrorBody),
        (status = 409, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let row = owned_session(&state, &user, &id).await?;
    let patch = stored_patch(&state, &row).await?;
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if wants_json {
        return Ok(Json(resource(&patch)).into_response());
    }
    let mut response = patch.diff.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/x-diff; charset=utf-8"),
    );
    Ok(response)
}

/// The stored patch, or why there is none.
pub async fn stored_patch(state: &AppState, row: &SessionRow) -> ApiResult<PatchRow> {
    match row.execution.as_ref().map(|e| e.state) {
        None => Err(ApiError::missing(
            "no_patch",
            "this session has no remote execution: its plan was not approved for it",
        )),
        Some(ExecutionState::Executing) => Err(ApiError::conflict(
            "execution_running",
            "the agent is still executing the plan; the patch is ready when it finishes",
        )),
        Some(ExecutionState::Finished) => crate::execution::load_patch(&state.core, &row.id)
            .await?
            .ok_or_else(|| {
                ApiError::missing(
                    "no_patch",
                    "the execution ended without a patch; the session log says why",
                )
            }),
    }
}

fn resource(patch: &PatchRow) -> PatchResource {
    PatchResource {
        session_id: patch.session_id.clone(),
        summary: patch.summary.clone(),
        diff: String::from_utf8_lossy(&patch.diff).into_owned(),
        created_at: format_ms(patch.created_at),
    }
}
