//! Integration tests of the runner crate: its sandboxes hold (bwrap and Docker, limits,
//! execution workspaces), the egress proxy, and the `ultraplan-runner` binary against a real
//! server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod egress;
mod environment;
mod link;
mod sandbox;
mod sandbox_execution;
mod sandbox_limits;
