//! Model calls of a session's agent: answered concurrently (bounded per session), recorded
//! with their usage, refused once the session's token budget is spent.

use tokio::sync::mpsc;
use ultraplan_protocol::frames::ServerFrame;
use ultraplan_protocol::model::{ModelError, ModelErrorKind, ModelRequest, Usage};

use super::{Inner, ModelReply, SessionTask};
use crate::store::ModelCall;

impl SessionTask {
    pub(super) fn call_model(
        &self,
        request_id: String,
        request: ModelRequest,
        replies: mpsc::UnboundedSender<ModelReply>,
    ) {
        let inner = self.inner.clone();
        let session_id = self.session.id.clone();
        let model = self.model();
        let over_budget = self.usage.total() >= inner.settings.token_budget;
        let calls = self.calls.clone();
        tokio::spawn(async move {
            let _permit = calls.acquire_owned().await;
            let reply = if over_budget {
                let error = ModelError {
                    kind: ModelErrorKind::BudgetExhausted,
                    message: format!(
                        "the session spent its budget of {} tokens",
                        inner.settings.token_budget
                    ),
                };
                (ServerFrame::ModelError { request_id, error }, None)
            } else {
                complete(&inner, &session_id, &model, request_id, request).await
            };
            let _ = replies.send(reply);
        });
    }
}

async fn complete(
    inner: &Inner,
    session_id: &str,
    model: &str,
    request_id: String,
    request: ModelRequest,
) -> ModelReply {
    let outcome = inner.models.complete(model, request).await;
    let (usage, attempts, error) = match &outcome {
        Ok(c) => (c.response.usage, c.attempts, None),
        Err(e) => (Usage::default(), 1, Some(e.message.clone())),
    };
    let call = ModelCall {
        session_id: session_id.to_owned(),
        model: model.to_owned(),
        usage,
        attempts,
        error,
    };
    let record = || inner.state.store.record_model_call(&call);
    let total = match crate::orchestrator::durable::write(session_id, "model call", record).await {
        Ok(total) => Some(total),
        Err(error) => {
            tracing::error!(session_id, %error, "cannot record a model call");
            None
        }
    };
    let frame = match outcome {
        Ok(c) => ServerFrame::ModelResponse {
            request_id,
            response: c.response,
        },
        Err(error) => ServerFrame::ModelError { request_id, error },
    };
    (frame, total)
}
