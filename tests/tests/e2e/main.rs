//! End-to-end suites: the gateway against fake providers, and the real binaries together.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod blobs;
mod bundle_encoding;
mod cli_script;
mod cluster;
mod common;
mod environments;
mod execution;
mod execution_limits;
mod failover;
mod faults;
mod fleet;
mod fleet_execution;
mod fleet_postgres;
mod fleet_replicas;
mod flows;
mod gateway_anthropic;
mod gateway_openai;
mod lifecycle;
mod live_clients;
mod multi_agent;
mod plan_comments;
mod poller;
mod poller_timeouts;
mod replica_loss;
mod resumable_upload;
