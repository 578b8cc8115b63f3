//! The detached poller (docs/ARCHITECTURE.md §3.4): a pure [`machine`] driven by a thin async
//! [`driver`].

pub mod driver;
pub mod machine;
pub mod notify;

pub use driver::{Clock, TokioClock, Watcher, apply_view};
pub use machine::{Action, Input, Machine, PollConfig, Tick, View};
pub use notify::{Notifier, TerminalNotifier};
