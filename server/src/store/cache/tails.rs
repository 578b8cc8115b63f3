//! The newest events this process appended to each session, so a poller that is a few events
//! behind reads them from memory instead of the database (docs/ARCHITECTURE.md §5).
//!
//! A tail only ever holds consecutive ids, each event exactly as the database gives it back.
//! It answers only when it ends at the session's newest id as the remembered row says, so an
//! append it never saw (another process's, or one made while the row was being read) sends the
//! poll to the database instead. Memory is bounded per session and in total.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use ultraplan_protocol::events::{Event, EventBody};

/// Events one session's tail keeps at most.
pub const MAX_EVENTS: usize = 32;
/// Bytes (of the events' JSON) one session's tail keeps at most.
pub const MAX_BYTES: usize = 64 * 1024;
/// Bytes all tails keep together at most; past it other sessions' tails are dropped.
pub const MAX_TOTAL_BYTES: usize = 16 * 1024 * 1024;

/// One session's newest events, ids consecutive.
#[derive(Debug, Default)]
struct Tail {
    events: VecDeque<(Event, usize)>,
    bytes: usize,
}

impl Tail {
    fn last_id(&self) -> Option<i64> {
        self.events.back().map(|(e, _)| e.id)
    }

    fn first_id(&self) -> Option<i64> {
        self.events.front().map(|(e, _)| e.id)
    }
}

#[derive(Debug, Default)]
struct State {
    tails: HashMap<String, Tail>,
    bytes: usize,
}

/// Every session's tail, under one lock never held across an await.
#[derive(Debug, Default)]
pub struct Tails {
    state: Mutex<State>,
}

impl Tails {
    /// Remember events just appended to `session_id` (ids consecutive, as the store returned
    /// them). They extend the tail when they follow it, else they start it over.
    pub fn push(&self, session_id: &str, stored: &[Event]) {
        let Some(first) = stored.first() else {
            return;
        };
        let Some(sized) = as_read_back(stored) else {
            self.forget(session_id);
            return;
        };
        let mut state = self.lock();
        let mut tail = state.tails.remove(session_id).unwrap_or_default();
        let mut freed = 0;
        if tail.last_id() != Some(first.id - 1) {
            freed += tail.bytes;
            tail = Tail::default();
        }
        let added: usize = sized.iter().map(|(_, n)| n).sum();
        tail.bytes += added;
        tail.events.extend(sized);
        while tail.events.len() > MAX_EVENTS || tail.bytes > MAX_BYTES {
            let Some((_, n)) = tail.events.pop_front() else {
                break;
            };
            tail.bytes -= n;
            freed += n;
        }
        state.bytes = state.bytes + added - freed;
        if state.bytes > MAX_TOTAL_BYTES {
            shrink(&mut state, MAX_TOTAL_BYTES);
        }
        if !tail.events.is_empty() {
            state.tails.insert(session_id.to_owned(), tail);
        }
    }

    /// The events after `after_id` up to `last_id`, the session's newest, when the tail holds
    /// every one of them and they are at most `limit`.
    pub fn after(
        &self,
        session_id: &str,
        after_id: i64,
        last_id: i64,
        limit: u32,
    ) -> Option<Vec<Event>> {
        if after_id >= last_id || last_id - after_id > i64::from(limit) {
            return None;
        }
        let state = self.lock();
        let tail = state.tails.get(session_id)?;
        if tail.last_id() != Some(last_id) || tail.first_id()? > after_id + 1 {
            return None;
        }
        let events = tail.events.iter().map(|(e, _)| e);
        Some(events.filter(|e| e.id > after_id).cloned().collect())
    }

    /// Drop one session's tail.
    pub fn forget(&self, session_id: &str) {
        let mut state = self.lock();
        if let Some(tail) = state.tails.remove(session_id) {
            state.bytes -= tail.bytes;
        }
    }

    /// Bytes held by every tail together.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Drop tails until all hold at most `budget` bytes together (the one being pushed is out of
/// the map meanwhile, so it stays).
fn shrink(state: &mut State, budget: usize) {
    let mut bytes = state.bytes;
    state.tails.retain(|_, tail| {
        if bytes <= budget {
            return true;
        }
        bytes -= tail.bytes;
        false
    });
    state.bytes = bytes;
}

/// Each event as a read from the database gives it back (its body through JSON, as stored),
/// with the size of that JSON; `None` when a body does not survive the trip.
fn as_read_back(stored: &[Event]) -> Option<Vec<(Event, usize)>> {
    stored
        .iter()
        .map(|event| {
            let json = serde_json::to_string(&event.body).ok()?;
            let body: EventBody = serde_json::from_str(&json).ok()?;
            let size = json.len() + event.session_id.len() + event.created_at.len();
            let event = Event {
                id: event.id,
                session_id: event.session_id.clone(),
                created_at: event.created_at.clone(),
                body,
            };
            Some((event, size))
        })
        .collect()
}

#[cfg(test)]
#[path = "tails_tests.rs"]
mod tests;
