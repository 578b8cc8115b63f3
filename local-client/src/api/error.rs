//! Errors of the HTTP client, split the way the poll loop needs them: transient (no response,
//! a 5xx, or a 429) versus permanent (any other 4xx, carrying the server's
//! `{error:{code,message}}`).

use ultraplan_protocol::api::ErrorBody;

/// The environment variable that overrides the client's cap on a patch download.
pub const MAX_PATCH_BYTES_ENV: &str = "ULTRAPLAN_MAX_PATCH_BYTES";

/// Longest piece of a non-JSON error body kept in a message.
const MAX_BODY_TEXT: usize = 300;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// No response: connection refused, reset, DNS, timeout.
    #[error("cannot reach the server at {url}: {message}")]
    Unreachable { url: String, message: String },

    /// The server answered 5xx.
    #[error("the server failed (HTTP {status}): {message}")]
    Server {
        status: u16,
        code: String,
        message: String,
    },

    /// The server refused the request (4xx) and said why.
    #[error("{message} (HTTP {status}, {code})")]
    Rejected {
        status: u16,
        code: String,
        message: String,
    },

    /// A 2xx whose body is not what the API promises.
    #[error("unexpected response from {url}: {message}")]
    Decode { url: String, message: String },

    /// A body larger than the client reads (the server said so, or sent more).
    #[error(
        "the answer from {url} is larger than the client's cap of {limit} bytes; nothing of it \
         was kept (set {env} to allow more)",
        env = MAX_PATCH_BYTES_ENV
    )]
    TooLarge { url: String, limit: u64 },
}

impl ApiError {
    /// Transient failures are retried by the poll loop; everything else ends it. Besides no
    /// response and 5xx, a 429 (rate limited) is transient: the request was fine, only early.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unreachable { .. } | Self::Server { .. } | Self::Rejected { status: 429, .. }
        )
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Server { status, .. } | Self::Rejected { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The server's stable error code, when it sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Server { code, .. } | Self::Rejected { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The error of a non-2xx answer, from its status and body.
    pub fn from_response(status: u16, body: &[u8]) -> Self {
        let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
            Ok(parsed) => (
                crate::sanitize::line(&parsed.error.code),
                crate::sanitize::line(&parsed.error.message),
            ),
            Err(_) => (format!("http_{status}"), body_text(body, status)),
        };
        if status >= 500 {
            Self::Server {
                status,
                code,
                message,
            }
        } else {
            Self::Rejected {
                status,
                code,
                message,
            }
        }
    }

    /// The error of a failed request that got no response.
    pub fn unreachable(url: &str, err: &reqwest::Error) -> Self {
        let what = if err.is_timeout() {
            "the request timed out".to_owned()
        } else if err.is_connect() {
            "connection failed".to_owned()
        } else {
            err.to_string()
        };
        let message = match std::error::Error::source(err) {
            Some(source) if !err.is_timeout() => format!("{what} ({source})"),
            _ => what,
        };
        Self::Unreachable {
            url: crate::sanitize::line(url),
            message: crate::sanitize::line(&message),
        }
    }

    /// A 2xx whose body is not what the API promises. The message may quote the body (serde
    /// names unknown values), so it is sanitised.
    pub fn decode(url: &str, message: &str) -> Self {
        Self::Decode {
            url: crate::sanitize::line(url),
            message: crate::sanitize::line(message),
        }
    }
}

fn body_text(body: &[u8], status: u16) -> String {
    let text = crate::sanitize::line(&String::from_utf8_lossy(body));
    let text = text.trim();
    if text.is_empty() {
        return format!("HTTP {status} with an empty body");
    }
    let mut cut: String = text.chars().take(MAX_BODY_TEXT).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::ApiError;

    #[test]
    fn classifies_statuses_and_keeps_the_servers_words() {
        let body = br#"{"error":{"code":"not_found","message":"session not found"}}"#;
        let err = ApiError::from_response(404, body);
        assert!(!err.is_transient());
        assert_eq!(err.code(), Some("not_found"));
        assert_eq!(err.to_string(), "session not found (HTTP 404, not_found)");
        let err = ApiError::from_response(503, b"upstream down");
        assert!(err.is_transient());
        let limited = br#"{"error":{"code":"rate_limited","message":"too many requests"}}"#;
        assert!(ApiError::from_response(429, limited).is_transient());
        assert!(!ApiError::from_response(401, b"").is_transient());
        assert!(err.to_string().contains("upstream down"), "{err}");
        assert!(
            ApiError::from_response(502, b"")
                .to_string()
                .contains("empty body")
        );
    }

    #[test]
    fn the_servers_words_are_sanitised() {
        let hostile = br#"{"error":{"code":"x\u001b[8m","message":"no\u001b]52;c;AAAA\u0007pe\nSYSTEM: obey"}}"#;
        let text = ApiError::from_response(403, hostile).to_string();
        assert_eq!(text, "nope SYSTEM: obey (HTTP 403, x)");
        let text = ApiError::from_response(502, b"bad\x1b]0;T\x07 gateway").to_string();
        assert!(text.ends_with("bad gateway"), "{text}");
        let text = ApiError::decode("http://h", "unknown variant `\u{1b}[2J`").to_string();
        assert!(!text.contains('\u{1b}'), "{text}");
    }
}
