//! The executing agent's network (docs/ARCHITECTURE.md §6.5): when its environment's
//! `[agent] network` allows anything, an egress proxy serves that agent alone, bound into its
//! sandbox like setup's, and the hosts it refused are logged when the agent ends. Planning
//! agents never get one (they have no Bash). On a linked runner the runner serves that proxy
//! and reports what it refused with the agent's exit.

use serde_json::json;
use ultraplan_protocol::constants::ENVIRONMENT_READY;
use ultraplan_protocol::frames::AgentMode;
use ultraplan_runner::egress::BlockedAttempt;
use ultraplan_runner::environment::start_proxy;

use super::SessionTask;
use super::environment::{blocked_json, blocked_text, note};

impl SessionTask {
    /// Start the proxy for an executing agent whose environment lets it reach the network.
    pub(super) async fn start_agent_proxy(&mut self) -> Result<(), String> {
        self.stop_agent_proxy().await;
        if self.mode != AgentMode::Execute || self.inner.runner.is_remote() {
            return Ok(());
        }
        self.agent_proxy = start_proxy(&self.agent_network.0).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Stop the agent's proxy, logging the hosts it refused.
    pub(super) async fn stop_agent_proxy(&mut self) {
        let Some((proxy, _socket)) = self.agent_proxy.take() else {
            return;
        };
        let (blocked, beyond) = (proxy.blocked(), proxy.blocked_overflow());
        proxy.shutdown().await;
        self.note_refused(&blocked, beyond).await;
    }

    /// Log the hosts the agent's allow-list refused, if any.
    pub(super) async fn note_refused(&self, blocked: &[BlockedAttempt], beyond: u64) {
        if blocked.is_empty() {
            return;
        }
        let message = format!(
            "The agent's network allow-list refused hosts.{}",
            blocked_text(blocked, beyond)
        );
        let data = json!({
            "phase": "agent",
            "blocked": blocked_json(blocked),
            "blocked_beyond": beyond,
        });
        self.append_events(&[note(ENVIRONMENT_READY, message, data)])
            .await;
    }
}
