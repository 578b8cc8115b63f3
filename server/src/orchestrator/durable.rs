//! Store writes an agent's session must not lose to a database that is briefly away (restarted,
//! failing over): a write that could not get a connection is tried again, with backoff, for a
//! while. Only writes that reached no database are retried, so none is ever applied twice.

use std::future::Future;
use std::time::Duration;

use crate::store::StoreResult;

/// How long a write keeps trying while no connection can be had.
const RETRY_FOR: Duration = Duration::from_secs(300);
const FIRST_DELAY: Duration = Duration::from_millis(200);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// The delay after `delay`: doubled, capped.
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(MAX_DELAY)
}

/// Run `write` until it succeeds, fails for another reason than an unreachable database, or
/// [`RETRY_FOR`] has passed.
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
            Err(error) if error.nothing_sent() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(session_id, what, %error, delay_ms = delay.as_millis() as u64,
                    "database unavailable; retrying the write");
                tokio::time::sleep(delay).await;
                delay = next_delay(delay);
            }
            outcome => return outcome,
        }
    }
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

    #[tokio::test(start_paused = true)]
    async fn only_writes_that_reached_no_database_are_retried() {
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
