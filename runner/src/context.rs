//! What a runner's agent tasks share, and what they send up the link.

use crate::sandbox::Sandbox;
use ultraplan_protocol::runner::{AgentRef, RunnerMessage};

use crate::ledger::Ledger;
use crate::settings::RunnerSettings;

/// What every agent task of this runner shares.
pub(crate) struct Context {
    pub(crate) settings: RunnerSettings,
    pub(crate) sandbox: Sandbox,
    pub(crate) http: reqwest::Client,
    /// One bundle fetch at a time.
    pub(crate) fetching: tokio::sync::Mutex<()>,
    pub(crate) ledger: Ledger,
}

/// What agent tasks send up the link.
pub(crate) enum Up {
    Message(RunnerMessage),
    /// An agent task ended: its address and launch number.
    Ended(AgentRef, u64),
}
