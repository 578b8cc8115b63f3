//! `/v1/sessions/{id}/events`: page the log (with long-poll) and post user messages.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use tokio::time::Instant;
use ultraplan_protocol::api::{EventsPage, PostEventsRequest, PostEventsResponse};
use ultraplan_protocol::constants::{MAX_EVENTS_PAGE, MAX_EVENTS_WAIT_SECS};
use ultraplan_protocol::events::Event;
use ultraplan_protocol::session::SessionStatus;

use super::extract::{ApiJson, ApiQuery};
use super::sessions::owned_session;
use crate::auth::AuthUser;
use crate::http::error::{ApiError, ApiResult};
use crate::http::state::AppState;
use crate::sessions;
use crate::store::SessionRow;

/// Query of `GET /v1/sessions/{id}/events`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct EventsQuery {
    /// Only events with a larger id (default 0: from the start).
    pub after_id: Option<i64>,
    /// At most this many events (default and max 100).
    pub limit: Option<u32>,
    /// Hold the request up to this many seconds (max 25) until an event arrives.
    pub wait: Option<u64>,
    /// `session`: the page also carries the session resource as of its events, so a poller
    /// needs one request instead of two.
    pub include: Option<String>,
}

/// A page of events, with the session as it stands now when asked for (read after the
/// events: status changes are written before the events they cause, so it is never older). An
/// empty page answered at once carries `just_read`, the session as read for this request.
async fn page(
    state: &AppState,
    (id, just_read): (&str, Option<&SessionRow>),
    with_session: bool,
    data: Vec<Event>,
    has_more: bool,
) -> ApiResult<EventsPage> {
    let session = match (with_session, just_read.filter(|_| data.is_empty())) {
        (false, _) => None,
        (true, Some(row)) => Some(row.clone()),
        (true, None) => state.core.store.session(id).await?,
    };
    Ok(EventsPage {
        first_id: data.first().map(|e| e.id),
        last_id: data.last().map(|e| e.id),
        data,
        has_more,
        session: session.map(|row| Box::new(sessions::resource(&state.core, &state.agents, &row))),
    })
}

/// Page through a session's events; with `wait`, hold the request until one arrives.
#[utoipa::path(get, path = "/v1/sessions/{id}/events", tag = "events",
    params(("id" = String, Path, description = "Session id"), EventsQuery),
    responses((status = 200, body = EventsPage), (status = 404, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> ApiResult<Json<EventsPage>> {
    let row = owned_session(&state, &user, &id).await?;
    let after_id = q.after_id.unwrap_or(0).max(0);
    let limit = q.limit.unwrap_or(MAX_EVENTS_PAGE).clamp(1, MAX_EVENTS_PAGE);
    let wait = Duration::from_secs(q.wait.unwrap_or(0).min(MAX_EVENTS_WAIT_SECS));
    let with_session = match q.include.as_deref() {
        None | Some("") => false,
        Some("session") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                format!("include={other}: the only value is `session`"),
            ));
        }
    };
    state.core.hub.record_poll(&id);
    if wait.is_zero() {
        // The terminal's poll: answered at once (from memory when nothing is new).
        let (events, has_more) = state.core.store.list_events(&id, after_id, limit).await?;
        let at_once = (id.as_str(), Some(&row));
        return Ok(Json(
            page(&state, at_once, with_session, events, has_more).await?,
        ));
    }
    let mut wake = state.core.hub.subscribe(&id);
    let deadline = Instant::now() + wait;
    loop {
        let (events, has_more) = state.core.store.list_events(&id, after_id, limit).await?;
        let give_up = row.status == SessionStatus::Archived || Instant::now() >= deadline;
        if !events.is_empty() || give_up {
            return Ok(Json(
                page(&state, (&id, None), with_session, events, has_more).await?,
            ));
        }
        tokio::select! {
            changed = wake.changed() => {
                if changed.is_err() {
                    return Ok(Json(page(&state, (&id, None), with_session, Vec::new(), false).await?));
                }
            }
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Post user messages: answer the agent's question or steer it.
#[utoipa::path(post, path = "/v1/sessions/{id}/events", tag = "events",
    params(("id" = String, Path, description = "Session id")),
    request_body = PostEventsRequest,
    responses((status = 200, body = PostEventsResponse),
        (status = 400, body = ultraplan_protocol::api::ErrorBody),
        (status = 409, body = ultraplan_protocol::api::ErrorBody)),
    security(("bearer" = [])))]
pub async fn post(
    State(state): State<AppState>,
    user: AuthUser,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<PostEventsRequest>,
) -> ApiResult<Json<PostEventsResponse>> {
    let row = owned_session(&state, &user, &id).await?;
    let data = sessions::post_events(&state.core, &state.agents, &row, &req.events).await?;
    Ok(Json(PostEventsResponse { data }))
}
