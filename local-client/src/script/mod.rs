//! The scriptable session commands' pure parts (`logs`, `message`, `wait`), and the one IO
//! piece they share, paging a session's events.
//!
//! - [`timeline`]: an event as a timeline record (the stable `--json` shape) and as a line;
//! - [`wait`]: has a session reached a phase, ended before it, or not yet; the exit codes;
//! - [`message`]: what posting a user message did, in words and as JSON;
//! - [`follow`]: paging a session's events with the session resource beside them.
//!
//! Everything from the server is untrusted: records are sanitised when they are built, so no
//! escape sequence or control character reaches a terminal or a script.

pub mod follow;
pub mod message;
pub mod timeline;
pub mod wait;
