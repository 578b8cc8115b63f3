//! What every part of the server shares: configuration, the store, the event hub that wakes
//! long-polls, and the telemetry counters. The orchestrator and the HTTP layer each hold a
//! [`Core`]; it points at neither of them (docs/ARCHITECTURE.md §2).

use std::sync::Arc;

use ultraplan_protocol::events::{Event, EventBody};

use crate::config::Config;
use crate::hub::EventHub;
use crate::secrets::{KeyFile, Secrets};
use crate::store::{AppendEffects, Author, Lease, SessionRow, Store, StoreResult};
use crate::telemetry::{self, Counters};

/// Cheap to clone: everything is behind `Arc`.
#[derive(Clone)]
pub struct Core {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    pub hub: Arc<EventHub>,
    pub counters: Arc<Counters>,
    /// Rung when a session may have been queued for a runner (another process on the database
    /// changed one, or a session was queued here): wakes every claim loop of this process.
    pub bell: Bell,
    /// The key that seals users' secrets, read from its file on first use.
    pub secrets_key: Arc<KeyFile>,
}

/// Wakes every listener, including those busy when it rang (they see the ring on their next
/// wait): a counter in a watch channel.
#[derive(Clone)]
pub struct Bell(Arc<tokio::sync::watch::Sender<u64>>);

impl Default for Bell {
    fn default() -> Self {
        Bell(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

impl Bell {
    pub fn ring(&self) {
        self.0.send_modify(|rings| *rings = rings.wrapping_add(1));
    }

    /// A listener that has heard every ring so far.
    pub fn listen(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
}

impl Core {
    /// A core over an opened store.
    pub fn new(config: Config, store: Arc<dyn Store>) -> Self {
        let secrets_key = Arc::new(KeyFile::new(config.secrets_key_file.clone()));
        Core {
            config: Arc::new(config),
            store,
            hub: Arc::new(EventHub::default()),
            counters: Arc::new(Counters::default()),
            bell: Bell::default(),
            secrets_key,
        }
    }

    /// The secrets use cases (docs/ARCHITECTURE.md §6.5).
    pub fn environments(&self) -> crate::environments::Environments {
        crate::environments::Environments::new(self.store.clone())
    }

    pub fn secrets(&self) -> Secrets {
        Secrets::new(self.store.clone(), self.secrets_key.clone())
    }

    /// Record a telemetry event (row + counter).
    pub async fn telemetry(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        user_id: Option<&str>,
        session_id: Option<&str>,
    ) {
        telemetry::record(
            self.store.as_ref(),
            &self.counters,
            name,
            labels,
            user_id,
            session_id,
        )
        .await;
    }

    /// Append events to a session's log, wake its pollers and count telemetry.
    pub async fn append(
        &self,
        session: &SessionRow,
        events: &[EventBody],
    ) -> StoreResult<Vec<Event>> {
        self.append_with(session, events, Author::Runner, None)
            .await
    }

    /// [`Core::append`] by `author`; with a `lease`, only while it holds the session (else
    /// [`crate::store::StoreError::Fenced`] and nothing is written).
    pub async fn append_with(
        &self,
        session: &SessionRow,
        events: &[EventBody],
        author: Author,
        lease: Option<&Lease>,
    ) -> StoreResult<Vec<Event>> {
        let effects = AppendEffects {
            author,
            fence: lease.cloned(),
            ..crate::plans::append_effects(events)
        };
        let stored = self
            .store
            .append_events(&session.id, events, &effects)
            .await?;
        self.after_append(session, &stored).await;
        Ok(stored)
    }

    /// Side effects of stored events: wake pollers, count telemetry.
    pub async fn after_append(&self, session: &SessionRow, stored: &[Event]) {
        let Some(last) = stored.last() else {
            return;
        };
        self.hub.notify(&session.id, last.id);
        for event in stored {
            if let Some((name, labels)) = telemetry::for_event(&event.body) {
                let labels: Vec<(&str, &str)> =
                    labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                self.telemetry(name, &labels, Some(&session.user_id), Some(&session.id))
                    .await;
            }
        }
    }

    /// Events with `id > after`, all of them, oldest first.
    pub async fn events_after(&self, session_id: &str, after: i64) -> StoreResult<Vec<Event>> {
        let mut all = Vec::new();
        let mut cursor = after;
        loop {
            let (page, more) = self.store.list_events(session_id, cursor, 100).await?;
            cursor = page.last().map_or(cursor, |e| e.id);
            all.extend(page);
            if !more {
                return Ok(all);
            }
        }
    }
}
