//! The retry policy, as a pure function: attempt number, what went wrong (status, retry-after,
//! error type), delay so far → retry after a delay, or give up with a [`ModelError`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ultraplan_protocol::model::{ModelError, ModelErrorKind};

/// Why one attempt failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    /// The provider answered with an error status.
    #[error("HTTP {status} {}: {message}", .error_type.as_deref().unwrap_or("error"))]
    Http {
        status: u16,
        /// Anthropic `error.type`, or OpenAI `error.code` (else `error.type`).
        error_type: Option<String>,
        message: String,
        /// From `retry-after-ms` / `retry-after`.
        retry_after: Option<Duration>,
    },
    /// An `error` event inside a 200 stream.
    #[error("stream error {error_type}: {message}")]
    Stream { error_type: String, message: String },
    /// No complete answer: connect error, timeout, dropped connection, truncated stream.
    #[error("{0}")]
    Transport(String),
    /// The provider's answer could not be understood.
    #[error("malformed response: {0}")]
    Malformed(String),
}

impl Failure {
    /// A transport failure with the error's whole source chain.
    pub(super) fn transport(context: &str, error: &dyn std::error::Error) -> Self {
        let mut message = format!("{context}: {error}");
        let mut source = error.source();
        while let Some(e) = source {
            message.push_str(&format!(": {e}"));
            source = e.source();
        }
        Failure::Transport(message)
    }

