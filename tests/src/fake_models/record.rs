//! What the fakes were sent: every request, byte for byte, with arrival and completion instants.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::http::HeaderMap;
use bytes::Bytes;
use serde_json::Value;

/// Which wire format a request was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
}

/// Headers that carry credentials; shown as `[redacted]`.
const SECRET_HEADERS: [&str; 3] = ["x-api-key", "authorization", "proxy-authorization"];

/// One request a fake received.
#[derive(Clone)]
pub struct RecordedRequest {
    /// 0-based arrival order at this fake.
    pub seq: usize,
    pub provider: Provider,
    pub method: String,
    pub path: String,
    /// Header names are lower case; values that are not UTF-8 are dropped.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Bytes,
    /// The body as JSON, when it parses.
    pub json: Option<Value>,
    pub received_at: Instant,
    /// When the response (including a streamed body) was finished or cut.
    pub completed_at: Option<Instant>,
}

impl fmt::Debug for RecordedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedRequest")
            .field("seq", &self.seq)
            .field("provider", &self.provider)
            .field("path", &self.path)
            .field("headers", &self.headers_redacted())
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish_non_exhaustive()
    }
}

impl RecordedRequest {
    /// The first value of a header (name is case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Headers with credentials replaced by `[redacted]`: safe to print.
    pub fn headers_redacted(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|(n, v)| {
                let secret = SECRET_HEADERS.iter().any(|s| n.eq_ignore_ascii_case(s));
                let shown = if secret { "[redacted]" } else { v.as_str() };
                (n.clone(), shown.to_owned())
            })
            .collect()
    }

    /// The credential the request carried: `x-api-key`, or the `Authorization: Bearer` token.
    fn credential(&self) -> Option<&str> {
        match self.provider {
            Provider::Anthropic => self.header("x-api-key"),
            Provider::OpenAi => self
                .header("authorization")
                .and_then(|v| v.strip_prefix("Bearer ")),
        }
    }

    /// Whether the request carried exactly this key (without exposing it in a failure message).
    pub fn has_api_key(&self, expected: &str) -> bool {
        self.credential() == Some(expected)
    }

    /// Whether the request carried any credential at all.
    pub fn has_any_api_key(&self) -> bool {
        self.credential().is_some_and(|k| !k.is_empty())
    }

    /// The body as text (lossy).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `model` of the body.
    pub fn model(&self) -> Option<&str> {
        self.json.as_ref()?.get("model")?.as_str()
    }

    /// Whether the body asked for `stream: true`.
    pub fn is_stream(&self) -> bool {
        self.json
            .as_ref()
            .and_then(|j| j.get("stream"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// `messages` of the body (empty when absent).
    pub fn messages(&self) -> &[Value] {
        self.json
            .as_ref()
            .and_then(|j| j.get("messages"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Names of the tools offered, in both wire formats.
    /// Whether this is the execution verifier's request: it may run Bash but not edit.
    pub fn is_verifier(&self) -> bool {
        let tools = self.tool_names();
        let has = |name: &str| tools.iter().any(|t| t == name);
        has("Bash") && !has("Write") && !has("Edit")
    }

    pub fn tool_names(&self) -> Vec<String> {
        let tools = self.json.as_ref().and_then(|j| j.get("tools"));
        let Some(tools) = tools.and_then(Value::as_array) else {
            return Vec::new();
        };
        tools
            .iter()
            .filter_map(|t| t.get("name").or_else(|| t.pointer("/function/name")))
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    }

    /// Length of the longest common byte prefix of two request bodies.
    pub fn common_prefix_len(&self, other: &RecordedRequest) -> usize {
        self.body
            .iter()
            .zip(other.body.iter())
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// Whether this request was in flight while `other` was.
    pub fn overlaps(&self, other: &RecordedRequest) -> bool {
        let (Some(self_end), Some(other_end)) = (self.completed_at, other.completed_at) else {
            return false;
        };
        self.received_at < other_end && other.received_at < self_end
    }
}

/// The shared log of a fake's requests.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
}

impl Recorder {
    /// Record an arriving request; returns its snapshot (with `seq`).
    pub(crate) fn arrive(
        &self,
        provider: Provider,
        method: &str,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> RecordedRequest {
        let mut requests = self.lock();
        let recorded = RecordedRequest {
            seq: requests.len(),
            provider,
            method: method.to_owned(),
            path: path.to_owned(),
            headers: header_pairs(headers),
            json: serde_json::from_slice(&body).ok(),
            body,
            received_at: Instant::now(),
            completed_at: None,
        };
        requests.push(recorded.clone());
        recorded
    }

    /// Mark request `seq` finished (first call wins).
    pub(crate) fn complete(&self, seq: usize) {
        if let Some(r) = self.lock().get_mut(seq) {
            r.completed_at.get_or_insert_with(Instant::now);
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<RecordedRequest> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<RecordedRequest>> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect()
}
