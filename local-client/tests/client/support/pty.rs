//! A pseudo-terminal around the binary, answering cursor position queries like a terminal.

use std::io::Write;
use std::time::{Duration, Instant};

use expectrl::Session;
use expectrl::session::OsSession;

/// Cursor position query and the answer a terminal gives.
const DSR: &[u8] = b"\x1b[6n";
const DSR_ANSWER: &[u8] = b"\x1b[1;1R";

/// A generous bound so a broken prompt fails instead of hanging; never a timing assertion.
pub const PATIENCE: Duration = Duration::from_secs(90);

pub struct Pty {
    pub session: OsSession,
    out: Vec<u8>,
    /// Bytes already matched by `wait_for`.
    seen: usize,
    /// Bytes already scanned for cursor queries.
    answered: usize,
}

impl Pty {
    pub fn spawn(cmd: std::process::Command) -> Self {
        Self {
            session: Session::spawn(cmd).unwrap(),
            out: Vec::new(),
            seen: 0,
            answered: 0,
        }
    }

    /// Reads what is available and answers cursor position queries like a terminal.
    pub fn pump(&mut self) -> bool {
        let mut buf = [0u8; 8192];
        let read = match self.session.try_read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return false,
        };
        self.out.extend_from_slice(&buf[..read]);
        while let Some(at) = find(&self.out[self.answered..], DSR) {
            self.answered += at + DSR.len();
            self.session.write_all(DSR_ANSWER).unwrap();
            self.session.flush().unwrap();
        }
        true
    }

    /// Waits until `needle` shows up after what was already matched; returns the output up to
    /// and including it.
    pub fn wait_for(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(at) = find(&self.out[self.seen..], needle.as_bytes()) {
                let end = self.seen + at + needle.len();
                let text = String::from_utf8_lossy(&self.out[self.seen..end]).into_owned();
                self.seen = end;
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {needle:?}; output so far:\n{}",
                String::from_utf8_lossy(&self.out[self.seen..])
            );
            if !self.pump() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    pub fn send(&mut self, text: &str) {
        self.session.write_all(text.as_bytes()).unwrap();
        self.session.flush().unwrap();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl Pty {
    /// Waits for the process to end, reading all it prints; its exit code.
    pub fn exit_code(&mut self) -> i32 {
        use expectrl::process::unix::WaitStatus;
        let deadline = Instant::now() + PATIENCE;
        loop {
            while self.pump() {}
            match self.session.get_process().status() {
                Ok(WaitStatus::StillAlive) => {}
                Ok(WaitStatus::Exited(_, code)) => return code,
                other => panic!("unexpected end: {other:?}"),
            }
            assert!(Instant::now() < deadline, "the process did not end");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything printed so far, as text.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }
}
