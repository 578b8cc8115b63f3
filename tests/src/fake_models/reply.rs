//! Provider-neutral replies. A script says *what* the model answers; each fake renders it in its
//! own wire format (Anthropic Messages or OpenAI Chat Completions).

use std::time::Duration;

use serde_json::{Value, json};
use ultraplan_protocol::constants::EXIT_PLAN_MODE_TOOL;
use ultraplan_protocol::events::ContentBlock;
use ultraplan_protocol::model::{StopReason, Usage};

/// What a fake answers to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An assistant turn, delivered as SSE (or JSON when the request did not ask to stream).
    Turn { turn: Turn, delivery: Delivery },
    /// An HTTP error response in the provider's error shape.
    Error(ApiError),
}

/// One assistant turn. Tool-use blocks with an empty `id` get a fresh id from the fake.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub usage: Usage,
}

/// How a turn travels over the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Pause before every SSE event (or before a JSON body).
    pub chunk_delay: Duration,
    /// Largest text piece per delta, in characters.
    pub text_chunk_chars: usize,
    /// Largest tool-input JSON piece per delta, in characters.
    pub json_chunk_chars: usize,
    /// Stop early: drop the connection or send an error event.
    pub cut: Option<Cut>,
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            chunk_delay: Duration::ZERO,
            text_chunk_chars: 8,
            json_chunk_chars: 7,
            cut: None,
        }
    }
}

/// An early end of a streamed turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Cut {
    /// Send this many SSE events (or half the JSON body), then drop the connection.
    Drop { after_events: usize },
    /// Send this many SSE events, then an in-stream `error` event, then end the stream.
    ErrorEvent {
        after_events: usize,
        error: ApiError,
    },
}

/// The provider-neutral error kinds the fakes can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Authentication,
    InvalidRequest,
    PromptTooLong,
    NotFound,
    RateLimit,
    Server,
    Overloaded,
}

impl ErrorKind {
    /// The status the real Anthropic API uses for this kind.
    pub fn default_status(self) -> u16 {
        match self {
            ErrorKind::Authentication => 401,
            ErrorKind::InvalidRequest | ErrorKind::PromptTooLong => 400,
            ErrorKind::NotFound => 404,
            ErrorKind::RateLimit => 429,
            ErrorKind::Server => 500,
            ErrorKind::Overloaded => 529,
        }
    }

    fn default_message(self) -> &'static str {
        match self {
            ErrorKind::Authentication => "invalid x-api-key",
            ErrorKind::InvalidRequest => "invalid request",
            ErrorKind::PromptTooLong => "prompt is too long: 208310 tokens > 200000 maximum",
            ErrorKind::NotFound => "model not found",
            ErrorKind::RateLimit => "Number of request tokens has exceeded your rate limit.",
            ErrorKind::Server => "Internal server error",
            ErrorKind::Overloaded => "Overloaded",
        }
    }
}

/// An API error. `status` defaults to the Anthropic status of the kind; the OpenAI fake maps
/// 529 to 503 (OpenAI has no 529) unless a test sets another status explicitly.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub status: u16,
    pub message: String,
    /// Seconds, sent as the `retry-after` header.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error of `kind` with the real API's usual status and message.
    pub fn new(kind: ErrorKind) -> Self {
        ApiError {
            kind,
            status: kind.default_status(),
            message: kind.default_message().to_owned(),
            retry_after: None,
        }
    }

    /// The same error with another message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// The same error with another HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
}

impl Turn {
    /// A turn with these blocks; stop reason `tool_use` when any block is a tool call.
    pub fn new(content: Vec<ContentBlock>) -> Self {
        let calls_tool = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        Turn {
            content,
            stop_reason: if calls_tool {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            },
            usage: Usage {
                input_tokens: 100,
                output_tokens: 50,
                ..Usage::default()
            },
        }
    }
}

/// A tool-use block whose id the fake fills in.
pub fn tool_use_block(name: &str, input: Value) -> ContentBlock {
    ContentBlock::tool_use("", name, input)
}

impl Reply {
    /// An assistant turn with these blocks and default delivery.
    pub fn turn(content: Vec<ContentBlock>) -> Self {
        Reply::Turn {
            turn: Turn::new(content),
            delivery: Delivery::default(),
        }
    }

    /// A plain text answer ending the turn.
    pub fn text(text: impl Into<String>) -> Self {
        Reply::turn(vec![ContentBlock::text(text)])
    }

    /// One tool call (stop reason `tool_use`).
    pub fn tool_use(name: &str, input: Value) -> Self {
        Reply::turn(vec![tool_use_block(name, input)])
    }

