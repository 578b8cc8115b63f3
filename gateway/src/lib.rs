//! The model gateway (docs/ARCHITECTURE.md §3.5): the only place that holds provider keys and talks
//! to model providers. It takes an Anthropic-shaped [`ModelRequest`], sends it to Anthropic (with
//! prompt cache breakpoints) or to an OpenAI-compatible server (translated), streams the answer
//! (SSE) into a [`ModelResponse`], and retries 429 / 5xx / overloaded / dropped streams with
//! bounded, jittered backoff that honours `retry-after`.
//!
//! Token counting and budgets belong to the caller: every [`Completion`] carries its usage.
//!
//! The gateway knows nothing of sessions, the store or HTTP routes. It never answers the
//! `offline` model: the server's model router sends that name to the offline planner
//! (`ultraplan-offline`), and [`Gateway::complete`] refuses it.

mod anthropic;
mod anthropic_stream;
mod cache;
mod http;
mod openai;
mod openai_stream;
mod openai_translate;
mod retry;
mod secret;
mod sse;

#[cfg(test)]
mod anthropic_stream_tests;
#[cfg(test)]
mod openai_tests;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use ultraplan_protocol::model::{ModelError, ModelErrorKind, ModelRequest, ModelResponse};
use ultraplan_protocol::model_spec::ModelSpec;

pub use anthropic::{ANTHROPIC_VERSION, DEFAULT_ANTHROPIC_BASE_URL};
pub use cache::{MAX_CACHE_BREAKPOINTS, apply_cache_breakpoints};
pub use openai::DEFAULT_OPENAI_BASE_URL;
pub use retry::{Decision, Failure, RetryPolicy};
pub use secret::Secret;
pub use ultraplan_protocol::model::Completion;

/// What the gateway needs: keys, base URLs, retry policy, per-attempt timeout.
/// `Debug` shows keys as `[redacted]`.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub anthropic_api_key: Option<Secret>,
    /// Default [`DEFAULT_ANTHROPIC_BASE_URL`].
    pub anthropic_base_url: Option<String>,
    /// Optional: local OpenAI-compatible servers need none.
    pub openai_api_key: Option<Secret>,
    /// Default [`DEFAULT_OPENAI_BASE_URL`].
    pub openai_base_url: Option<String>,
    pub retry: RetryPolicy,
    /// Longest one attempt (connect, stream to the end) may take before it counts as failed.
    pub request_timeout: Duration,
    /// Longest silence inside a streamed answer before the attempt counts as failed (and is
    /// retried): a stalled stream ends long before `request_timeout`.
    pub stream_idle_timeout: Duration,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            anthropic_api_key: None,
            anthropic_base_url: None,
            openai_api_key: None,
            openai_base_url: None,
            retry: RetryPolicy::default(),
            request_timeout: Duration::from_secs(600),
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
        }
    }
}

/// Default longest silence inside a streamed answer. Anthropic pings every few seconds and
/// OpenAI-compatible servers stream tokens, so a minute and a half of nothing is a stall.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
}

impl Provider {
    /// `anthropic` or `openai`: the model prefix, and the `provider` field of logs.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        }
    }
}

/// Split `anthropic:<id>` / `openai:<id>` into provider and model id; `offline` and unknown
/// names are invalid requests.
pub fn parse_model(model: &str) -> Result<(Provider, String), ModelError> {
    let invalid = |message: String| ModelError {
        kind: ModelErrorKind::InvalidRequest,
        message,
    };
    match ModelSpec::parse(model) {
        Ok(ModelSpec::Anthropic(id)) => Ok((Provider::Anthropic, id)),
        Ok(ModelSpec::OpenAi(id)) => Ok((Provider::OpenAi, id)),
        Ok(ModelSpec::Offline) => Err(invalid(
            "the offline model is the server's built-in planner; it never goes through the \
             model gateway"
                .to_owned(),
        )),
        Err(unknown) => Err(invalid(unknown.to_string())),
    }
}

