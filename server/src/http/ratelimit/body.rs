//! Request bodies must arrive in time: a total deadline, and after a grace period an average
//! rate of at least `min_bytes_per_second`. A body that falls behind fails its reader (the
//! JSON extractor, the bundle validator) with [`BodyTimeout`], and the [`deadline`] middleware
//! answers 408 `upload_too_slow` or `body_deadline` instead of whatever the handler made of
//! the failed read. Handlers clean up as for any failed read: nothing is left behind.
//!
//! A stalled body is caught by a timer set for the moment its average rate would fall below
//! the minimum, so it needs neither data nor a poll from the client to fail.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::config::BodyDeadline;
use crate::http::error::ApiError;
use crate::http::state::AppState;

/// Why a body was cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyTimeout {
    #[error("the request body arrived slower than {0} bytes per second")]
    TooSlow(u64),
    #[error("the request body did not arrive within {0} s")]
    Deadline(u64),
}

impl BodyTimeout {
    fn code(self) -> u8 {
        match self {
            BodyTimeout::TooSlow(_) => 1,
            BodyTimeout::Deadline(_) => 2,
        }
    }
}

impl BodyDeadline {
    /// The verdict on a body that has delivered `bytes` after `elapsed`: when to look again
    /// (elapsed time at which it fails if nothing more arrives), or why it failed.
    pub fn check(&self, elapsed: Duration, bytes: u64) -> Result<Duration, BodyTimeout> {
        if elapsed >= self.total {
            return Err(BodyTimeout::Deadline(self.total.as_secs()));
        }
        let rate = self.min_bytes_per_second;
        if rate == 0 {
            return Ok(self.total);
        }
        let owed = u128::from(rate) * elapsed.as_millis();
        if elapsed >= self.grace && u128::from(bytes) * 1000 < owed {
            return Err(BodyTimeout::TooSlow(rate));
        }
        // The average falls below `rate` just after bytes / rate seconds.
        let behind = Duration::from_millis(bytes.saturating_mul(1000) / rate + 1);
        Ok(behind.max(self.grace).min(self.total))
    }
}

/// What a [`TimedBody`] tripped on, shared with the middleware that made it.
#[derive(Debug, Default)]
pub struct Tripwire(AtomicU8);

impl Tripwire {
    fn set(&self, why: BodyTimeout) {
        self.0.store(why.code(), Ordering::Relaxed);
    }

    fn get(&self, deadline: &BodyDeadline) -> Option<BodyTimeout> {
        match self.0.load(Ordering::Relaxed) {
            1 => Some(BodyTimeout::TooSlow(deadline.min_bytes_per_second)),
            2 => Some(BodyTimeout::Deadline(deadline.total.as_secs())),
            _ => None,
        }
    }
}

/// A request body held to a [`BodyDeadline`].
pub struct TimedBody {
    inner: Body,
    deadline: BodyDeadline,
    start: Instant,
    bytes: u64,
    timer: Pin<Box<Sleep>>,
    tripwire: Arc<Tripwire>,
    failed: Option<BodyTimeout>,
}

impl TimedBody {
    pub fn new(inner: Body, deadline: BodyDeadline, tripwire: Arc<Tripwire>) -> Self {
        let start = Instant::now();
        TimedBody {
            inner,
            deadline,
            start,
            bytes: 0,
            timer: Box::pin(tokio::time::sleep_until(start + deadline.grace)),
            tripwire,
            failed: None,
        }
    }

