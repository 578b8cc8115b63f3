//! Limits and settings of the server's parts, each with its default from
//! [`defaults`](super::defaults): request rates, request deadlines, upload slots, retention.

use std::time::Duration;

use super::defaults;

/// How fast one identity (or one client address) may call the server.
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

/// The limits for writes and reads of an authenticated user, and for requests that do not
/// authenticate (per client address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub writes: RateLimit,
    pub reads: RateLimit,
    pub anonymous: RateLimit,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            writes: RateLimit::per_second(defaults::RATE_LIMIT),
            reads: RateLimit::per_second(defaults::READ_RATE_LIMIT),
            anonymous: RateLimit::per_second(defaults::ANON_RATE_LIMIT),
        }
    }
}

/// Timeouts and bounds on requests as they arrive: headers, bodies and upload slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLimits {
    /// A connection must send a request's headers within this time (idle keep-alive
    /// connections are closed after it too).
    pub header_timeout: Duration,
    /// Deadline and minimum rate of every request body.
    pub body: BodyDeadline,
    /// Concurrent bundle uploads.
    pub uploads: UploadSlots,
}

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            header_timeout: Duration::from_secs(defaults::HEADER_TIMEOUT_SECS),
            body: BodyDeadline::default(),
            uploads: UploadSlots::default(),
        }
    }
}

/// How long a request body may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyDeadline {
    /// The whole body must have arrived by then.
    pub total: Duration,
    /// After `grace`, the average rate since the headers arrived must stay at or above this
    /// (0 turns the rate check off).
    pub min_bytes_per_second: u64,
    pub grace: Duration,
}

impl Default for BodyDeadline {
    fn default() -> Self {
        BodyDeadline {
            total: Duration::from_secs(defaults::BODY_TIMEOUT_SECS),
            min_bytes_per_second: defaults::BODY_MIN_RATE,
            grace: Duration::from_secs(defaults::BODY_GRACE_SECS),
        }
    }
}

/// How many uploads may run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UploadSlots {
    /// Per user.
    pub per_user: usize,
    /// On the whole server.
    pub global: usize,
    /// How long an upload waits for a global slot before 503.
    pub wait: Duration,
}

impl Default for UploadSlots {
    fn default() -> Self {
        UploadSlots {
            per_user: defaults::UPLOADS_PER_USER,
            global: defaults::MAX_UPLOADS,
            wait: Duration::from_secs(defaults::UPLOAD_WAIT_SECS),
        }
    }
}

/// Retention and quota settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionConfig {
    /// How long a bundle that no session uses is kept after its upload.
    pub bundle_grace: Duration,
    /// How often the retention pass runs (zero: never).
    pub interval: Duration,
    /// Most bytes of bundles (archive plus unpacked tree) one user may hold (0: no limit).
    pub bundle_quota_bytes: u64,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            bundle_grace: Duration::from_secs(defaults::BUNDLE_GRACE_SECS),
            interval: Duration::from_secs(defaults::RETENTION_INTERVAL_SECS),
            bundle_quota_bytes: defaults::BUNDLE_QUOTA_BYTES,
        }
    }
}