    /// The HTTP status, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Failure::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    fn error_type(&self) -> Option<&str> {
        match self {
            Failure::Http { error_type, .. } => error_type.as_deref(),
            Failure::Stream { error_type, .. } => Some(error_type),
            _ => None,
        }
    }

    fn message(&self) -> &str {
        match self {
            Failure::Http { message, .. } | Failure::Stream { message, .. } => message,
            Failure::Transport(message) | Failure::Malformed(message) => message,
        }
    }

    /// The context window was exceeded: Anthropic "prompt is too long", OpenAI
    /// `context_length_exceeded`, or a 413 request too large.
    pub fn is_prompt_too_long(&self) -> bool {
        let message = self.message().to_ascii_lowercase();
        matches!(
            self.error_type(),
            Some("context_length_exceeded" | "request_too_large")
        ) || self.status() == Some(413)
            || message.contains("prompt is too long")
            || message.contains("maximum context length")
    }

    /// Worth another attempt: 429, 5xx (529 included), overloaded, or no complete answer.
    pub fn is_retryable(&self) -> bool {
        const RETRYABLE_TYPES: [&str; 4] = [
            "overloaded_error",
            "rate_limit_error",
            "api_error",
            "server_error",
        ];
        if self.is_prompt_too_long() {
            return false;
        }
        let retryable_type = self
            .error_type()
            .is_some_and(|t| RETRYABLE_TYPES.contains(&t));
        match self {
            Failure::Http { status, .. } => *status == 429 || *status >= 500 || retryable_type,
            Failure::Stream { .. } => retryable_type,
            Failure::Transport(_) | Failure::Malformed(_) => true,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Retry(Duration),
    GiveUp(ModelError),
}

/// Bounded exponential backoff with jitter. Honours `retry-after` when the provider sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Backoff before the second attempt (doubled each time, then jittered).
    pub base_delay: Duration,
    /// Largest backoff between two attempts (a provider's `retry-after` may exceed it).
    pub max_delay: Duration,
    /// Largest sum of delays for one request; past it the gateway gives up.
    pub max_total_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_total_delay: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// Decide after failed attempt `attempt` (1-based), having waited `waited` so far.
    /// `jitter` is a number in `[0, 1)`.
    pub fn decide(
        &self,
        attempt: u32,
        failure: &Failure,
        waited: Duration,
        jitter: f64,
    ) -> Decision {
        if failure.is_prompt_too_long() {
            return give_up(ModelErrorKind::PromptTooLong, failure.to_string());
        }
        if !failure.is_retryable() {
            return give_up(
                ModelErrorKind::InvalidRequest,
                format!("request refused: {failure}"),
            );
        }
        if attempt >= self.max_attempts {
            let message = format!("gave up after {attempt} attempts; last error: {failure}");
            return give_up(ModelErrorKind::Unavailable, message);
        }
        let delay = failure
            .retry_after()
            .unwrap_or_else(|| self.backoff(attempt, jitter));
        if waited.saturating_add(delay) > self.max_total_delay {
            let message = format!(
                "gave up after {attempt} attempts: waiting {} ms more would exceed the retry \
                 budget of {} ms; last error: {failure}",
                delay.as_millis(),
                self.max_total_delay.as_millis()
            );
            return give_up(ModelErrorKind::Unavailable, message);
        }
        Decision::Retry(delay)
    }

    /// "Equal jitter": half the capped exponential delay, plus a random part of the other half.
    pub fn backoff(&self, attempt: u32, jitter: f64) -> Duration {
        let exponent = attempt.saturating_sub(1).min(20);
        let full = self
            .base_delay
            .saturating_mul(1 << exponent)
            .min(self.max_delay);
        let half = full / 2;
        half + half.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

fn give_up(kind: ModelErrorKind, message: String) -> Decision {
    Decision::GiveUp(ModelError { kind, message })
}

/// A number in `[0, 1)` from the clock, mixed (splitmix64). Enough to spread retries.
pub(super) fn clock_jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, error_type: Option<&str>, message: &str) -> Failure {
        Failure::Http {
            status,
            error_type: error_type.map(str::to_owned),
            message: message.to_owned(),
            retry_after: None,
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            max_total_delay: Duration::from_secs(10),
        }
    }

    #[derive(Debug)]
    enum Want {
        Retry,
        Fail(ModelErrorKind),
    }

    #[test]
    fn classifies_failures() {
        let stream = |t: &str| Failure::Stream {
            error_type: t.into(),
            message: "m".into(),
        };
        let cases = [
            (
                http(429, Some("rate_limit_error"), "slow down"),
                Want::Retry,
            ),
            (
                http(529, Some("overloaded_error"), "Overloaded"),
                Want::Retry,
            ),
            (http(500, Some("api_error"), "oops"), Want::Retry),
            (http(502, None, "bad gateway"), Want::Retry),
            (http(503, Some("server_error"), "busy"), Want::Retry),
            (
                http(400, Some("overloaded_error"), "odd but overloaded"),
                Want::Retry,
            ),
            (
                http(400, Some("invalid_request_error"), "bad"),
                Want::Fail(ModelErrorKind::InvalidRequest),
            ),
            (
                http(401, Some("authentication_error"), "key"),
                Want::Fail(ModelErrorKind::InvalidRequest),
            ),
            (
                http(404, Some("not_found_error"), "model"),
                Want::Fail(ModelErrorKind::InvalidRequest),
            ),
            (
                http(
                    400,
                    Some("invalid_request_error"),
                    "prompt is too long: 208310 tokens > 200000 maximum",
                ),
                Want::Fail(ModelErrorKind::PromptTooLong),
            ),
            (
                http(400, Some("context_length_exceeded"), "too many"),
                Want::Fail(ModelErrorKind::PromptTooLong),
            ),
            (
                http(413, Some("request_too_large"), "big"),
                Want::Fail(ModelErrorKind::PromptTooLong),
            ),
            (stream("overloaded_error"), Want::Retry),
            (
                stream("invalid_request_error"),
                Want::Fail(ModelErrorKind::InvalidRequest),
            ),
            (Failure::Transport("reset".into()), Want::Retry),
            (Failure::Malformed("junk".into()), Want::Retry),
        ];
        for (failure, want) in cases {
            let got = policy().decide(1, &failure, Duration::ZERO, 0.5);
            match (&got, &want) {
                (Decision::Retry(_), Want::Retry) => {}
                (Decision::GiveUp(e), Want::Fail(kind)) if e.kind == *kind => {}
                _ => panic!("{failure:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn refusals_keep_the_provider_message() {
        let failure = http(
            400,
            Some("invalid_request_error"),
            "max_tokens: must be at most 64000",
        );
        let Decision::GiveUp(error) = policy().decide(1, &failure, Duration::ZERO, 0.0) else {
            panic!("must give up")
        };
        assert!(
            error.message.contains("max_tokens: must be at most 64000"),
            "{}",
            error.message
        );
    }

    #[test]
    fn attempts_and_total_delay_are_bounded() {
        let overloaded = http(529, Some("overloaded_error"), "Overloaded");
        let cases = [
            (4, Duration::ZERO, true),
            (5, Duration::ZERO, false),
            (1, Duration::from_millis(9_990), false),
        ];
        for (attempt, waited, retries) in cases {
            let got = policy().decide(attempt, &overloaded, waited, 0.5);
            assert_eq!(
                matches!(got, Decision::Retry(_)),
                retries,
                "{attempt} {waited:?}: {got:?}"
            );
            if let Decision::GiveUp(e) = got {
                assert_eq!(e.kind, ModelErrorKind::Unavailable);
                assert!(e.message.contains("Overloaded"), "{}", e.message);
            }
        }
    }

    #[test]
    fn honours_retry_after() {
        let mut failure = http(429, Some("rate_limit_error"), "later");
        if let Failure::Http { retry_after, .. } = &mut failure {
            *retry_after = Some(Duration::from_secs(7));
        }
        let got = policy().decide(1, &failure, Duration::ZERO, 0.9);
        assert_eq!(got, Decision::Retry(Duration::from_secs(7)));
        let got = policy().decide(1, &failure, Duration::from_secs(4), 0.9);
        assert!(matches!(got, Decision::GiveUp(ref e) if e.kind == ModelErrorKind::Unavailable));
    }

    #[test]
    fn backoff_doubles_within_jitter_bounds_and_caps() {
        let p = policy();
        let cases = [
            (1, 50, 100),
            (2, 100, 200),
            (3, 200, 400),
            (4, 400, 800),
            (5, 500, 1000),
            (30, 500, 1000),
        ];
        for (attempt, low, high) in cases {
            assert_eq!(
                p.backoff(attempt, 0.0),
                Duration::from_millis(low),
                "attempt {attempt}"
            );
            assert_eq!(
                p.backoff(attempt, 1.0),
                Duration::from_millis(high),
                "attempt {attempt}"
            );
        }
    }

    #[test]
    fn clock_jitter_is_a_unit_fraction() {
        for _ in 0..100 {
            let j = clock_jitter();
            assert!((0.0..1.0).contains(&j), "{j}");
        }
    }
}
