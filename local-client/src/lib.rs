//! The ultraplan terminal client as a library: the pure and IO pieces the `ultraplan` binary
//! is built from, exposed so they can be tested and reused.
//!
//! - [`keyword`]: does a prompt ask for an ultraplan, and the rewritten prompt;
//! - [`bundle`]: the deterministic, parallel `.tar.gz` of the repository that teleport uploads.

pub mod bundle;
pub mod keyword;
