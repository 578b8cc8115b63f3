//! The seam between sessions and model providers: the orchestrator asks a [`ModelBackend`],
//! which the gateway implements for real providers and the offline planner.

use async_trait::async_trait;
use ultraplan_protocol::model::{ModelError, ModelRequest, ModelResponse};

/// A completed model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub response: ModelResponse,
    /// Provider attempts it took (retries included).
    pub attempts: u32,
}

/// Answers model requests for a configured model name (`anthropic:<id>`, `openai:<id>`,
/// `offline`).
#[async_trait]
pub trait ModelBackend: Send + Sync + 'static {
    async fn complete(&self, model: &str, request: ModelRequest) -> Result<Completion, ModelError>;
}
