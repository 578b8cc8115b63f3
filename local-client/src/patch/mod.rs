//! Pulling the patch of a remotely executed plan into a local repository (`ultraplan pull ID`).
//!
//! - [`parse`]: split the patch into one patch per file, with paths and line counts (pure);
//! - [`check`]: before anything is written, [`crosscheck`] (git reads the same files as the
//!   parser) and [`guard`] (nothing into `.git`, through a symlink, or a symlink out of the
//!   repository) — a refusal names every file and why;
//! - [`preflight`]: per file, would it apply, is it already applied, or does it conflict; and
//!   whether local changes are in the way (classification pure, probes via git);
//! - [`write`]: the one `git apply` per tree;
//! - [`apply`]: the repository, a fresh worktree on a new branch, stash → apply → pop;
//! - [`report`]: the per-file report (pure);
//! - [`git`]: the thin layer that runs git.
//!
//! The library never prints; `ultraplan pull` decides, asks and reports.

pub mod apply;
pub mod check;
pub mod crosscheck;
pub mod git;
pub mod guard;
pub mod parse;
pub mod preflight;
pub mod report;
pub mod write;

pub use apply::{Popped, Repo, RepoError, WorktreePlan};
pub use guard::Refusal;
pub use parse::{FilePatch, ParseError};
pub use preflight::{Dirt, Verdict};
