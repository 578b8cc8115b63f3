//! The review pages over real HTTP on a real port (SQLite), in a real headless Chromium
//! (started here through chromedriver) and as plain HTTP for the security checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser;
mod comments;
mod decisions;
mod evidence;
mod execution;
mod expired;
mod flow;
mod http;
mod limits;
mod login_csrf;
mod security;
mod support;
mod xss;
