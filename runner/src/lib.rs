//! `ultraplan-runner`: a keyless runner. It links out to an ultraplan server over one
//! WebSocket with a runner token, and runs the agents the server asks for in its local sandbox
//! (docs/ARCHITECTURE.md §5.3). The server keeps the sessions, the event log and the model
//! keys; the runner holds bundles it fetched, execution workspaces and the patches it makes of
//! them, and nothing else.

mod agent;
mod bundle;
mod context;
mod ledger;
mod lines;
mod link;
mod settings;

pub use ledger::{LedgerEntry, read_ledger};
pub use link::run;
pub use settings::RunnerSettings;
