//! `GET /sessions/{id}/stream`: server-sent events that keep the page live. Each `update`
//! carries timeline operations for new log events (rendered HTML) and any page region whose
//! content changed; its `id` is the last event id, so a reconnect resumes with
//! `Last-Event-ID`. Comments keep the connection alive; a stream ends after a while and the
//! browser reconnects, so server shutdowns never wait long on it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::time::Instant;
use ultraplan_protocol::patch::Execution;

use super::auth::FeedUser;
use super::changes::{self, ChangesView};
use super::digest::Digest;
use super::error::PageResult;
use super::session::{Loaded, Region, build_view, owned, regions};
use super::templates::{EntryFragment, ResultFragment};
use super::timeline::{Item, Op, Place};
use crate::http::state::AppState;
use crate::store::SessionRow;

/// How often regions are re-rendered without new events (usage, stall, teleport window).
const TICK: Duration = Duration::from_secs(5);
/// How long one stream lasts before the browser reconnects.
const LIFETIME: Duration = Duration::from_secs(60);
/// Events read per step.
const BATCH: u32 = 100;

/// Query of the stream: where to resume when there is no `Last-Event-ID`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamQuery {
    pub after: Option<i64>,
}

/// One operation as the browser applies it.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct WireOp {
    /// `append` (into a list) or `result` (replace a slot's content).
    pub op: &'static str,
    /// Element id of the target (`timeline`, `kids-<key>`, `res-<key>`).
    pub into: String,
    pub html: String,
}

/// The data of an `update` event.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Update {
    pub ops: Vec<WireOp>,
    pub regions: Vec<(String, Region)>,
    pub last: i64,
}

/// Render timeline operations for the browser.
pub fn wire(ops: &[Op]) -> Result<Vec<WireOp>, askama::Error> {
    ops.iter()
        .map(|op| {
            let html = match &op.item {
                Item::Entry(e) => EntryFragment { e }.render()?,
                Item::Result(r) => ResultFragment { r }.render()?,
            };
            let (kind, into) = match &op.place {
                Place::Root => ("append", "timeline".to_owned()),
                Place::Children(key) => ("append", format!("kids-{key}")),
                Place::Result(key) => ("result", format!("res-{key}")),
            };
            Ok(WireOp {
                op: kind,
                into,
                html,
            })
        })
        .collect()
}

struct Feed {
    state: AppState,
    session_id: String,
    csrf: String,
    digest: Digest,
    wake: watch::Receiver<i64>,
    /// Region keys the browser has.
    keys: Vec<(String, String)>,
    /// The changes panel for the execution it was built from: a stored patch does not
    /// change while the execution stays the same, so it is read and parsed once.
    changes: Option<(Option<Execution>, Option<Arc<ChangesView>>)>,
    ends_at: Instant,
    next_tick: Instant,
    first: bool,
    /// The owner's `timeout_seconds` flag, read once.
    timeout_seconds: Option<u64>,
}

impl Feed {
    async fn start(
        state: AppState,
        session_id: String,
        csrf: String,
        after: i64,
        timeout_seconds: Option<u64>,
    ) -> PageResult<Self> {
        let wake = state.core.hub.subscribe(&session_id);
        let mut digest = Digest::default();
        for event in state.core.events_after(&session_id, 0).await? {
            if event.id > after {
                break;
            }
            digest.ingest(&event);
        }
        digest.last_event_id = after.max(digest.last_event_id);
        let now = Instant::now();
        Ok(Feed {
            state,
            session_id,
            csrf,
            digest,
            wake,
            keys: Vec::new(),
            changes: None,
            ends_at: now + LIFETIME,
            next_tick: now,
            timeout_seconds,
            first: true,
        })
    }

