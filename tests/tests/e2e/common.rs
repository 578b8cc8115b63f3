//! Shared setup for the gateway suites: a gateway pointed at a fake, with tiny retry delays.

use std::time::Duration;

use serde_json::json;
use ultraplan_gateway::{Gateway, GatewayConfig, RetryPolicy, Secret};
use ultraplan_protocol::events::{ContentBlock, Role};
use ultraplan_protocol::model::{Message, ModelRequest, SystemBlock, ToolDefinition};

/// Millisecond backoff: retries without real waiting. Generous total so `retry-after: 1` fits.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 5,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(4),
        max_total_delay: Duration::from_secs(10),
    }
}

pub fn anthropic_gateway(base_url: &str, key: &str) -> Gateway {
    anthropic_gateway_with_timeout(base_url, key, Duration::from_secs(30))
}

pub fn anthropic_gateway_with_timeout(base_url: &str, key: &str, timeout: Duration) -> Gateway {
    Gateway::new(GatewayConfig {
        anthropic_api_key: Some(Secret::new(key)),
        anthropic_base_url: Some(base_url.to_owned()),
        retry: fast_retry(),
        request_timeout: timeout,
        ..GatewayConfig::default()
    })
}

pub fn openai_gateway(base_url: &str, key: Option<&str>) -> Gateway {
    Gateway::new(GatewayConfig {
        openai_api_key: key.map(Secret::new),
        openai_base_url: Some(base_url.to_owned()),
        retry: fast_retry(),
        request_timeout: Duration::from_secs(30),
        ..GatewayConfig::default()
    })
}

/// A small plan-mode request: system prompt, two tools, one user message.
pub fn request() -> ModelRequest {
    let tool = |name: &str| ToolDefinition {
        name: name.to_owned(),
        description: format!("The {name} tool"),
        input_schema: json!({"type": "object", "properties": {"pattern": {"type": "string"}}}),
        cache_control: None,
    };
    ModelRequest {
        model: None,
        max_tokens: 1024,
        system: vec![
            SystemBlock::text("You are a planner."),
            SystemBlock::text("Read only."),
        ],
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::text("ultraplan fix the login bug")],
        }],
        tools: vec![tool("Glob"), tool("Grep")],
        temperature: None,
    }
}
