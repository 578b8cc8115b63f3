//! `/v1/sessions/{id}/plans/{tool_use_id}/comments`: inline comments on plan passages.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ultraplan_protocol::comments::{NewComment, PlanComment};

use super::extract::ApiJson;
use super::sessions::owned_session;
use crate::auth::AuthUser;
use crate::http::error::ApiResult;
use crate::http::state::AppState;
use crate::sessions;

/// Comment on a passage of a pending plan. The quote must occur verbatim in the plan.
#[utoipa::path(post, path = "/v1/sessions/{id}/plans/{tool_use_id}/comments", tag = "plans",
    params(("id" = String, Path, description = "Session id"),
        ("tool_use_id" = String, Path, description = "The ExitPlanMode tool_use id")),
    request_body = NewComment,
    responses((status = 201, body = PlanComment),
        (status = 400, description = "bad body or quote (`quote_not_in_plan`), or too many comments", body = ultraplan_protocol::api::ErrorBody),
        (status = 404, body = ultraplan_protocol::api::ErrorBody),
        (status = 409, description = "the plan is no longer pending", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    user: AuthUser,
    Path((id, tool_use_id)): Path<(String, String)>,
    ApiJson(new): ApiJson<NewComment>,
) -> ApiResult<(StatusCode, Json<PlanComment>)> {
    let row = owned_session(&state, &user, &id).await?;
    let comment = sessions::add_comment(&state.core, &row, &user.id, &tool_use_id, &new).await?;
    Ok((StatusCode::CREATED, Json(comment)))
}

/// The plan's comments, oldest first, each `open`, `addressed` or `reopened` (carried over to
/// a later revision). The revision after the plan judges them: the agent names the comments it
/// addressed in its ExitPlanMode input `addressed_comment_ids`; those are `addressed` with
/// `addressed_by: agent` and the others stay `open`. When the agent names none at all, every
/// comment is `addressed` with `addressed_by: revision` (only the newer revision vouches).
/// Ids that are no comment of the plan count for nothing.
#[utoipa::path(get, path = "/v1/sessions/{id}/plans/{tool_use_id}/comments", tag = "plans",
    params(("id" = String, Path, description = "Session id"),
        ("tool_use_id" = String, Path, description = "The ExitPlanMode tool_use id")),
    responses((status = 200, body = Vec<PlanComment>),
        (status = 404, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    user: AuthUser,
    Path((id, tool_use_id)): Path<(String, String)>,
) -> ApiResult<Json<Vec<PlanComment>>> {
    let row = owned_session(&state, &user, &id).await?;
    let comments = sessions::list_comments(&state.core, &row, &tool_use_id).await?;
    Ok(Json(comments))
}

/// Reopen a comment of an earlier revision: it is carried over, as a new open comment, to the
/// session's pending plan.
#[utoipa::path(post, path = "/v1/sessions/{id}/plans/{tool_use_id}/comments/{comment_id}/reopen", tag = "plans",
    params(("id" = String, Path, description = "Session id"),
        ("tool_use_id" = String, Path, description = "The plan the comment is on"),
        ("comment_id" = String, Path, description = "The comment")),
    responses((status = 201, body = PlanComment),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 404, body = ultraplan_protocol::api::ErrorBody),
        (status = 409, description = "no plan is pending", body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn reopen(
    State(state): State<AppState>,
    user: AuthUser,
    Path((id, tool_use_id, comment_id)): Path<(String, String, String)>,
) -> ApiResult<(StatusCode, Json<PlanComment>)> {
    let row = owned_session(&state, &user, &id).await?;
    let comment =
        sessions::reopen_comment(&state.core, &row, &user.id, &tool_use_id, &comment_id).await?;
    Ok((StatusCode::CREATED, Json(comment)))
}
