//! What a runner's agent tasks share, and what they send up the link.

use crate::sandbox::Sandbox;
use ultraplan_protocol::runner::{AgentRef, RunnerMessage};

use crate::environment::{Environments, Lease};
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
    /// The environment snapshots on this runner's disk, one build per key at a time.
    pub(crate) environments: Environments,
}

/// What agent tasks send up the link.
pub(crate) enum Up {
    Message(RunnerMessage),
    /// An agent task ended: its address and launch number.
    Ended(AgentRef, u64),
    /// A `prepare` ended: its address and number, the snapshot it holds for the agent, and
    /// what to tell the server (only if the link still waits for that `prepare`).
    Prepared {
        agent: AgentRef,
        number: u64,
        held: Option<Held>,
        done: RunnerMessage,
    },
}

/// An environment snapshot a `prepare` leased for an agent's launch: never swept while held,
/// and held by the agent until it ends.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) lease: Lease,
    pub(crate) base_image: Option<String>,
}
