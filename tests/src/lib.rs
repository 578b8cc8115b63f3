//! Shared support for the end-to-end suites: server and runner harnesses, repo fixtures, fake
//! model servers.

pub mod cut_proxy;
pub mod fake_models;
pub mod faults;
pub mod harness;
pub mod runners;
pub mod s3;
