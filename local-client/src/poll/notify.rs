//! Telling the user a session needs them: the terminal bell, or a desktop notification.

use std::io::Write;
use std::process::{Command, Stdio};

use ultraplan_protocol::session::Phase;

use crate::state::SessionState;

/// Something that can get the user's attention.
pub trait Notifier: Send + Sync {
    fn notify(&self, phase: Phase, state: &SessionState);
}

/// Rings the bell on the controlling terminal (`/dev/tty`) when there is one, and sends a
/// desktop notification with `notify-send` when it is on `PATH` and a display is set.
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalNotifier;

impl Notifier for TerminalNotifier {
    fn notify(&self, phase: Phase, state: &SessionState) {
        let rang = ring_bell();
        let shown = desktop_notification(phase, state);
        tracing::debug!(rang, shown, ?phase, "notified");
    }
}

fn ring_bell() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/tty")
        .and_then(|mut tty| tty.write_all(b"\x07"))
        .is_ok()
}

fn desktop_notification(phase: Phase, state: &SessionState) -> bool {
    let has_display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    let Some(program) = crate::paths::which("notify-send").filter(|_| has_display) else {
        return false;
    };
    Command::new(program)
        .arg(phase.pill())
        .arg(format!(
            "{}\n{}",
            crate::sanitize::line(&state.title),
            crate::sanitize::line(&state.url)
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
