//! The model router sessions use: the model name `offline` goes to the built-in offline planner
//! (`ultraplan-offline`), every other name to the model gateway (`ultraplan-gateway`), which
//! refuses names it does not know.

use std::time::Duration;

use async_trait::async_trait;
use ultraplan_gateway::{Gateway, GatewayConfig, RetryPolicy};
use ultraplan_protocol::model::{ModelError, ModelRequest};
use ultraplan_protocol::model_spec::ModelSpec;

use crate::config::Config;
use crate::orchestrator::{Completion, ModelBackend};

/// Routes `offline` to the deterministic planner and everything else to the gateway.
#[derive(Clone)]
pub struct Models {
    gateway: Gateway,
}

impl Models {
    /// Providers as the server is configured.
    pub fn from_config(config: &Config) -> Self {
        Models {
            gateway: Gateway::new(GatewayConfig {
                anthropic_api_key: config.anthropic_api_key.clone(),
                anthropic_base_url: config.anthropic_base_url.clone(),
                openai_api_key: config.openai_api_key.clone(),
                openai_base_url: config.openai_base_url.clone(),
                retry: RetryPolicy::default(),
                request_timeout: Duration::from_secs(600),
                stream_idle_timeout: config.model_idle_timeout,
            }),
        }
    }

    /// Over an explicit gateway (tests point it at fake providers).
    pub fn with_gateway(gateway: Gateway) -> Self {
        Models { gateway }
    }
}

#[async_trait]
impl ModelBackend for Models {
    async fn complete(&self, model: &str, request: ModelRequest) -> Result<Completion, ModelError> {
        if let Ok(ModelSpec::Offline) = ModelSpec::parse(model) {
            return Ok(Completion {
                response: ultraplan_offline::offline_turn(&request),
                attempts: 1,
            });
        }
        self.gateway.complete(model, request).await
    }
}
