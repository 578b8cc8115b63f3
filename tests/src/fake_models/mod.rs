//! Fake model providers that speak the real wire formats, for tests.
//!
//! [`FakeAnthropic`] serves `POST /v1/messages` (Anthropic Messages: SSE with `message_start`,
//! `content_block_*`, `ping`, `message_delta`, `message_stop`, `error`; or JSON).
//! [`FakeOpenAi`] serves `POST /v1/chat/completions` (OpenAI Chat Completions: `data:` chunks
//! with `tool_calls` deltas, an optional usage chunk, `data: [DONE]`; or JSON).
//!
//! Both are driven by the same provider-neutral [`Script`] of [`Reply`]s, answer turn by turn
//! (a step may be a closure over the [`RecordedRequest`], to react to tool results), check the
//! API key, and record every request byte for byte with arrival and completion instants.
//!
//! ```no_run
//! # async fn demo() {
//! use serde_json::json;
//! use ultraplan_tests::fake_models::{FakeAnthropic, Reply, Script};
//!
//! let script = Script::replies([Reply::tool_use("Glob", json!({"pattern": "**/*.rs"}))])
//!     .then_fn(|req| match req.last_tool_result() {
//!         Some(result) if result.text.contains("main.rs") => Reply::exit_plan_mode("1. Edit"),
//!         _ => Reply::text("nothing found"),
//!     });
//! let fake = FakeAnthropic::start(script).await;
//! // point the gateway at fake.base_url() with ultraplan_tests::fake_models::FAKE_ANTHROPIC_KEY
//! assert!(fake.requests().is_empty());
//! # }
//! ```

mod anthropic;
mod inspect;
mod openai;
mod openai_render;
mod record;
mod render;
mod reply;
mod script;
mod server;

#[cfg(test)]
mod tests_anthropic;
#[cfg(test)]
mod tests_openai;
#[cfg(test)]
mod tests_support;

pub use anthropic::{FAKE_ANTHROPIC_KEY, FakeAnthropic};
pub use inspect::ToolResultView;
pub use openai::{FAKE_OPENAI_KEY, FakeOpenAi};
pub use record::{Provider, RecordedRequest};
pub use reply::{ApiError, Cut, Delivery, ErrorKind, Reply, Turn, tool_use_block};
pub use script::Script;
