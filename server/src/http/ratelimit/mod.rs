//! Request limits: rates, upload slots and body deadlines.
//!
//! Rates are token buckets refilled continuously, one for writes (POST, PUT, PATCH, DELETE:
//! sessions, uploads, decisions) and a far larger one for reads (polls are cheap, and one user
//! may poll thousands of sessions). Buckets are keyed on the authenticated identity (the user
//! a verified token or browser session belongs to), so no spelling of a header changes the
//! bucket. Requests that do not authenticate (unknown tokens, login forms, login links) share a
//! bucket per client address ([`client`]). A request over its limit gets 429 `rate_limited`
//! with `Retry-After`, before any handler work runs.
//!
//! Uploads also hold a slot ([`uploads`]): a few per user, and a global number that bounds
//! the blocking threads uploads can hold. Every request body has a total deadline and a
//! minimum transfer rate ([`body`]).
//!
//! Idle buckets are dropped once a map grows past [`MAX_BUCKETS`], and the least recently
//! used one after that, which bounds memory under a flood of new addresses.

pub mod body;
pub mod client;
mod identity;
pub mod uploads;

pub use body::deadline;
pub use client::ClientAddr;
pub use identity::limit;
pub use uploads::{UploadGate, UploadPermit};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

pub use crate::config::{BodyDeadline, RateLimit, RateLimits, RequestLimits, UploadSlots};
use crate::http::error::ApiError;

/// Buckets kept before idle ones are dropped.
pub const MAX_BUCKETS: usize = 10_000;

/// One key's bucket.
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

/// The buckets of every key seen.
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

    /// Take one request for `key` at `now`; `Err(retry_after)` when over the limit.
    pub fn check(&self, key: &[u8], now: Instant) -> Result<(), Duration> {
        if self.limit.per_second == 0 {
            return Ok(());
        }
        let key: [u8; 32] = Sha256::digest(key).into();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&key) {
            make_room(&mut buckets, self.limit, now);
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

/// Drop every bucket that has refilled (its key is as good as new); if none has, drop the
/// least recently used one, so the map never grows past [`MAX_BUCKETS`].
fn make_room(buckets: &mut HashMap<[u8; 32], Bucket>, limit: RateLimit, now: Instant) {
    buckets.retain(|_, b| !b.is_full(limit, now));
    if buckets.len() < MAX_BUCKETS {
        return;
    }
    let oldest = buckets
        .iter()
        .min_by_key(|(_, b)| b.updated)
        .map(|(key, _)| *key);
    if let Some(key) = oldest {
        buckets.remove(&key);
    }
}

/// The buckets of the server, and its upload slots.
#[derive(Debug)]
pub struct Limiters {
    pub writes: RateLimiter,
    pub reads: RateLimiter,
    /// Requests that do not authenticate, per client address.
    pub anonymous: RateLimiter,
    pub uploads: Arc<UploadGate>,
}

impl Limiters {
    pub fn new(limits: RateLimits, slots: UploadSlots) -> Self {
        Limiters {
            writes: RateLimiter::new(limits.writes),
            reads: RateLimiter::new(limits.reads),
            anonymous: RateLimiter::new(limits.anonymous),
            uploads: Arc::new(UploadGate::new(slots)),
        }
    }

    /// The limiter for an authenticated request of this method.
    pub fn for_method(&self, method: &Method) -> &RateLimiter {
        if method.is_safe() {
            &self.reads
        } else {
            &self.writes
        }
    }

    /// Take one request of a user (the key is the user id).
    pub fn check_user(&self, method: &Method, user_id: &str) -> Result<(), Duration> {
        let key = format!("user:{user_id}");
        self.for_method(method)
            .check(key.as_bytes(), Instant::now())
    }

    /// Take one request of a runner of the fleet (the key is its name, apart from users').
    pub fn check_runner(&self, method: &Method, name: &str) -> Result<(), Duration> {
        let key = format!("runner:{name}");
        self.for_method(method)
            .check(key.as_bytes(), Instant::now())
    }

    /// Take one request that did not authenticate, from `client`.
    pub fn check_anonymous(&self, client: ClientAddr) -> Result<(), Duration> {
        self.anonymous.check(&client.key(), Instant::now())
    }
}

/// Whole seconds to wait, at least one.
pub fn retry_seconds(retry_after: Duration) -> u64 {
    (retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).max(1)
}

/// Add `Retry-After` to a response.
pub fn with_retry_after(mut response: Response, retry_after: Duration) -> Response {
    if let Ok(value) = HeaderValue::from_str(&retry_seconds(retry_after).to_string()) {
        response.headers_mut().insert(RETRY_AFTER, value);
    }
    response
}

/// The API's 429 `rate_limited` with `Retry-After`.
pub fn too_many(retry_after: Duration) -> Response {
    let seconds = retry_seconds(retry_after);
    let response = ApiError::TooManyRequests(format!("too many requests; retry in {seconds} s"))
        .into_response();
    with_retry_after(response, retry_after)
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

    #[test]
    fn a_flood_of_busy_keys_never_grows_the_map_past_its_bound() {
        let limiter = RateLimiter::new(RateLimit {
            per_second: 1,
            burst: 2,
        });
        let t0 = Instant::now();
        for i in 0..MAX_BUCKETS + 50 {
            let at = t0 + Duration::from_micros(i as u64);
            assert!(limiter.check(format!("k{i}").as_bytes(), at).is_ok());
        }
        assert_eq!(limiter.len(), MAX_BUCKETS);
        // The newest keys kept their (drained) buckets; the oldest were dropped.
        let late = t0 + Duration::from_micros((MAX_BUCKETS + 50) as u64);
        let last = format!("k{}", MAX_BUCKETS + 49);
        assert!(limiter.check(last.as_bytes(), late).is_ok());
        assert!(limiter.check(last.as_bytes(), late).is_err());
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let cases = [(0, 1), (1, 1), (999, 1), (1000, 1), (1001, 2), (2500, 3)];
        for (ms, want) in cases {
            assert_eq!(retry_seconds(Duration::from_millis(ms)), want, "{ms} ms");
        }
    }
}
