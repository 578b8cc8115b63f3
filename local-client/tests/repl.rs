//! The interactive prompt under a pseudo-terminal: rainbow highlighting, the launch notice,
//! the confirmation, the launch guard and the status line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use expectrl::Session;
use expectrl::session::OsSession;
use support::server::{Config, Server};
use support::{Home, git_repo};

/// Cursor position query and the answer a terminal gives.
const DSR: &[u8] = b"\x1b[6n";
const DSR_ANSWER: &[u8] = b"\x1b[1;1R";

/// A generous bound so a broken prompt fails instead of hanging; never a timing assertion.
const PATIENCE: Duration = Duration::from_secs(90);

struct Pty {
    session: OsSession,
    out: Vec<u8>,
    /// Bytes already matched by `wait_for`.
    seen: usize,
    /// Bytes already scanned for cursor queries.
    answered: usize,
}

impl Pty {
    fn spawn(cmd: std::process::Command) -> Self {
        Self {
            session: Session::spawn(cmd).unwrap(),
            out: Vec::new(),
            seen: 0,
            answered: 0,
        }
    }

    /// Reads what is available and answers cursor position queries like a terminal.
    fn pump(&mut self) -> bool {
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
    fn wait_for(&mut self, needle: &str) -> String {
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

    fn send(&mut self, text: &str) {
        self.session.write_all(text.as_bytes()).unwrap();
        self.session.flush().unwrap();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn prompt_session(home: &Home, server: &Server, cwd: &std::path::Path) -> Pty {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ultraplan"));
    cmd.env_clear()
        .envs(home.envs())
        .env("TERM", "xterm-256color")
        .env("ULTRAPLAN_SERVER", &server.url)
        .env("ULTRAPLAN_NO_WATCH", "1")
        .current_dir(cwd);
    Pty::spawn(cmd)
}

#[test]
fn the_prompt_highlights_warns_confirms_and_guards_launches() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let config = Config::default();
    config
        .gate
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let server = Server::start(config, vec![]);
    let mut pty = prompt_session(&home, &server, &repo);
    pty.wait_for("Ctrl-D quits.");

    pty.send("please ultraplan fix the login bug");
    let painted = pty.wait_for(&format!(
        "This prompt will launch an ultraplan session on {}",
        server.url
    ));
    for (i, c) in "ultraplan".chars().enumerate() {
        let (r, g, b) = ultraplan::repl::RAINBOW[i % ultraplan::repl::RAINBOW.len()];
        let escape = format!("\x1b[1;38;2;{r};{g};{b}m{c}");
        assert!(painted.contains(&escape), "no {escape:?} in {painted:?}");
    }

    pty.send("\r");
    pty.wait_for(&format!("Run ultraplan on {}?", server.url));
    pty.wait_for("Not now");
    pty.send("\x1b[B\r");
    pty.wait_for("Not launched.");
    assert!(
        server.recorded().requests.is_empty(),
        "declined: nothing sent"
    );

    pty.send("hello there\r");
    pty.wait_for("No ultraplan keyword in that prompt");

    pty.send("ultraplan fix auth\r");
    pty.wait_for("Run ultraplan on");
    pty.send("\r");
    pty.wait_for("ultraplan launching");
    pty.send("ultraplan something else\r");
    pty.wait_for("already launching");

    server.open_gate();
    pty.wait_for("review the plan at");
    pty.send("ultraplan a third thing\r");
    pty.wait_for("already polling session sess-1");
    pty.wait_for("◇ ultraplan · ");
    assert_eq!(server.recorded().created.len(), 1, "one launch only");

    pty.send("\x04");
    let deadline = Instant::now() + PATIENCE;
    while pty.session.get_process().is_alive().unwrap_or(false) {
        assert!(Instant::now() < deadline, "Ctrl-D did not quit");
        pty.pump();
        std::thread::sleep(Duration::from_millis(10));
    }
}
