//! The `ultraplan` client's integration tests, in one test binary: the bundler, the binary
//! driven as a user would, the session commands, the hook, launch, the poll loop, pulling a
//! patch (and refusing hostile ones), secrets, server text kept off the terminal raw, and the
//! interactive prompt — against real git repositories and a scripted server.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test binary: failures should panic

mod bundle;
mod cli;
mod commands;
mod hook;
mod launch;
mod poll;
mod pull;
mod pull_download;
mod pull_safety;
mod repl;
mod sanitized;
mod secrets;
mod session_message;
mod session_script;
mod support;
