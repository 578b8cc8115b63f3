//! HTTP details both providers share: error bodies, `retry-after`, content types.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::Value;

use super::retry::Failure;

/// Longest provider message kept in an error.
const MAX_MESSAGE_CHARS: usize = 2000;

/// The failure for a non-success response, with the provider's own message.
pub(super) async fn failure_from_response(response: reqwest::Response) -> Failure {
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let reason = response.status().canonical_reason().unwrap_or("error");
    let body = match response.bytes().await {
        Ok(body) => body,
        Err(e) => return Failure::transport(&format!("HTTP {status}, body unreadable"), &e),
    };
    let (error_type, message) = parse_error_body(&body, reason);
    Failure::Http {
        status,
        error_type,
        message,
        retry_after,
    }
}

/// `(type, message)` of an Anthropic `{type:"error", error:{type, message}}` or OpenAI
/// `{error:{message, type, code}}` body; else the body text, or the status reason.
pub(super) fn parse_error_body(body: &[u8], reason: &str) -> (Option<String>, String) {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let error = json.as_ref().and_then(|j| j.get("error"));
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let error_type = field("code").or_else(|| field("type"));
    let message = field("message").unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body).trim().to_owned();
        if text.is_empty() {
            reason.to_owned()
        } else {
            text
        }
    });
    (error_type, truncate(&message))
}

/// An in-stream error event's `(type, message)`.
pub(super) fn stream_error(data: &Value) -> Failure {
    let error = data.get("error").unwrap_or(data);
    let text = |name: &str| error.get(name).and_then(Value::as_str).map(str::to_owned);
    Failure::Stream {
        error_type: text("code")
            .or_else(|| text("type"))
            .unwrap_or_else(|| "error".to_owned()),
        message: truncate(&text("message").unwrap_or_else(|| data.to_string())),
    }
}

fn truncate(message: &str) -> String {
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        return message.to_owned();
    }
    let mut cut: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
    cut.push('…');
    cut
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds. HTTP dates are ignored.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    let from_secs = |secs: f64| Duration::try_from_secs_f64(secs).ok();
    header("retry-after-ms")
        .and_then(|ms| from_secs(ms / 1000.0))
        .or_else(|| header("retry-after").and_then(from_secs))
}

/// Whether a success response is JSON (a provider that ignored `stream: true`).
pub(super) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// The whole body of a JSON success response.
pub(super) async fn json_body(response: reqwest::Response) -> Result<bytes::Bytes, Failure> {
    response
        .bytes()
        .await
        .map_err(|e| Failure::transport("response body interrupted", &e))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn parses_both_error_shapes() {
        let cases: [(&str, Option<&str>, &str); 6] = [
            (
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"r"}"#,
                Some("overloaded_error"),
                "Overloaded",
            ),
            (
                r#"{"error":{"message":"too long","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}"#,
                Some("context_length_exceeded"),
                "too long",
            ),
            (
                r#"{"error":{"message":"busy","type":"server_error","param":null,"code":null}}"#,
                Some("server_error"),
                "busy",
            ),
            ("upstream connect error", None, "upstream connect error"),
            ("", None, "Bad Gateway"),
            (r#"{"detail":"x"}"#, None, r#"{"detail":"x"}"#),
        ];
        for (body, kind, message) in cases {
            let (got_kind, got_message) = parse_error_body(body.as_bytes(), "Bad Gateway");
            assert_eq!(
                (got_kind.as_deref(), got_message.as_str()),
                (kind, message),
                "{body}"
            );
        }
    }

    #[test]
    fn reads_retry_after_headers() {
        let cases = [
            (vec![("retry-after", "3")], Some(Duration::from_secs(3))),
            (
                vec![("retry-after", "0.5")],
                Some(Duration::from_millis(500)),
            ),
            (
                vec![("retry-after-ms", "250"), ("retry-after", "9")],
                Some(Duration::from_millis(250)),
            ),
            (vec![("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], None),
            (vec![("retry-after", "-1")], None),
            (vec![], None),
        ];
        for (pairs, want) in cases {
            let mut headers = HeaderMap::new();
            for (name, value) in &pairs {
                headers.insert(*name, HeaderValue::from_static(value));
            }
            assert_eq!(retry_after(&headers), want, "{pairs:?}");
        }
    }

    #[test]
    fn long_messages_are_truncated() {
        let long = "x".repeat(MAX_MESSAGE_CHARS + 10);
        let (_, message) = parse_error_body(long.as_bytes(), "r");
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
    }
}
