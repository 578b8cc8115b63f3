//! `ultraplan-agent`: the in-container plan-mode agent runtime.
//!
//! So far the crate holds the read-only tools the agent offers the model (`Glob`, `Grep`,
//! `Read`), working inside a [`Workspace`] (the unpacked repository bundle); the main loop, the
//! frames codec and the remaining tools come later.

pub mod tools;
pub mod workspace;

#[cfg(test)]
mod test_support;

pub use tools::{ToolOutput, ToolRegistry};
pub use workspace::{Workspace, WorkspaceError};