    /// The next update to send; `None` ends the stream.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if Instant::now() >= self.ends_at {
                return None;
            }
            match self.step().await {
                Ok(Some(update)) => return Some(self.event(&update)),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, session_id = %self.session_id, "page stream failed");
                    return None;
                }
            }
            let until = self.next_tick.min(self.ends_at);
            tokio::select! {
                changed = self.wake.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep_until(until).await;
                    }
                }
                () = tokio::time::sleep_until(until) => {}
            }
        }
    }

    async fn step(&mut self) -> PageResult<Option<Update>> {
        let after = self.digest.last_event_id;
        let (events, _) = self
            .state
            .core
            .store
            .list_events(&self.session_id, after, BATCH)
            .await?;
        let due = Instant::now() >= self.next_tick;
        if events.is_empty() && !due && !self.first {
            return Ok(None);
        }
        let mut ops = Vec::new();
        for event in &events {
            ops.extend(self.digest.ingest(event));
        }
        let mut update = Update {
            ops: wire(&ops)?,
            regions: Vec::new(),
            last: self.digest.last_event_id,
        };
        update.regions = self.changed_regions().await?;
        self.next_tick = Instant::now() + TICK;
        self.first = false;
        let empty = update.ops.is_empty() && update.regions.is_empty() && events.is_empty();
        Ok((!empty).then_some(update))
    }

    async fn changed_regions(&mut self) -> PageResult<Vec<(String, Region)>> {
        let Some(row) = self.state.core.store.session(&self.session_id).await? else {
            return Ok(Vec::new());
        };
        let plans = self.state.core.store.list_plans(&row.id).await?;
        let changes = self.changes_of(&row).await?;
        let loaded = Loaded {
            row: &row,
            plans: &plans,
            digest: &self.digest,
            changes,
            timeout_seconds: self.timeout_seconds,
        };
        let mut v = build_view(&self.state, loaded, &self.csrf, None);
        super::evidence::link(&self.state, &row, &self.digest.reads, &mut v).await;
        super::comments::attach(&self.state, &row, &mut v).await?;
        super::environments::attach(&self.state, &row, &mut v).await?;
        let all = regions(&v)?;
        let named = [
            ("head", all.head),
            ("changes", all.changes),
            ("review", all.review),
            ("side", all.side),
        ];
        let mut changed = Vec::new();
        for (name, region) in named {
            let known = self.keys.iter().any(|(n, k)| n == name && *k == region.key);
            if !known {
                self.keys.retain(|(n, _)| n != name);
                self.keys.push((name.to_owned(), region.key.clone()));
                changed.push((name.to_owned(), region));
            }
        }
        Ok(changed)
    }

    async fn changes_of(&mut self, row: &SessionRow) -> PageResult<Option<Arc<ChangesView>>> {
        if let Some((execution, view)) = &self.changes
            && *execution == row.execution
        {
            return Ok(view.clone());
        }
        let view = changes::load(&self.state, row).await?.map(Arc::new);
        self.changes = Some((row.execution.clone(), view.clone()));
        Ok(view)
    }

    fn event(&self, update: &Update) -> SseEvent {
        let data = serde_json::to_string(update).unwrap_or_else(|_| "{}".to_owned());
        SseEvent::default()
            .event("update")
            .id(update.last.to_string())
            .retry(Duration::from_secs(2))
            .data(data)
    }
}

fn last_event_id(headers: &HeaderMap) -> Option<i64> {
    headers
        .get("last-event-id")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `GET /sessions/{id}/stream`.
pub async fn stream(
    State(state): State<AppState>,
    FeedUser(user): FeedUser,
    Path(id): Path<String>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> PageResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let row = owned(&state, &user, &id).await?;
    let after = last_event_id(&headers).or(query.after).unwrap_or(0).max(0);
    let flags = crate::flags::for_user(&state.core, &user.id).await?;
    let feed = Feed::start(state, row.id, user.csrf, after, Some(flags.timeout_seconds)).await?;
    let stream = futures_util::stream::unfold(feed, |mut feed| async move {
        let event = feed.next().await?;
        Some((Ok(event), feed))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
