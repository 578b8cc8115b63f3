//! The egress proxy a runner serves to an environment's setup sandbox (docs/ARCHITECTURE.md
//! §6.5): an HTTP proxy on a Unix socket bound into the sandbox, which lets through only the
//! hosts of the environment's network allow-list and records every refused attempt.
//!
//! - [`policy`]: the allow-list, parsed from the environment's entries (pure);
//! - [`proxy`]: the proxy itself ([`EgressProxy`]), one task per client connection.

mod blocked;
mod conn;
mod head;
pub mod policy;
pub mod proxy;

pub use blocked::{BlockedAttempt, MAX_BLOCKED_DISTINCT};
pub use policy::{HostPattern, HostRule, NetworkPolicy, PolicyError};
pub use proxy::{EgressProxy, ProxyLimits};
