//! `ultraplan secret set|list|rm` against the scripted server: the value comes from stdin
//! with one trailing newline dropped and goes only into the PUT body, names travel as one path
//! segment, the list is printed clean of the server's escape sequences, and refusals say why.
//! At a terminal the value is typed at a prompt that does not echo it.

use serde_json::json;

use crate::support::Home;
use crate::support::pty::Pty;
use crate::support::server::{Config, Server};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn secret(home: &Home, server: &Server, args: &[&str], stdin: &str) -> std::process::Output {
    home.cmd(home.path())
        .args(["--server", &server.url, "--token", "good", "secret"])
        .args(args)
        .write_stdin(stdin)
        .output()
        .unwrap()
}

#[test]
fn secrets_are_set_from_stdin_listed_clean_and_removed() {
    let home = Home::new();
    let server = Server::start(Config::default(), vec![]);

    let set = secret(&home, &server, &["set", "PIP_TOKEN"], "pypi-value\n");
    assert!(set.status.success(), "{}", text(&set.stderr));
    assert!(!text(&set.stdout).contains("pypi-value"));
    assert!(!text(&set.stderr).contains("pypi-value"));
    let puts = server.recorded().secret_puts;
    assert_eq!(
        puts,
        vec![("PIP_TOKEN".to_owned(), json!({"value": "pypi-value"}))]
    );

    let listed = secret(&home, &server, &["list"], "");
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let out = text(&listed.stdout);
    assert!(
        out.contains("PIP_TOKEN") && out.contains("2026-12-02T10:00:00Z"),
        "{out}"
    );
    assert!(
        !listed.stdout.iter().any(|&b| b == 0x1b || b == 0x07),
        "{out:?}"
    );
    let json = secret(&home, &server, &["list", "--json"], "");
    assert!(!json.stdout.iter().any(|&b| b == 0x1b || b == 0x07));
    let parsed: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(parsed["secrets"][0]["name"], "PIP_TOKEN");

    let removed = secret(&home, &server, &["rm", "PIP_TOKEN"], "");
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    let again = secret(&home, &server, &["rm", "PIP_TOKEN"], "");
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("secret not found"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn refusals_say_why_and_odd_names_stay_one_segment() {
    let home = Home::new();
    let server = Server::start(Config::default(), vec![]);
    let refused = secret(&home, &server, &["set", "pip/token"], "v");
    assert_eq!(refused.status.code(), Some(1));
    let err = text(&refused.stderr);
    assert!(
        err.contains("upper-case letters") && err.contains("invalid_secret_name"),
        "{err}"
    );
    let requests = server.recorded().requests;
    assert!(
        requests.contains(&"PUT /v1/secrets/pip%2Ftoken".to_owned()),
        "{requests:?}"
    );

    let evil = secret(&home, &server, &["set", "EVIL"], "v");
    assert_eq!(evil.status.code(), Some(1));
    assert!(
        !evil.stderr.iter().any(|&b| b == 0x1b || b == 0x07),
        "{:?}",
        text(&evil.stderr)
    );
}

#[test]
fn at_a_terminal_the_value_is_typed_without_echo() {
    let home = Home::new();
    let server = Server::start(Config::default(), vec![]);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ultraplan"));
    cmd.env_clear()
        .envs(home.envs())
        .env("TERM", "xterm-256color")
        .args(["--server", &server.url, "secret", "set", "NPM_TOKEN"])
        .current_dir(home.path());
    let mut pty = Pty::spawn(cmd);
    pty.wait_for("Value of NPM_TOKEN");
    pty.send("typed-secret-42\r");
    pty.wait_for("Set secret NPM_TOKEN.");
    assert_eq!(pty.exit_code(), 0, "{}", pty.output());
    assert!(
        !pty.output().contains("typed-secret-42"),
        "{}",
        pty.output()
    );
    let puts = server.recorded().secret_puts;
    assert_eq!(
        puts,
        vec![("NPM_TOKEN".to_owned(), json!({"value": "typed-secret-42"}))]
    );
}
