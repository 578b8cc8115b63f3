//! Integration tests of the server: the store suite on both backends, and the HTTP API over
//! real TCP against SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agents;
mod api;
mod blob_store;
mod bundle_encodings;
mod bundles;
mod comments;
mod decisions;
mod environments;
mod events;
mod execution;
mod incremental;
mod lease_suite;
mod parking;
mod quota;
mod ratelimits;
mod replicas;
mod resumable_uploads;
mod retention;
mod runner_tokens;
mod sandbox_health;
mod secrets;
mod slow_client;
mod slow_uploads;
mod store_suite;
mod support;
