//! The ultraplan terminal client as a library: the pure and IO pieces the `ultraplan` binary
//! is built from, exposed so they can be tested and reused.
//!
//! - [`keyword`]: does a prompt ask for an ultraplan, and the rewritten prompt;
//! - [`bundle`]: the deterministic, parallel `.tar.gz` of the repository that teleport uploads;
//! - [`config`], [`paths`]: settings and where files live;
//! - [`api`]: the typed HTTP client;
//! - [`launch`]: the create-session request and the deduplicated upload;
//! - [`poll`]: the detached poller (a pure state machine and its async driver);
//! - [`state`]: the watcher's state files; [`pill`]: the status line;
//! - [`teleport`], [`plan_file`]: bringing a plan back; [`hook`]: the Claude Code hook;
//! - [`patch`]: applying the patch of a remotely executed plan;
//! - [`repl`]: the interactive prompt's highlighter, notice and launch guard;
//! - [`script`]: the scriptable session commands' timeline, wait and message logic;
//! - [`sanitize`]: the one sanitiser of server text bound for a terminal or Claude Code.

pub mod api;
pub mod bundle;
pub mod config;
pub mod hook;
pub mod incremental;
pub mod keyword;
pub mod launch;
pub mod origin;
pub mod patch;
pub mod paths;
pub mod pill;
pub mod plan_file;
pub mod poll;
pub mod repl;
pub mod sanitize;
pub mod script;
pub mod state;
pub mod teleport;
pub mod upload;
