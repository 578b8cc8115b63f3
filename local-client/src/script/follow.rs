//! Paging a session's events with the session resource beside them: one request when the
//! server includes the session in the page, two otherwise. Events at or below the cursor are
//! dropped, so a server that repeats itself cannot make a timeline print twice; transient
//! failures (no answer, 5xx, 429) are retried a few times in a row, as the poller does.

use std::time::Duration;

use ultraplan_protocol::constants::MAX_TRANSIENT_POLL_FAILURES;
use ultraplan_protocol::events::Event;
use ultraplan_protocol::session::SessionResource;

use crate::api::{ApiError, Client};

/// One step of a follow.
#[derive(Debug, Clone)]
pub struct Page {
    /// New events, oldest first.
    pub events: Vec<Event>,
    /// More events wait: ask again at once (no session was read).
    pub more: bool,
    /// The session after these events (absent while `more`).
    pub session: Option<SessionResource>,
}

/// A cursor over one session's events.
#[derive(Debug)]
pub struct Follow<'a> {
    client: &'a Client,
    id: String,
    cursor: i64,
}

impl<'a> Follow<'a> {
    /// From the start of the session's log.
    pub fn new(client: &'a Client, id: &str) -> Self {
        Self {
            client,
            id: id.to_owned(),
            cursor: 0,
        }
    }

    /// The session followed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The id of the last event seen (0 before any).
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// The next page; `wait` long-polls the server until an event arrives.
    pub async fn next(&mut self, wait: Option<Duration>) -> Result<Page, ApiError> {
        let page = self.client.events(&self.id, self.cursor, wait).await?;
        let cursor = self.cursor;
        let events: Vec<Event> = page.data.into_iter().filter(|e| e.id > cursor).collect();
        self.cursor = events.iter().map(|e| e.id).max().unwrap_or(cursor);
        let more = page.has_more && !events.is_empty();
        let session = match (more, page.session) {
            (true, _) => None,
            (false, Some(session)) => Some(*session),
            (false, None) => Some(self.client.session(&self.id).await?),
        };
        Ok(Page {
            events,
            more,
            session,
        })
    }

    /// [`Follow::next`], retrying transient failures up to the poller's limit in a row, with
    /// `pause` between tries.
    pub async fn next_patiently(
        &mut self,
        wait: Option<Duration>,
        pause: Duration,
    ) -> Result<Page, ApiError> {
        let mut failures = 0;
        loop {
            match self.next(wait).await {
                Ok(page) => return Ok(page),
                Err(e) if e.is_transient() && failures + 1 < MAX_TRANSIENT_POLL_FAILURES => {
                    failures += 1;
                    tracing::warn!(failures, error = %e, "transient failure, retrying");
                    tokio::time::sleep(pause).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}
