//! The seam between sessions and model providers: the orchestrator asks a [`ModelBackend`],
//! which the server's model router (`crate::model_router`) implements over the offline planner
//! and the model gateway.

use async_trait::async_trait;
pub use ultraplan_protocol::model::Completion;
use ultraplan_protocol::model::{ModelError, ModelRequest};

/// Answers model requests for a configured model name (`anthropic:<id>`, `openai:<id>`,
/// `offline`).
#[async_trait]
pub trait ModelBackend: Send + Sync + 'static {
    async fn complete(&self, model: &str, request: ModelRequest) -> Result<Completion, ModelError>;
}
