//! Rate limits per API token: token buckets for each bearer credential presented, refilled
//! continuously, one for writes (POST, PUT, PATCH, DELETE: sessions, uploads, decisions) and a
//! far larger one for reads (polls are cheap, and one token may poll thousands of sessions).
//! A request over its limit gets 429 `rate_limited` with `Retry-After`, before any handler or
//! database work runs.
//!
//! Buckets are keyed by a hash of the whole credential, so nobody can drain another user's
//! bucket without their token. Requests without a bearer token (pages, health, metrics) are
//! not limited here. Idle buckets are dropped once the map grows past [`MAX_BUCKETS`], which
//! bounds memory under a flood of made-up tokens.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, RETRY_AFTER};
use axum::http::{HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::state::AppState;

/// Buckets kept before idle ones are dropped.
pub const MAX_BUCKETS: usize = 10_000;

/// How fast each token may call the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Sustained requests per second; 0 turns limiting off.
    pub per_second: u32,
    /// Requests that may come at once after a quiet spell.
    pub burst: u32,
}

impl RateLimit {
    /// `per_second` with a burst of ten seconds' worth.
    pub fn per_second(per_second: u32) -> Self {
        RateLimit {
            per_second,
            burst: per_second.saturating_mul(10),
        }
    }
}

/// The limits for writes and for reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub writes: RateLimit,
    pub reads: RateLimit,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            writes: RateLimit::per_second(20),
            reads: RateLimit::per_second(2000),
        }
    }
}

/// One credential's bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    fn full(limit: RateLimit, now: Instant) -> Self {
        Bucket {
            tokens: f64::from(limit.burst.max(1)),
            updated: now,
        }
    }

    /// Refill for the time passed, then take one request or say how long until one fits.
    fn take(&mut self, limit: RateLimit, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(limit.per_second);
        let burst = f64::from(limit.burst.max(1));
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
    }

    fn is_full(&self, limit: RateLimit, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens + elapsed * f64::from(limit.per_second) >= f64::from(limit.burst.max(1))
    }
}

/// The buckets of every credential seen.
#[derive(Debug)]
pub struct RateLimiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<[u8; 32], Bucket>>,
}

impl RateLimiter {
    pub fn new(limit: RateLimit) -> Self {
        RateLimiter {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take one request for `credential` at `now`; `Err(retry_after)` when over the limit.
    pub fn check(&self, credential: &[u8], now: Instant) -> Result<(), Duration> {
        if self.limit.per_second == 0 {
            return Ok(());
        }
        let key: [u8; 32] = Sha256::digest(credential).into();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&key) {
            let limit = self.limit;
            buckets.retain(|_, b| !b.is_full(limit, now));
        }
        buckets
            .entry(key)
            .or_insert_with(|| Bucket::full(self.limit, now))
            .take(self.limit, now)
    }

    /// Buckets held (for tests and metrics).
    pub fn len(&self) -> usize {
        self.buckets.lock().map_or(0, |b| b.len())
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The write and read buckets.
#[derive(Debug)]
pub struct Limiters {
    pub writes: RateLimiter,
    pub reads: RateLimiter,
}

impl Limiters {
    pub fn new(limits: RateLimits) -> Self {
        Limiters {
            writes: RateLimiter::new(limits.writes),
            reads: RateLimiter::new(limits.reads),
        }
    }

    /// The limiter for requests of this method.
    pub fn for_method(&self, method: &Method) -> &RateLimiter {
        if method.is_safe() {
            &self.reads
        } else {
            &self.writes
        }
    }
}

/// Middleware: limit requests that carry a bearer token.
pub async fn limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limiter = state.rate_limiters.for_method(request.method());
    let verdict = request
        .headers()
        .get(AUTHORIZATION)
        .map(|value| limiter.check(value.as_bytes(), Instant::now()));
    match verdict {
        Some(Err(retry_after)) => too_many(retry_after),
        _ => next.run(request).await,
    }
}

fn too_many(retry_after: Duration) -> Response {
    let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
    let mut response = ApiError::TooManyRequests(format!(
        "too many requests for this token; retry in {seconds} s"
    ))
    .into_response();
    if let Ok(value) = HeaderValue::from_str(&seconds.max(1).to_string()) {
        response.headers_mut().insert(RETRY_AFTER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_allow_a_burst_then_the_sustained_rate() {
        let limit = RateLimit {
            per_second: 10,
            burst: 3,
        };
        let limiter = RateLimiter::new(limit);
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // (at, credential, allowed)
        let steps = [
            (0, "a", true),
            (0, "a", true),
            (0, "a", true),
            (0, "a", false),
            (0, "b", true),
            (50, "a", false),
            (100, "a", true),
            (100, "a", false),
            (10_000, "a", true),
            (10_000, "a", true),
            (10_000, "a", true),
            (10_000, "a", false),
        ];
        for (i, (at, who, allowed)) in steps.into_iter().enumerate() {
            let got = limiter.check(who.as_bytes(), ms(at));
            assert_eq!(got.is_ok(), allowed, "step {i}: {got:?}");
            if let Err(wait) = got {
                assert!(wait > Duration::ZERO && wait <= Duration::from_millis(100));
            }
        }
    }

    #[test]
    fn zero_turns_limiting_off() {
        let limiter = RateLimiter::new(RateLimit {
            per_second: 0,
            burst: 1,
        });
        let now = Instant::now();
        assert!((0..1000).all(|_| limiter.check(b"x", now).is_ok()));
        assert!(limiter.is_empty());
    }

    #[test]
    fn idle_buckets_make_room_under_a_flood_of_new_tokens() {
        let limiter = RateLimiter::new(RateLimit {
            per_second: 1000,
            burst: 2,
        });
        let t0 = Instant::now();
        for i in 0..MAX_BUCKETS {
            assert!(limiter.check(format!("t{i}").as_bytes(), t0).is_ok());
        }
        assert_eq!(limiter.len(), MAX_BUCKETS);
        // A second later every bucket has refilled: the next new token sweeps them.
        let later = t0 + Duration::from_secs(1);
        assert!(limiter.check(b"new", later).is_ok());
        assert_eq!(limiter.len(), 1);
    }
}
