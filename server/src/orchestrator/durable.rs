//! Store writes an agent's session must not lose to a database that is briefly away (restarted,
//! failing over) or full: a write that certainly did not happen is tried again, with backoff,
//! for a while. Only such writes are retried, so none is ever applied twice.

use std::future::Future;
use std::time::Duration;

use ultraplan_protocol::events::{Event, EventBody};

use crate::core::Core;
use crate::store::{Author, Lease, SessionRow, StoreResult};

/// How long a write keeps trying while no connection can be had.
const RETRY_FOR: Duration = Duration::from_secs(300);
const FIRST_DELAY: Duration = Duration::from_millis(200);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// The delay after `delay`: doubled, capped.
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(MAX_DELAY)
}

/// Run `write` until it succeeds, fails in a way that may have applied it (or for another
/// reason than an unreachable or full database), or [`RETRY_FOR`] has passed.
pub(crate) async fn write<T, F, Fut>(
    session_id: &str,
    what: &'static str,
    mut op: F,
) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    let mut delay = FIRST_DELAY;
    loop {
        match op().await {
            Err(error) if error.not_applied() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(session_id, what, %error, delay_ms = delay.as_millis() as u64,
                    "the write did not happen (database away or full); retrying");
                tokio::time::sleep(delay).await;
                delay = next_delay(delay);
            }
            outcome => return outcome,
        }
    }
}

/// Append events to the session's log as the `lease` holder, like [`write`], and after a failure that may have
/// committed (the connection broke mid-write) look in the log before trying again, so the
/// events end up there exactly once.
pub(crate) async fn append(
    state: &Core,
    session: &SessionRow,
    events: &[EventBody],
    lease: &Lease,
) -> StoreResult<()> {
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    let mut delay = FIRST_DELAY;
    loop {
        let appended = state
            .append_with(session, events, Author::Runner, Some(lease))
            .await;
        let error = match appended {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        let in_doubt = !error.not_applied() && error.is_unavailable();
        if !(error.not_applied() || in_doubt) || tokio::time::Instant::now() >= deadline {
            return Err(error);
        }
        tracing::warn!(session_id = %session.id, %error, in_doubt,
            "an append failed (database away or full); retrying");
        if in_doubt && settle(state, session, events, deadline).await? {
            return Ok(());
        }
        tokio::time::sleep(delay).await;
        delay = next_delay(delay);
    }
}

/// Whether an append in doubt made it into the log (then its side effects run now), asking
/// until the database answers.
async fn settle(
    state: &Core,
    session: &SessionRow,
    events: &[EventBody],
    deadline: tokio::time::Instant,
) -> StoreResult<bool> {
    let mut delay = FIRST_DELAY;
    loop {
        match state.events_after(&session.id, 0).await {
            Ok(log) => {
                let Some(found) = find(&log, events) else {
                    return Ok(false);
                };
                state.after_append(session, found).await;
                return Ok(true);
            }
            Err(error) if error.is_unavailable() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(delay).await;
                delay = next_delay(delay);
            }
            Err(error) => return Err(error),
        }
    }
}

/// The run of stored events whose bodies are `events`, latest first.
fn find<'a>(log: &'a [Event], events: &[EventBody]) -> Option<&'a [Event]> {
    let n = events.len();
    if n == 0 || log.len() < n {
        return None;
    }
    (0..=log.len() - n)
        .rev()
        .map(|start| &log[start..start + n])
        .find(|run| run.iter().map(|e| &e.body).eq(events.iter()))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::store::StoreError;

    #[test]
    fn delays_double_up_to_the_cap() {
        let cases = [(200, 400), (400, 800), (3000, 5000), (5000, 5000)];
        for (from, want) in cases {
            let got = next_delay(Duration::from_millis(from));
            assert_eq!(got, Duration::from_millis(want), "{from}");
        }
    }

    #[test]
    fn finds_the_run_of_events_an_append_in_doubt_stored() {
        let note = |text: &str| {
            EventBody::System(ultraplan_protocol::events::SystemEvent {
                subtype: "note".to_owned(),
                message: Some(text.to_owned()),
                data: serde_json::Value::Null,
            })
        };
        let log: Vec<Event> = ["a", "b", "c"]
            .iter()
            .zip(1..)
            .map(|(text, id)| Event {
                id,
                session_id: "s".to_owned(),
                created_at: String::new(),
                body: note(text),
            })
            .collect();
        let cases: [(&[&str], Option<i64>); 5] = [
            (&["b", "c"], Some(2)),
            (&["a"], Some(1)),
            (&["c", "b"], None),
            (&["d"], None),
            (&[], None),
        ];
        for (texts, want) in cases {
            let events: Vec<EventBody> = texts.iter().map(|t| note(t)).collect();
            let got = find(&log, &events).map(|run| run[0].id);
            assert_eq!(got, want, "{texts:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn only_writes_that_certainly_did_not_happen_are_retried() {
        let cases: [(fn() -> StoreError, usize); 2] = [
            (|| StoreError::Database(sqlx::Error::PoolTimedOut), 3),
            (|| StoreError::Corrupt("x".into()), 1),
        ];
        for (error, want_calls) in cases {
            let calls = AtomicUsize::new(0);
            let outcome = write("s", "test", || {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                async move { if n < 2 { Err(error()) } else { Ok(n) } }
            })
            .await;
            assert_eq!(calls.load(Ordering::SeqCst), want_calls);
            assert_eq!(outcome.is_ok(), want_calls == 3);
        }
    }
}
