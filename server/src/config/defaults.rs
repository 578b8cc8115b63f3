//! Every default of the server's settings, in one place: `Config`'s defaults and the
//! command line's (`ultraplan-server serve --help`) both read these.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use super::SandboxKind;

/// Address the server listens on.
pub const BIND: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878));
/// Which sandbox runs agents: the best one this host has.
pub const RUNNER: SandboxKind = SandboxKind::Auto;
/// Sessions with a live agent at once.
pub const MAX_RUNNING: usize = 16;
/// Seconds a runner's claim on a session lasts without a renewal.
pub const LEASE_SECONDS: u64 = 30;
/// Seconds an agent waiting on a person keeps its sandbox before it is parked.
pub const PARK_AFTER_SECONDS: u64 = 60;
/// Hours a cached environment is reused before it is built again.
pub const ENVIRONMENT_TTL_HOURS: u64 = 7 * 24;
/// Seconds an environment's setup may run (an environment file may ask for less).
pub const SETUP_TIMEOUT_SECONDS: u64 = 900;
/// Tokens one session may spend before it is stopped.
pub const SESSION_TOKEN_BUDGET: u64 = 5_000_000;
/// Size cap of an execution workspace: 2 GiB.
pub const WORKSPACE_MAX_BYTES: u64 = 2 << 30;
/// Largest compressed bundle an upload may send (the bundle limits' default).
pub const MAX_BUNDLE_BYTES: u64 = 512 << 20;
/// Largest JSON request body: 2 MiB.
pub const MAX_JSON_BODY: usize = 2 << 20;
/// The model when no provider key is set.
pub const OFFLINE_MODEL: &str = "offline";
/// The model when an Anthropic key is set.
pub const ANTHROPIC_MODEL: &str = "anthropic:claude-sonnet-4-5";
/// The model when only an OpenAI key is set.
pub const OPENAI_MODEL: &str = "openai:gpt-4.1";
/// Seconds of silence inside a streamed model answer before the attempt is retried: the
/// gateway's own default.
pub const MODEL_IDLE_TIMEOUT_SECS: u64 = ultraplan_gateway::DEFAULT_STREAM_IDLE_TIMEOUT.as_secs();

/// Writes per second per user.
pub const RATE_LIMIT: u32 = 20;
/// Reads per second per user.
pub const READ_RATE_LIMIT: u32 = 2000;
/// Requests per second per client address that do not authenticate.
pub const ANON_RATE_LIMIT: u32 = 10;

/// Seconds a connection has to send a request's headers.
pub const HEADER_TIMEOUT_SECS: u64 = 30;
/// Seconds a request body may take in all.
pub const BODY_TIMEOUT_SECS: u64 = 15 * 60;
/// Slowest average body rate after the grace period, bytes per second.
pub const BODY_MIN_RATE: u64 = 4096;
/// Seconds before the minimum body rate applies.
pub const BODY_GRACE_SECS: u64 = 10;
/// Bundle uploads one user may have in progress at once.
pub const UPLOADS_PER_USER: usize = 4;
/// Bundle uploads the server receives at once.
pub const MAX_UPLOADS: usize = 32;
/// Seconds an upload waits for a server-wide slot before 503.
pub const UPLOAD_WAIT_SECS: u64 = 5;

/// Most bundle storage one user may hold: 10 GiB (as the command line spells it, and in bytes).
pub const BUNDLE_QUOTA: &str = "10GiB";
pub const BUNDLE_QUOTA_BYTES: u64 = 10 << 30;
/// Seconds a bundle no session uses is kept after its upload.
pub const BUNDLE_GRACE_SECS: u64 = 24 * 3600;
/// Seconds between retention passes.
pub const RETENTION_INTERVAL_SECS: u64 = 600;

/// The secrets key's file name in the data dir (docs/ARCHITECTURE.md §6.5).
pub const SECRETS_KEY_FILE: &str = "secrets.key";

#[cfg(test)]
mod tests {
    #[test]
    fn the_bundle_cap_is_the_bundle_limits_default() {
        let limits = ultraplan_bundle::BundleLimits::default();
        assert_eq!(super::MAX_BUNDLE_BYTES, limits.max_archive_bytes);
    }
}
