//! Where agents run. Three parts:
//! - [`sandbox`] and [`workspace`]: the sandboxes that start the agent, and the writable copy
//!   an execution works in with the patch made of it. The server's in-process runner uses
//!   them as a library.
//! - [`environment`] and [`egress`]: a repository's environment, set up once in a sandbox
//!   that reaches the hosts of its network allow-list only through the egress proxy, and
//!   cached for later sessions (docs/ARCHITECTURE.md §6.5).
//! - `ultraplan-runner`, a keyless runner: it links out to an ultraplan server over one
//!   WebSocket with a runner token, and runs the agents the server asks for in its local
//!   sandbox (docs/ARCHITECTURE.md §5.3). The server keeps the sessions, the event log and the
//!   model keys; the runner holds bundles it fetched, execution workspaces and the patches it
//!   makes of them, and the environment snapshots its agents use (built when the server asks
//!   it to `prepare` one), and nothing else.

mod agent;
mod bundle;
mod context;
mod control;
pub mod egress;
pub mod environment;
mod ledger;
mod lines;
mod link;
mod prepare;
pub mod sandbox;
mod settings;
pub mod workspace;

pub use ledger::{LedgerEntry, read_ledger};
pub use link::run;
pub use settings::RunnerSettings;
