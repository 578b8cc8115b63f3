//! The model backend sessions use: the built-in offline planner, or the gateway for real
//! providers.

use std::time::Duration;

use async_trait::async_trait;
use ultraplan_protocol::model::{ModelError, ModelRequest};

use crate::config::Config;
use crate::gateway::{Gateway, GatewayConfig, RetryPolicy, offline};
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
        if model == offline::MODEL_NAME {
            let response = offline::offline_turn(&request);
            return Ok(Completion {
                response,
                attempts: 1,
            });
        }
        let done = self.gateway.complete(model, request).await?;
        Ok(Completion {
            response: done.response,
            attempts: done.attempts,
        })
    }
}