/// One request, ready to send as often as needed: the body is byte-identical on every attempt.
struct Prepared {
    provider: Provider,
    model: String,
    url: String,
    headers: HeaderMap,
    body: Bytes,
}

/// The gateway. Cheap to clone: one shared HTTP client and config.
#[derive(Clone)]
pub struct Gateway {
    client: reqwest::Client,
    config: Arc<GatewayConfig>,
}

impl fmt::Debug for Gateway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gateway")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway with one HTTP client for all providers.
    pub fn new(config: GatewayConfig) -> Self {
        let client = reqwest::Client::builder()
            .user_agent(concat!("ultraplan/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.request_timeout.min(Duration::from_secs(30)))
            .build()
            .unwrap_or_default();
        Gateway {
            client,
            config: Arc::new(config),
        }
    }

    /// Send `request` to `model` (`anthropic:<id>` or `openai:<id>`; the request's own `model`
    /// is overwritten with `<id>`), stream the answer and assemble it, retrying as the policy
    /// allows. Errors never contain a key.
    pub async fn complete(
        &self,
        model: &str,
        request: ModelRequest,
    ) -> Result<Completion, ModelError> {
        let prepared = self.prepare(model, request)?;
        let provider = prepared.provider.name();
        let mut waited = Duration::ZERO;
        for attempt in 1.. {
            let failure = match self.attempt(&prepared).await {
                Ok(response) => {
                    log_success(&prepared, attempt, &response);
                    return Ok(Completion {
                        response,
                        attempts: attempt,
                    });
                }
                Err(failure) => failure,
            };
            let error = self.redact(&failure.to_string());
            match self
                .config
                .retry
                .decide(attempt, &failure, waited, retry::clock_jitter())
            {
                Decision::Retry(delay) => {
                    tracing::warn!(provider, model = %prepared.model, attempt,
                        status = failure.status(), delay_ms = delay.as_millis() as u64,
                        error = %error, "model request failed; retrying");
                    tokio::time::sleep(delay).await;
                    waited += delay;
                }
                Decision::GiveUp(mut given_up) => {
                    given_up.message = self.redact(&format!("{provider}: {}", given_up.message));
                    tracing::warn!(provider, model = %prepared.model, attempt,
                        status = failure.status(), kind = ?given_up.kind, error = %error,
                        "model request failed");
                    return Err(given_up);
                }
            }
        }
        Err(ModelError {
            kind: ModelErrorKind::Unavailable,
            message: format!("{provider}: attempts exhausted"),
        })
    }

    fn prepare(&self, model: &str, mut request: ModelRequest) -> Result<Prepared, ModelError> {
        let (provider, id) = parse_model(model)?;
        request.model = Some(id.clone());
        let config = &self.config;
        let (url, headers, body) = match provider {
            Provider::Anthropic => {
                let base = config.anthropic_base_url.as_deref();
                let base = base.unwrap_or(DEFAULT_ANTHROPIC_BASE_URL);
                let headers = anthropic::headers(config.anthropic_api_key.as_ref())?;
                (
                    anthropic::endpoint(base),
                    headers,
                    anthropic::body(request)?,
                )
            }
            Provider::OpenAi => {
                if config.openai_api_key.is_none() && config.openai_base_url.is_none() {
                    return Err(ModelError {
                        kind: ModelErrorKind::InvalidRequest,
                        message: "neither OPENAI_API_KEY nor OPENAI_BASE_URL is set on the server"
                            .to_owned(),
                    });
                }
                let base = config.openai_base_url.as_deref();
                let base = base.unwrap_or(DEFAULT_OPENAI_BASE_URL);
                let headers = openai::headers(config.openai_api_key.as_ref())?;
                (
                    openai::endpoint(base),
                    headers,
                    openai::body(&request, &id, base)?,
                )
            }
        };
        Ok(Prepared {
            provider,
            model: id,
            url,
            headers,
            body: Bytes::from(body),
        })
    }

    /// One attempt, bounded by the request timeout.
    async fn attempt(&self, prepared: &Prepared) -> Result<ModelResponse, Failure> {
        let timeout = self.config.request_timeout;
        match tokio::time::timeout(timeout, self.send(prepared)).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Transport(format!(
                "no complete answer within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    async fn send(&self, prepared: &Prepared) -> Result<ModelResponse, Failure> {
        let response = self
            .client
            .post(&prepared.url)
            .headers(prepared.headers.clone())
            .body(prepared.body.clone())
            .send()
            .await
            .map_err(|e| Failure::transport("request failed", &e))?;
        if !response.status().is_success() {
            return Err(http::failure_from_response(response).await);
        }
        let idle = self.config.stream_idle_timeout;
        match prepared.provider {
            Provider::Anthropic => anthropic::read(response, idle).await,
            Provider::OpenAi => openai::read(response, idle).await,
        }
    }

    /// `text` with every configured key replaced by `[redacted]`.
    fn redact(&self, text: &str) -> String {
        let keys = [&self.config.anthropic_api_key, &self.config.openai_api_key];
        keys.into_iter()
            .flatten()
            .map(Secret::expose)
            .filter(|key| !key.is_empty())
            .fold(text.to_owned(), |text, key| text.replace(key, "[redacted]"))
    }
}

fn log_success(prepared: &Prepared, attempts: u32, response: &ModelResponse) {
    let usage = &response.usage;
    tracing::debug!(provider = prepared.provider.name(), model = %prepared.model, attempts,
        input_tokens = usage.input_tokens, output_tokens = usage.output_tokens,
        cache_read_input_tokens = usage.cache_read_input_tokens,
        cache_creation_input_tokens = usage.cache_creation_input_tokens,
        stop_reason = ?response.stop_reason, "model request complete");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_model_names() {
        let cases = [
            (
                "anthropic:claude-sonnet-4-5",
                Some((Provider::Anthropic, "claude-sonnet-4-5")),
            ),
            ("openai:gpt-4.1", Some((Provider::OpenAi, "gpt-4.1"))),
            (
                "openai:org/model:tag",
                Some((Provider::OpenAi, "org/model:tag")),
            ),
            ("anthropic:", None),
            ("offline", None),
            ("gpt-4", None),
        ];
        for (model, want) in cases {
            let got = parse_model(model);
            match want {
                Some((provider, id)) => {
                    assert_eq!(got.unwrap(), (provider, id.to_owned()), "{model}")
                }
                None => assert_eq!(got.unwrap_err().kind, ModelErrorKind::InvalidRequest),
            }
        }
        let offline = parse_model("offline").unwrap_err().message;
        assert!(offline.contains("built-in planner"), "{offline}");
        assert_eq!(
            parse_model("gpt-4").unwrap_err().message,
            "unknown model 'gpt-4': use anthropic:<model>, openai:<model> or offline"
        );
    }

    #[test]
    fn debug_and_errors_never_show_keys() {
        let config = GatewayConfig {
            anthropic_api_key: Some(Secret::new("sk-ant-very-secret")),
            openai_api_key: Some(Secret::new("sk-openai-very-secret")),
            ..GatewayConfig::default()
        };
        let gateway = Gateway::new(config.clone());
        for printed in [format!("{config:?}"), format!("{gateway:?}")] {
            assert!(!printed.contains("very-secret"), "{printed}");
            assert!(printed.contains("[redacted]"), "{printed}");
        }
        let text = gateway.redact("bad key sk-ant-very-secret and sk-openai-very-secret");
        assert_eq!(text, "bad key [redacted] and [redacted]");
    }

    #[test]
    fn the_request_model_is_overwritten() {
        let gateway = Gateway::new(GatewayConfig {
            anthropic_api_key: Some(Secret::new("k")),
            ..GatewayConfig::default()
        });
        let request = ModelRequest {
            model: Some("something-else".into()),
            max_tokens: 1,
            system: vec![],
            messages: vec![],
            tools: vec![],
            temperature: None,
        };
        let prepared = gateway.prepare("anthropic:claude-x", request).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&prepared.body).unwrap();
        assert_eq!(body["model"], "claude-x");
        assert_eq!(prepared.url, "https://api.anthropic.com/v1/messages");
    }
}
