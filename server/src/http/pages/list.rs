//! `GET /`: the user's sessions, and the fragment the page polls to stay live.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::auth::{FeedUser, WebUser};
use super::error::PageResult;
use super::format::{Pill, age, pill, short, thousands};
use super::session::stalled;
use super::templates::{Layout, ListPage, ListRows, render};
use crate::http::state::AppState;
use crate::store::{SessionRow, format_ms, now_ms};

/// How many sessions the list shows.
const LIST_LIMIT: u32 = 100;

/// One row of the sessions list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRow {
    pub id: String,
    pub title: String,
    /// `repo · branch`.
    pub place: String,
    pub pill: Pill,
    pub stalled: bool,
    pub tokens: String,
    pub tokens_long: String,
    pub age: String,
    pub created_iso: String,
}

/// Build the rows: `results` maps session ids to their last `result` subtype.
pub fn list_rows(
    rows: &[SessionRow],
    results: &HashMap<String, String>,
    is_stalled: &dyn Fn(&str) -> bool,
    now_ms: i64,
) -> Vec<ListRow> {
    rows.iter()
        .map(|row| {
            let place = [
                row.context.repo.as_deref(),
                row.context.base.branch.as_deref(),
            ];
            let title = if row.title.trim().is_empty() {
                "Untitled session"
            } else {
                &row.title
            };
            ListRow {
                id: row.id.clone(),
                title: title.to_owned(),
                place: place.into_iter().flatten().collect::<Vec<_>>().join(" · "),
                pill: pill(
                    row.status,
                    row.has_pending_plan,
                    results.get(&row.id).map(String::as_str),
                    row.execution.as_ref().map(|e| e.state),
                ),
                stalled: is_stalled(&row.id),
                tokens: short(row.usage.total()),
                tokens_long: thousands(row.usage.total()),
                age: age(now_ms, row.created_at),
                created_iso: format_ms(row.created_at),
            }
        })
        .collect()
}

async fn load(state: &AppState, user_id: &str) -> PageResult<Vec<ListRow>> {
    let rows = state.core.store.list_sessions(user_id, LIST_LIMIT).await?;
    let results = state.core.store.last_results(user_id).await?;
    Ok(list_rows(
        &rows,
        &results,
        &|id| stalled(state, id),
        now_ms(),
    ))
}

/// `GET /` and `GET /sessions`.
pub async fn index(State(state): State<AppState>, user: WebUser) -> PageResult<Response> {
    let page = ListPage {
        layout: Layout::for_user("Sessions", &user),
        rows: load(&state, &user.id).await?,
    };
    Ok(render(StatusCode::OK, &page))
}

/// `GET /fragments/sessions`: the table rows alone.
pub async fn rows(State(state): State<AppState>, FeedUser(user): FeedUser) -> PageResult<Response> {
    let rows = load(&state, &user.id).await?;
    Ok(render(StatusCode::OK, &ListRows { rows }))
}