    fn fail(&mut self, why: BodyTimeout) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.failed.is_none() {
            tracing::info!(error = %why, bytes = self.bytes, "request body cut off");
        }
        self.failed = Some(why);
        self.tripwire.set(why);
        Poll::Ready(Some(Err(axum::Error::new(why))))
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if let Some(why) = this.failed {
            return this.fail(why);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                this.bytes = this.bytes.saturating_add(len);
                match this.deadline.check(this.start.elapsed(), this.bytes) {
                    Ok(_) => Poll::Ready(Some(Ok(frame))),
                    Err(why) => this.fail(why),
                }
            }
            Poll::Ready(other) => Poll::Ready(other),
            Poll::Pending => loop {
                match this.deadline.check(this.start.elapsed(), this.bytes) {
                    Err(why) => return this.fail(why),
                    Ok(next) => {
                        let at = this.start + next;
                        if this.timer.deadline() != at {
                            this.timer.as_mut().reset(at);
                        }
                        ready!(this.timer.as_mut().poll(cx));
                    }
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Middleware: hold every request body to the configured deadline, and answer 408 when the
/// body was cut off.
pub async fn deadline(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limits = state.core.config.request_limits.body;
    let tripwire = Arc::new(Tripwire::default());
    let wire = Arc::clone(&tripwire);
    let request = request.map(|body| Body::new(TimedBody::new(body, limits, wire)));
    let response = next.run(request).await;
    match tripwire.get(&limits) {
        None => response,
        Some(why) => timeout_response(why),
    }
}

/// 408 with the reason's code; the connection is closed (the rest of the body is unread).
pub fn timeout_response(why: BodyTimeout) -> Response {
    let code = match why {
        BodyTimeout::TooSlow(_) => "upload_too_slow",
        BodyTimeout::Deadline(_) => "body_deadline",
    };
    let mut response = ApiError::Throttled {
        status: StatusCode::REQUEST_TIMEOUT,
        code,
        message: why.to_string(),
        retry_after: None,
    }
    .into_response();
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_must_keep_up_after_the_grace_period() {
        let deadline = BodyDeadline {
            total: Duration::from_secs(60),
            min_bytes_per_second: 100,
            grace: Duration::from_secs(5),
        };
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // (elapsed, bytes, Ok(next check) or Err(reason))
        let cases = [
            (s(0), 0, Ok(s(5))),
            (s(4), 0, Ok(s(5))),
            (s(5), 0, Err(BodyTimeout::TooSlow(100))),
            (s(5), 499, Err(BodyTimeout::TooSlow(100))),
            (s(5), 500, Ok(ms(5001))),
            (s(10), 2000, Ok(ms(20_001))),
            (s(30), 1_000_000, Ok(s(60))),
            (s(60), 1_000_000, Err(BodyTimeout::Deadline(60))),
        ];
        for (elapsed, bytes, want) in cases {
            assert_eq!(deadline.check(elapsed, bytes), want, "{elapsed:?} {bytes}");
        }
        let no_rate = BodyDeadline {
            min_bytes_per_second: 0,
            ..deadline
        };
        assert_eq!(no_rate.check(s(50), 0), Ok(s(60)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_fails_without_any_data() {
        use http_body_util::BodyExt;
        let deadline = BodyDeadline {
            total: Duration::from_secs(60),
            min_bytes_per_second: 10,
            grace: Duration::from_secs(2),
        };
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
        let stream = tokio_stream_from(rx);
        let wire = Arc::new(Tripwire::default());
        let mut body = TimedBody::new(Body::new(stream), deadline, Arc::clone(&wire));
        tx.send(Ok(Frame::data(Bytes::from_static(b"0123456789abcdefghij"))))
            .await
            .expect("send");
        let first = body.frame().await.expect("frame").expect("data");
        assert_eq!(first.into_data().expect("data").len(), 20);
        // 20 bytes cover two seconds at 10 B/s; then nothing more comes.
        let failed = body.frame().await.expect("frame");
        assert!(failed.is_err());
        assert_eq!(wire.get(&deadline), Some(BodyTimeout::TooSlow(10)));
        assert!(Instant::now() - body.start >= Duration::from_secs(2));
        drop(tx);
    }

    /// A body fed from a channel.
    fn tokio_stream_from(
        rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>,
    ) -> http_body_util::StreamBody<
        futures_util::stream::BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>,
    > {
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        http_body_util::StreamBody::new(Box::pin(stream))
    }
}
