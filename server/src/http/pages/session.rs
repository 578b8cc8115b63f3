//! `GET /sessions/{id}`: the review page, and what the live stream re-renders.

use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::auth::WebUser;
use super::changes::{self, ChangesView};
use super::digest::Digest;
use super::error::{PageError, PageResult};
use super::notice::Notice;
use super::templates::{
    ChangesRegion, EntryFragment, HeadRegion, Layout, ReviewRegion, SessionPage, SideRegion, render,
};
use super::timeline::Entry;
use super::view::{SessionInput, SessionView, session_view};
use crate::http::state::AppState;
use crate::store::{PlanRow, SessionRow, now_ms};

/// Teleport is offered while the launching terminal polled this recently.
pub const TELEPORT_WINDOW: Duration = Duration::from_secs(15);

/// A part of the page the stream may replace, with a key that changes with its content.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Region {
    pub key: String,
    pub html: String,
}

/// The replaceable parts of the session page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regions {
    pub head: Region,
    pub changes: Region,
    pub review: Region,
    pub side: Region,
}

fn region(html: String) -> Region {
    let key = hex::encode(Sha256::digest(html.as_bytes()))[..16].to_owned();
    Region { key, html }
}

/// Render the replaceable parts of a view.
pub fn regions(v: &SessionView) -> Result<Regions, askama::Error> {
    Ok(Regions {
        head: region(HeadRegion { v }.render()?),
        changes: region(ChangesRegion { v }.render()?),
        review: region(ReviewRegion { v }.render()?),
        side: region(SideRegion { v }.render()?),
    })
}

/// The user's session, or 404 (also for another user's session).
pub async fn owned(state: &AppState, user: &WebUser, id: &str) -> PageResult<SessionRow> {
    state
        .core
        .store
        .session_for_user(&user.id, id)
        .await?
        .ok_or(PageError::NotFound)
}

/// Whether the launching terminal still polls the session.
pub fn terminal_polling(state: &AppState, session_id: &str) -> bool {
    state
        .core
        .hub
        .last_poll(session_id)
        .is_some_and(|at| at.elapsed() < TELEPORT_WINDOW)
}

/// Whether the session's agent has gone quiet.
pub fn stalled(state: &AppState, session_id: &str) -> bool {
    state.agents.stalled(session_id)
}

/// What the page shows of a session's plans, log and execution.
pub struct Loaded<'a> {
    pub row: &'a SessionRow,
    pub plans: &'a [PlanRow],
    pub digest: &'a Digest,
    pub changes: Option<Arc<ChangesView>>,
    /// The owner's `timeout_seconds` flag.
    pub timeout_seconds: Option<u64>,
}

/// The view of a session from its row, plans, digested log and execution.
pub fn build_view(
    state: &AppState,
    loaded: Loaded<'_>,
    csrf: &str,
    notice: Option<Notice>,
) -> SessionView {
    let Loaded {
        row,
        plans,
        digest,
        changes,
        timeout_seconds,
    } = loaded;
    session_view(&SessionInput {
        row,
        plans,
        digest,
        now_ms: now_ms(),
        terminal_polling: terminal_polling(state, &row.id),
        stalled: stalled(state, &row.id),
        csrf,
        notice,
        changes,
        timeout_seconds,
    })
}

/// Render each Task call's subagent entries into it.
pub fn finish_timeline(mut entries: Vec<Entry>) -> Result<Vec<Entry>, askama::Error> {
    for entry in &mut entries {
        for child in &entry.children {
            entry
                .kids_html
                .push_str(&EntryFragment { e: child }.render()?);
        }
    }
    Ok(entries)
}

/// Query of the page: the notice code a form post left.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    pub notice: Option<String>,
}

/// `GET /sessions/{id}`.
pub async fn page(
    State(state): State<AppState>,
    user: WebUser,
    Path(id): Path<String>,
    Query(query): Query<PageQuery>,
) -> PageResult<Response> {
    let row = owned(&state, &user, &id).await?;
    let events = state.core.events_after(&row.id, 0).await?;
    let mut digest = Digest::with_tree();
    for event in &events {
        digest.ingest(event);
    }
    let plans = state.core.store.list_plans(&row.id).await?;
    let notice = query.notice.as_deref().and_then(Notice::parse);
    let changes = changes::load(&state, &row).await?.map(Arc::new);
    let flags = crate::flags::for_user(&state.core, &user.id).await?;
    let loaded = Loaded {
        row: &row,
        plans: &plans,
        digest: &digest,
        changes,
        timeout_seconds: Some(flags.timeout_seconds),
    };
    let mut v = build_view(&state, loaded, &user.csrf, notice);
    super::evidence::link(&state, &row, &digest.reads, &mut v).await;
    super::comments::attach(&state, &row, &mut v).await?;
    super::environments::attach(&state, &row, &mut v).await?;
    let page = SessionPage {
        layout: Layout::for_user(&v.title, &user),
        regions: regions(&v)?,
        timeline: finish_timeline(digest.into_entries())?,
        v,
    };
    Ok(render(StatusCode::OK, &page))
}
