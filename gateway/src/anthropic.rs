//! Anthropic Messages: the request as sent (`POST {base}/v1/messages`, `stream: true`, cache
//! breakpoints) and reading the answer.

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use ultraplan_protocol::model::{ModelError, ModelErrorKind, ModelRequest, ModelResponse};

use super::anthropic_stream::{AnthropicStream, parse_message};
use super::cache::apply_cache_breakpoints;
use super::http::{is_json, json_body};
use super::retry::Failure;
use super::sse::read_stream;
use crate::Secret;

/// The API version every request names.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Default API origin; the path `/v1/messages` is appended.
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";

#[derive(Serialize)]
struct StreamingBody<'a> {
    #[serde(flatten)]
    request: &'a ModelRequest,
    stream: bool,
}

/// The exact bytes sent: the request with cache breakpoints and `stream: true`.
pub(super) fn body(request: ModelRequest) -> Result<Vec<u8>, ModelError> {
    let request = apply_cache_breakpoints(request);
    serde_json::to_vec(&StreamingBody {
        request: &request,
        stream: true,
    })
    .map_err(|e| ModelError {
        kind: ModelErrorKind::InvalidRequest,
        message: format!("model request cannot be encoded: {e}"),
    })
}

/// `{base}/v1/messages`.
pub(super) fn endpoint(base_url: &str) -> String {
    format!("{}/v1/messages", base_url.trim_end_matches('/'))
}

/// `x-api-key` (marked sensitive), `anthropic-version`, JSON in, SSE out.
pub(super) fn headers(key: Option<&Secret>) -> Result<HeaderMap, ModelError> {
    let Some(key) = key else {
        return Err(ModelError {
            kind: ModelErrorKind::InvalidRequest,
            message: "ANTHROPIC_API_KEY is not set on the server".to_owned(),
        });
    };
    let mut key = HeaderValue::from_str(key.expose()).map_err(|_| ModelError {
        kind: ModelErrorKind::InvalidRequest,
        message: "ANTHROPIC_API_KEY holds characters not allowed in an HTTP header".to_owned(),
    })?;
    key.set_sensitive(true);
    let mut headers = HeaderMap::new();
    headers.insert(HeaderName::from_static("x-api-key"), key);
    headers.insert(
        HeaderName::from_static("anthropic-version"),
        HeaderValue::from_static(ANTHROPIC_VERSION),
    );
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    Ok(headers)
}

/// Assemble a 2xx answer: SSE normally, JSON when the server did not stream.
pub(super) async fn read(
    response: reqwest::Response,
    idle: std::time::Duration,
) -> Result<ModelResponse, Failure> {
    if is_json(response.headers()) {
        return parse_message(&json_body(response).await?);
    }
    read_stream(response, AnthropicStream::default(), idle).await
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use ultraplan_protocol::events::{ContentBlock, Role};
    use ultraplan_protocol::model::{Message, SystemBlock};

    use super::*;

    #[test]
    fn body_keeps_request_order_and_adds_stream_and_cache() {
        let request = ModelRequest {
            model: Some("claude-x".into()),
            max_tokens: 64,
            system: vec![SystemBlock::text("sys")],
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentBlock::text("hi")],
            }],
            tools: vec![],
            temperature: None,
        };
        let bytes = body(request.clone()).unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with(r#"{"model":"claude-x","max_tokens":64,"system":"#),
            "{text}"
        );
        assert!(text.ends_with(r#","stream":true}"#), "{text}");
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            value["messages"][0]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(body(request).unwrap(), bytes, "deterministic bytes");
    }

    #[test]
    fn headers_need_a_key_and_mark_it_sensitive() {
        let missing = headers(None).unwrap_err();
        assert_eq!(missing.kind, ModelErrorKind::InvalidRequest);
        let bad = headers(Some(&Secret::new("bad\nkey"))).unwrap_err();
        assert!(!bad.message.contains("bad"), "{}", bad.message);
        let good = headers(Some(&Secret::new("sk-ant-1"))).unwrap();
        assert!(good["x-api-key"].is_sensitive());
        assert_eq!(good["anthropic-version"], ANTHROPIC_VERSION);
    }

    #[test]
    fn endpoint_joins_without_double_slashes() {
        for base in ["http://h:1", "http://h:1/"] {
            assert_eq!(endpoint(base), "http://h:1/v1/messages");
        }
    }
}
