//! The maps behind [`CachedStore`](super::CachedStore): session rows by id, and verified
//! tokens for a few seconds. Plain data under one lock each, never held across an await.
//!
//! A row read from the database is only remembered when no write to any session happened
//! while it was being read (the write counter did not move), so a slow read can never put back
//! a row that a concurrent write already replaced.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::store::{PlanRow, SessionRow, TokenRow};

/// Session rows kept at most; past it the map starts over (a refill costs one read each).
pub const MAX_SESSIONS: usize = 50_000;
/// Verified tokens kept at most.
pub const MAX_TOKENS: usize = 10_000;
/// How long a token row is trusted without asking the database again: a token deleted from
/// the database stops working within this time.
pub const TOKEN_TTL: Duration = Duration::from_secs(5);

/// What is remembered of one session: its row, and its plans once read.
#[derive(Debug, Clone)]
struct Entry {
    row: SessionRow,
    plans: Option<Vec<PlanRow>>,
}

/// Session rows (and their plans) by id.
#[derive(Debug, Default)]
pub struct Sessions {
    rows: Mutex<HashMap<String, Entry>>,
    /// Bumped by every write that touches a session.
    writes: AtomicU64,
}

impl Sessions {
    /// The remembered row.
    pub fn get(&self, id: &str) -> Option<SessionRow> {
        self.lock().get(id).map(|e| e.row.clone())
    }

    /// The remembered plans of a remembered session.
    pub fn plans(&self, id: &str) -> Option<Vec<PlanRow>> {
        self.lock().get(id).and_then(|e| e.plans.clone())
    }

    /// The write counter, to pass to [`Sessions::fill`] after a read.
    pub fn ticket(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    /// Remember `row`, read with `ticket`, unless a write happened since.
    pub fn fill(&self, ticket: u64, row: &SessionRow) {
        let mut rows = self.lock();
        if self.writes.load(Ordering::Acquire) != ticket {
            return;
        }
        if rows.len() >= MAX_SESSIONS && !rows.contains_key(&row.id) {
            rows.clear();
        }
        let plans = rows.remove(&row.id).and_then(|e| e.plans);
        let entry = Entry {
            row: row.clone(),
            plans,
        };
        rows.insert(row.id.clone(), entry);
    }

    /// Remember the plans of session `id`, read with `ticket`, if its row is remembered and no
    /// write happened since.
    pub fn fill_plans(&self, ticket: u64, id: &str, plans: &[PlanRow]) {
        let mut rows = self.lock();
        if self.writes.load(Ordering::Acquire) != ticket {
            return;
        }
        if let Some(entry) = rows.get_mut(id) {
            entry.plans = Some(plans.to_vec());
        }
    }

    /// A write to `id` is about to happen or has happened: forget its row, and keep reads that
    /// started before from filling it back.
    pub fn invalidate(&self, id: &str) {
        let mut rows = self.lock();
        self.writes.fetch_add(1, Ordering::AcqRel);
        rows.remove(id);
    }

    /// A write to `id` whose effect on the row `change` can apply: the remembered row is
    /// changed in place when `change` says it could, else forgotten; either way reads that
    /// started before cannot fill it.
    pub fn change(&self, id: &str, change: impl FnOnce(&mut SessionRow) -> bool) {
        let mut rows = self.lock();
        self.writes.fetch_add(1, Ordering::AcqRel);
        if !rows.get_mut(id).is_some_and(|e| change(&mut e.row)) {
            rows.remove(id);
        }
    }

    /// Forget every row (announcements from other processes may have been missed).
    pub fn clear(&self) {
        let mut rows = self.lock();
        self.writes.fetch_add(1, Ordering::AcqRel);
        rows.clear();
    }

    /// Rows remembered.
    pub(super) fn count(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Token rows by token id, each for [`TOKEN_TTL`].
#[derive(Debug, Default)]
pub struct Tokens {
    rows: Mutex<HashMap<String, (TokenRow, Instant)>>,
}

impl Tokens {
    /// The row, if it was read less than [`TOKEN_TTL`] before `now`.
    pub fn get(&self, token_id: &str, now: Instant) -> Option<TokenRow> {
        let rows = self.lock();
        let (row, at) = rows.get(token_id)?;
        (now.duration_since(*at) < TOKEN_TTL).then(|| row.clone())
    }

    /// Remember a row read at `now`; expired rows go first when the map is full.
    pub fn fill(&self, row: &TokenRow, now: Instant) {
        let mut rows = self.lock();
        if rows.len() >= MAX_TOKENS {
            rows.retain(|_, (_, at)| now.duration_since(*at) < TOKEN_TTL);
        }
        if rows.len() >= MAX_TOKENS {
            rows.clear();
        }
        rows.insert(row.token_id.clone(), (row.clone(), now));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (TokenRow, Instant)>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
#[path = "memo_tests.rs"]
pub(super) mod tests;
