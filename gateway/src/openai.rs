//! OpenAI-compatible Chat Completions: the translated request (`POST {base}/chat/completions`,
//! `stream: true`, `stream_options.include_usage`) and reading the answer.

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use ultraplan_protocol::model::{ModelError, ModelErrorKind, ModelRequest, ModelResponse};

use super::http::{is_json, json_body};
use super::openai_stream::{OpenAiStream, parse_completion};
use super::openai_translate::{TokenLimitField, to_chat_request};
use super::retry::Failure;
use super::sse::read_stream;
use crate::Secret;

/// Default API base; the path `/chat/completions` is appended.
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The exact bytes sent for `model`. OpenAI itself gets `max_completion_tokens`; other
/// (compatible) servers get the widely supported `max_tokens`.
pub(super) fn body(
    request: &ModelRequest,
    model: &str,
    base_url: &str,
) -> Result<Vec<u8>, ModelError> {
    let limit = if base_url.trim_end_matches('/') == DEFAULT_OPENAI_BASE_URL {
        TokenLimitField::MaxCompletionTokens
    } else {
        TokenLimitField::MaxTokens
    };
    serde_json::to_vec(&to_chat_request(request, model, limit)).map_err(|e| ModelError {
        kind: ModelErrorKind::InvalidRequest,
        message: format!("model request cannot be encoded: {e}"),
    })
}

/// `{base}/chat/completions`.
pub(super) fn endpoint(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

/// `Authorization: Bearer` (sensitive) when a key is set: local compatible servers need none.
pub(super) fn headers(key: Option<&Secret>) -> Result<HeaderMap, ModelError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = key {
        let mut value =
            HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| ModelError {
                kind: ModelErrorKind::InvalidRequest,
                message: "OPENAI_API_KEY holds characters not allowed in an HTTP header".to_owned(),
            })?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
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
        return parse_completion(&json_body(response).await?);
    }
    read_stream(response, OpenAiStream::default(), idle).await
}
