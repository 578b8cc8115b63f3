//! The interactive prompt under a pseudo-terminal: rainbow highlighting, the launch notice,
//! the confirmation, the launch guard and the status line.

use std::time::{Duration, Instant};

use crate::support::pty::{PATIENCE, Pty};
use crate::support::server::{Config, Server};
use crate::support::{Home, git_repo};

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
