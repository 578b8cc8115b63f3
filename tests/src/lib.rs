//! Shared support for the end-to-end suites: server harness, repo fixtures, fake model servers.

pub mod fake_models;
pub mod faults;
pub mod harness;
pub mod s3;
