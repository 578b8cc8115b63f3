//! Wire types shared by every ultraplan part, plus the pure logic both ends must agree on.
//!
//! This crate does no IO. It holds:
//! - [`events`]: the SDK-message shaped events of the append-only session log;
//! - [`session`]: the session resource, statuses and phases;
//! - [`api`]: HTTP request and response bodies;
//! - [`comments`]: inline comments on a plan's passages;
//! - [`model`]: provider-neutral model requests in Anthropic Messages shape;
//! - [`usage`]: token usage with prompt-cache detail (events and model calls both carry it);
//! - [`model_spec`]: the configured model names (`anthropic:<id>`, `openai:<id>`, `offline`);
//! - [`patch`]: what remote execution changed;
//! - [`verdict`]: the verifier's verdict on an execution, parsed from its report;
//! - [`environment`]: where a prepared environment appears in a sandbox, and the setup input;
//! - [`frames`]: newline-delimited JSON frames between the agent and the server;
//! - [`runner`]: the messages of a keyless runner's link to the server, with
//!   [`runner_environment`], environments prepared over it;
//! - [`git_patch`]: a `git diff` patch's per-file sections and the (C-quoted) names in them;
//! - [`expiry`]: when a pending plan's time limit is near, and how long is left;
//! - [`secret_names`]: what a secret may be called and hold;
//! - [`scanner`]: the [`ExitPlanModeScanner`] and phase derivation;
//! - [`constants`]: markers, sentinels, glyphs and limits.

pub mod activity;
pub mod api;
pub mod comments;
pub mod constants;
pub mod environment;
pub mod environments;
pub mod events;
pub mod expiry;
pub mod frames;
pub mod git_patch;
pub mod model;
pub mod model_spec;
pub mod patch;
pub mod plan_text;
pub mod runner;
pub mod runner_environment;
pub mod scanner;
pub mod secret_names;
pub mod secrets;
pub mod session;
pub mod usage;
pub mod verdict;

pub use events::{ContentBlock, Event, EventBody};
pub use scanner::{ExitPlanModeScanner, ScanError, ScanResult, derive_phase};
pub use session::{Phase, SessionResource, SessionStatus};
