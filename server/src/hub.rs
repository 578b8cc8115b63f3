//! Wakes long-polling readers when a session's log grows. One watch channel per session that
//! has waiters; entries are dropped once nobody listens, so idle sessions cost nothing here.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use tokio::sync::watch;

/// Per-session "newest event id" notifications.
#[derive(Debug, Default)]
pub struct EventHub {
    channels: Mutex<Channels>,
}

#[derive(Debug, Default)]
struct Channels {
    by_session: HashMap<String, watch::Sender<i64>>,
    /// When a client last polled each session's events.
    last_poll: HashMap<String, Instant>,
    /// Size at which abandoned channels are next swept (amortised O(1) per subscribe).
    sweep_at: usize,
}

impl EventHub {
    /// Listen for appends to a session. Subscribe before reading the log so that an append
    /// between the read and the wait is not missed.
    pub fn subscribe(&self, session_id: &str) -> watch::Receiver<i64> {
        let mut channels = self.lock();
        if channels.by_session.len() >= channels.sweep_at {
            channels.by_session.retain(|_, s| s.receiver_count() > 0);
            channels.sweep_at = channels.by_session.len() * 2 + 64;
        }
        channels
            .by_session
            .entry(session_id.to_owned())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Tell waiters that the session's log now ends at `last_id`.
    pub fn notify(&self, session_id: &str, last_id: i64) {
        let mut channels = self.lock();
        if let Some(sender) = channels.by_session.get(session_id) {
            sender.send_replace(last_id);
            if sender.receiver_count() == 0 {
                channels.by_session.remove(session_id);
            }
        }
    }

    /// Note that a client polled the session's events now.
    /// Wake every waiting reader: changes may have been missed.
    pub fn notify_all(&self) {
        let channels = self.lock();
        for sender in channels.by_session.values() {
            sender.send_modify(|_| {});
        }
    }

    pub fn record_poll(&self, session_id: &str) {
        let mut channels = self.lock();
        match channels.last_poll.get_mut(session_id) {
            Some(at) => *at = Instant::now(),
            None => {
                channels
                    .last_poll
                    .insert(session_id.to_owned(), Instant::now());
            }
        }
    }

    /// When a client last polled the session's events, if since start-up.
    pub fn last_poll(&self, session_id: &str) -> Option<Instant> {
        self.lock().last_poll.get(session_id).copied()
    }

    /// Forget a session (archived).
    pub fn forget(&self, session_id: &str) {
        self.lock().last_poll.remove(session_id);
    }

    /// Sessions with a channel right now (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock().by_session.len()
    }

    /// Whether no session has a channel.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Channels> {
        // A poisoned map only means a panic elsewhere mid-insert; the map itself is still valid.
        self.channels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notify_wakes_subscribers_and_forgets_idle_sessions() {
        let hub = EventHub::default();
        let mut rx = hub.subscribe("s1");
        hub.notify("s1", 5);
        rx.changed().await.expect("woken");
        assert_eq!(*rx.borrow(), 5);
        drop(rx);
        hub.notify("s1", 6);
        assert!(hub.is_empty());
        hub.notify("never-subscribed", 1);
        assert!(hub.is_empty());
    }
}
