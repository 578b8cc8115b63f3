//! `ultraplan-agent setup` as a real process: commands, exit statuses, the environment, the
//! virtual environment and the egress relay (with a fake proxy on a real Unix socket).

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use serde_json::json;
use tempfile::TempDir;

const FAKE_BODY: &str = "hello from the fake proxy";

struct Dirs {
    _root: TempDir,
    env: PathBuf,
    workspace: PathBuf,
    socket: PathBuf,
}

/// An env root and a workspace; `venv` pre-creates `<env>/venv` so setup makes none.
fn dirs(venv: bool) -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let (env, workspace) = (root.path().join("env"), root.path().join("workspace"));
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(&env).unwrap();
    if venv {
        std::fs::create_dir(env.join("venv")).unwrap();
    }
    let socket = root.path().join("egress.sock");
    Dirs {
        _root: root,
        env,
        workspace,
        socket,
    }
}

fn setup(dirs: &Dirs, input: &[u8], port: u16) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ultraplan-agent"))
        .arg("setup")
        .env("ULTRAPLAN_ENV", &dirs.env)
        .env("ULTRAPLAN_WORKSPACE", &dirs.workspace)
        .env("ULTRAPLAN_EGRESS_SOCKET", &dirs.socket)
        .env("ULTRAPLAN_EGRESS_PORT", port.to_string())
        .env("OUTSIDE_SECRET", "leaked-from-outside")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    // The agent stops reading past its cap; the broken pipe is expected then.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    output
}

fn run(dirs: &Dirs, input: serde_json::Value) -> Output {
    setup(dirs, input.to_string().as_bytes(), free_port())
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A fake egress proxy: answers one connection with [`FAKE_BODY`]; gives the request head.
fn fake_proxy(socket: &Path) -> mpsc::Receiver<String> {
    let listener = UnixListener::bind(socket).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{FAKE_BODY}",
            FAKE_BODY.len()
        );
        stream.write_all(response.as_bytes()).unwrap();
        let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
    });
    rx
}

#[test]
fn setup_runs_the_commands_in_order_after_a_dollar_line_each() {
    let dirs = dirs(true);
    let commands = ["echo one", "echo two >&2; echo three", "pwd"];
    let output = run(&dirs, json!({ "commands": commands }));
    let want = format!(
        "$ echo one\none\n$ echo two >&2; echo three\ntwo\nthree\n$ pwd\n{}\n",
        dirs.workspace.display()
    );
    assert_eq!(stdout(&output), want, "{}", stderr(&output));
    assert_eq!(output.status.code(), Some(0));
    assert!(dirs.env.join("home").is_dir());
    assert!(dirs.env.join("bin").is_dir());
}

#[test]
fn setup_stops_at_the_first_failure_and_exits_with_its_status() {
    let cases = [
        ("exit 7", 7),
        ("false", 1),
        ("kill -TERM $$", 143),
        ("kill -KILL $$", 137),
    ];
    for (failing, code) in cases {
        let dirs = dirs(true);
        let output = run(
            &dirs,
            json!({ "commands": ["echo before", failing, "echo after"] }),
        );
        assert_eq!(output.status.code(), Some(code), "{failing}");
        assert_eq!(
            stdout(&output),
            format!("$ echo before\nbefore\n$ {failing}\n")
        );
    }
}

#[test]
fn setup_gives_the_commands_the_input_env_over_a_clean_base() {
    let dirs = dirs(true);
    let command =
        r#"echo "$GREETING|$HOME|$ULTRAPLAN_ENV|${OUTSIDE_SECRET-unset}|${HTTP_PROXY-none}""#;
    let input = json!({
        "commands": [command],
        "env": { "GREETING": "hello there", "TOKEN": "s3cret-token-value" },
    });
    let output = run(&dirs, input);
    let env = dirs.env.display();
    let want = format!("$ {command}\nhello there|{env}/home|{env}|unset|none\n");
    assert_eq!(stdout(&output), want);
    assert_eq!(output.status.code(), Some(0));
    assert!(!stderr(&output).contains("s3cret-token-value"));
}

#[test]
fn setup_refuses_bad_input_with_the_internal_error_status() {
    let oversized = format!(
        "{}{}",
        " ".repeat(1024 * 1024),
        r#"{"commands":["echo ran"]}"#
    );
    let cases: [&[u8]; 4] = [
        b"not json",
        br#"{"commands": "s3cret-in-the-wrong-place"}"#,
        br#"{"commands": ["echo ran"], "env": {"A": 1}}"#,
        oversized.as_bytes(),
    ];
    for input in cases {
        let dirs = dirs(true);
        let output = setup(&dirs, input, free_port());
        assert_eq!(output.status.code(), Some(125));
        assert_eq!(stdout(&output), "");
        let message = stderr(&output);
        assert!(
            message.contains("ultraplan-agent setup: the setup input"),
            "{message}"
        );
        assert!(!message.contains("s3cret"), "{message}");
    }
}

#[test]
fn setup_creates_a_virtual_environment_over_the_system_python() {
    let dirs = dirs(false);
    let command = r#"python3 -c "import sys; print(sys.prefix)"; echo "$VIRTUAL_ENV""#;
    let output = run(&dirs, json!({ "commands": [command] }));
    let venv = dirs.env.join("venv");
    let text = stdout(&output);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "created the Python virtual environment {}",
            venv.display()
        )),
        "{text}"
    );
    let rest: Vec<&str> = lines.collect();
    let venv = venv.display().to_string();
    assert_eq!(
        rest,
        vec![format!("$ {command}"), venv.clone(), venv],
        "{text}"
    );

    let again = run(&dirs, json!({ "commands": ["true"] }));
    assert_eq!(stdout(&again), "$ true\n");
}

#[test]
fn setup_relays_the_proxy_variables_to_the_egress_socket() {
    let dirs = dirs(true);
    let requests = fake_proxy(&dirs.socket);
    let command = "python3 -c \"import urllib.request; print(urllib.request.urlopen(\
                   'http://example.invalid/', timeout=60).read().decode())\"";
    let output = run(&dirs, json!({ "commands": [command], "egress": true }));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("$ {command}\n{FAKE_BODY}\n"));
    let head = requests.recv().unwrap();
    assert!(
        head.starts_with("GET http://example.invalid/ HTTP/1.1\r\n"),
        "{head}"
    );
}

#[test]
fn the_relay_answers_502_when_the_egress_socket_is_missing() {
    let dirs = dirs(true);
    let command = "python3 -c \"
import urllib.request, urllib.error
try:
    urllib.request.urlopen('http://example.invalid/', timeout=60)
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())\"";
    let output = run(&dirs, json!({ "commands": [command], "egress": true }));
    let text = stdout(&output);
    assert!(
        text.contains("502 ultraplan egress relay: cannot reach the egress proxy"),
        "{text}"
    );
}

#[test]
fn setup_fails_when_the_relay_port_is_taken() {
    let dirs = dirs(true);
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let input = json!({ "commands": ["echo ran"], "egress": true }).to_string();
    let output = setup(&dirs, input.as_bytes(), port);
    assert_eq!(output.status.code(), Some(125));
    assert_eq!(stdout(&output), "");
    let message = stderr(&output);
    assert!(
        message.contains(&format!("127.0.0.1:{port} for the egress relay")),
        "{message}"
    );
}

#[test]
fn version_still_answers() {
    let output = Command::new(env!("CARGO_BIN_EXE_ultraplan-agent"))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(stderr(&output).starts_with("ultraplan-agent "));
}