    /// Several tool calls in one turn.
    pub fn tool_uses(calls: Vec<(&str, Value)>) -> Self {
        let blocks = calls
            .into_iter()
            .map(|(name, input)| tool_use_block(name, input))
            .collect();
        Reply::turn(blocks)
    }

    /// Some text followed by one tool call.
    pub fn text_and_tool_use(text: impl Into<String>, name: &str, input: Value) -> Self {
        Reply::turn(vec![ContentBlock::text(text), tool_use_block(name, input)])
    }

    /// An `ExitPlanMode{plan}` call.
    pub fn exit_plan_mode(plan: impl Into<String>) -> Self {
        Reply::tool_use(EXIT_PLAN_MODE_TOOL, json!({ "plan": plan.into() }))
    }

    /// Text cut off by the output limit (stop reason `max_tokens`).
    pub fn max_tokens(text: impl Into<String>) -> Self {
        Reply::text(text).stop_reason(StopReason::MaxTokens)
    }

    /// HTTP 429 `rate_limit_error` with `retry-after: secs`.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        let mut error = ApiError::new(ErrorKind::RateLimit);
        error.retry_after = Some(retry_after_secs);
        Reply::Error(error)
    }

    /// HTTP 529 `overloaded_error`.
    pub fn overloaded() -> Self {
        Reply::Error(ApiError::new(ErrorKind::Overloaded))
    }

    /// HTTP 500 `api_error`.
    pub fn server_error() -> Self {
        Reply::Error(ApiError::new(ErrorKind::Server))
    }

    /// HTTP 400 `invalid_request_error` with this message.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Reply::Error(ApiError::new(ErrorKind::InvalidRequest).with_message(message))
    }

    /// HTTP 400 "prompt is too long" (OpenAI: `context_length_exceeded`).
    pub fn prompt_too_long() -> Self {
        Reply::Error(ApiError::new(ErrorKind::PromptTooLong))
    }

    /// Any error.
    pub fn error(error: ApiError) -> Self {
        Reply::Error(error)
    }

    /// Set the stop reason of a turn.
    pub fn stop_reason(self, stop_reason: StopReason) -> Self {
        self.map_turn(|turn, _| turn.stop_reason = stop_reason)
    }

    /// Set the usage of a turn.
    pub fn usage(self, usage: Usage) -> Self {
        self.map_turn(|turn, _| turn.usage = usage)
    }

    /// Pause `delay` before every SSE event.
    pub fn slow(self, delay: Duration) -> Self {
        self.map_turn(|_, delivery| delivery.chunk_delay = delay)
    }

    /// Split text and tool input into pieces of at most these many characters.
    pub fn chunked(self, text_chars: usize, json_chars: usize) -> Self {
        self.map_turn(|_, delivery| {
            delivery.text_chunk_chars = text_chars.max(1);
            delivery.json_chunk_chars = json_chars.max(1);
        })
    }

    /// Drop the connection after `after_events` SSE events.
    pub fn drop_after(self, after_events: usize) -> Self {
        self.map_turn(|_, delivery| delivery.cut = Some(Cut::Drop { after_events }))
    }

    /// Send an in-stream `error` event after `after_events` SSE events.
    pub fn error_event_after(self, after_events: usize, error: ApiError) -> Self {
        self.map_turn(|_, delivery| {
            delivery.cut = Some(Cut::ErrorEvent {
                after_events,
                error,
            })
        })
    }

    fn map_turn(mut self, f: impl FnOnce(&mut Turn, &mut Delivery)) -> Self {
        if let Reply::Turn { turn, delivery } = &mut self {
            f(turn, delivery);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_pick_the_natural_stop_reason() {
        let cases = [
            (Reply::text("hi"), StopReason::EndTurn),
            (Reply::tool_use("Glob", json!({})), StopReason::ToolUse),
            (Reply::exit_plan_mode("p"), StopReason::ToolUse),
            (Reply::max_tokens("cut"), StopReason::MaxTokens),
        ];
        for (reply, want) in cases {
            let Reply::Turn { turn, .. } = reply else {
                panic!("not a turn")
            };
            assert_eq!(turn.stop_reason, want);
        }
    }

    #[test]
    fn error_helpers_use_the_real_statuses() {
        let cases = [
            (Reply::rate_limited(2), 429, Some(2)),
            (Reply::overloaded(), 529, None),
            (Reply::server_error(), 500, None),
            (Reply::invalid_request("bad"), 400, None),
            (Reply::prompt_too_long(), 400, None),
        ];
        for (reply, status, retry_after) in cases {
            let Reply::Error(error) = reply else {
                panic!("not an error")
            };
            assert_eq!((error.status, error.retry_after), (status, retry_after));
        }
    }
}
