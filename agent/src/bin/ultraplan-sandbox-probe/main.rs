//! `ultraplan-sandbox-probe`: a test-only binary that the server's sandbox tests start through
//! exactly the runner specs the agent gets, to show what the sandbox lets it do.
//!
//! Reads ONE JSON line from stdin:
//!
//! ```json
//! {"connect": ["127.0.0.1:8080"], "read": ["/workspace/a"], "write": ["/workspace/x"],
//!  "env_absent": ["ANTHROPIC_API_KEY"], "exec": ["/bin/sh"]}
//! ```
//!
//! and prints ONE JSON line on stdout: `{"uid": 65534, "env": [names...], "results": [{"probe",
//! "target", "allowed", "detail"}...]}`. `allowed` says whether the attempt succeeded (for
//! `env_absent`, whether the variable is present; `env_scan` reports every variable whose name
//! contains KEY, TOKEN or SECRET). Exits 0 whatever the probes found; 2 on a malformed request.
//! `--version` prints a version line and exits, like the agent (runner selection runs it).
//!
//! Attacks on the limits (see `stress.rs`), all bounded: `"syscall": ["unshare_user", ...]`,
//! `"slurp": ["/proc/1/cmdline"]` (the contents in `detail`), `"run": [["unshare", "-U",
//! "true"]]`, `"fork_bomb": 1000`, `"memory_hog": {"children": 4, "bytes": N, "hold_ms": M}`,
//! `"fill": [{"dir": "/workspace/fill", "chunk": N, "max": M}]` and `"fds": true`. With
//! `"hold": true` the probe waits for a second line on stdin after its report, so the test can
//! look at the sandbox from the host while it still runs.
#![allow(unsafe_code)] // fork, kill, unshare, mount and friends: this binary attacks its sandbox.

mod stress;

use std::io::{BufRead, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const SECRET_MARKERS: [&str; 3] = ["KEY", "TOKEN", "SECRET"];

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("--version") {
        eprintln!("ultraplan-sandbox-probe {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let mut line = String::new();
    if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
        eprintln!("ultraplan-sandbox-probe: cannot read the request: {e}");
        return ExitCode::from(2);
    }
    let request: Value = match serde_json::from_str(line.trim()) {
        Ok(request) => request,
        Err(e) => {
            eprintln!("ultraplan-sandbox-probe: the request is not JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let report = run(&request);
    let mut stdout = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut stdout, &report)
        .map_err(std::io::Error::from)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    drop(stdout);
    if request.get("hold").and_then(Value::as_bool) == Some(true) {
        let mut release = String::new();
        let _ = std::io::stdin().lock().read_line(&mut release);
    }
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ultraplan-sandbox-probe: cannot write the report: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(request: &Value) -> Value {
    let mut results = Vec::new();
    for target in targets(request, "connect") {
        results.push(connect(&target));
    }
    for target in targets(request, "read") {
        results.push(read(&target));
    }
    for target in targets(request, "write") {
        results.push(write(&target));
    }
    for target in targets(request, "env_absent") {
        results.push(env_present(&target));
    }
    results.push(env_scan());
    for target in targets(request, "exec") {
        results.push(exec(&target));
    }
    stress_probes(request, &mut results);
    let mut env: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    env.sort();
    json!({ "uid": uid(), "env": env, "results": results })
}

fn stress_probes(request: &Value, results: &mut Vec<Value>) {
    for target in targets(request, "syscall") {
        results.push(stress::syscall(&target));
    }
    for target in targets(request, "slurp") {
        results.push(stress::slurp(&target));
    }
    for argv in request
        .get("run")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let argv: Vec<String> = argv
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect();
        results.push(stress::run(&argv));
    }
    if request.get("fds").and_then(Value::as_bool) == Some(true) {
        results.push(stress::fds());
    }
    if let Some(max) = request.get("fork_bomb").and_then(Value::as_u64) {
        results.push(stress::fork_bomb(max));
    }
    if let Some(hog) = request.get("memory_hog") {
        let number = |key: &str| hog.get(key).and_then(Value::as_u64).unwrap_or(0);
        results.push(stress::memory_hog(
            number("children"),
            number("bytes"),
            Duration::from_millis(number("hold_ms")),
        ));
    }
    for fill in request
        .get("fill")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let dir = fill
            .get("dir")
            .and_then(Value::as_str)
            .unwrap_or("/nonexistent");
        let number = |key: &str| fill.get(key).and_then(Value::as_u64).unwrap_or(0);
        results.push(stress::fill(dir, number("chunk"), number("max")));
    }
}

fn targets(request: &Value, probe: &str) -> Vec<String> {
    request
        .get(probe)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn result(probe: &str, target: &str, allowed: bool, detail: impl Into<String>) -> Value {
    json!({ "probe": probe, "target": target, "allowed": allowed, "detail": detail.into() })
}

fn connect(target: &str) -> Value {
    let addr: SocketAddr = match target.parse() {
        Ok(addr) => addr,
        Err(e) => return result("connect", target, false, format!("bad address: {e}")),
    };
    match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
        Ok(stream) => {
            let local = stream
                .local_addr()
                .map_or_else(|e| format!("unknown ({e})"), |a| a.to_string());
            result("connect", target, true, format!("connected from {local}"))
        }
        Err(e) => result("connect", target, false, e.to_string()),
    }
}

fn read(target: &str) -> Value {
    match std::fs::read(target) {
        Ok(bytes) => result("read", target, true, format!("read {} bytes", bytes.len())),
        Err(e) => result("read", target, false, e.to_string()),
    }
}

fn write(target: &str) -> Value {
    match std::fs::write(target, b"written by ultraplan-sandbox-probe\n") {
        Ok(()) => {
            let cleanup = match std::fs::remove_file(target) {
                Ok(()) => "then removed".to_owned(),
                Err(e) => format!("not removed: {e}"),
            };
            result("write", target, true, format!("written, {cleanup}"))
        }
        Err(e) => result("write", target, false, e.to_string()),
    }
}

fn env_present(name: &str) -> Value {
    let present = std::env::var_os(name).is_some();
    let detail = if present { "present" } else { "absent" };
    result("env_absent", name, present, detail)
}

fn env_scan() -> Value {
    let found: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .filter(|name| {
            let upper = name.to_ascii_uppercase();
            SECRET_MARKERS.iter().any(|m| upper.contains(m))
        })
        .collect();
    let detail = if found.is_empty() {
        "no variable name contains KEY, TOKEN or SECRET".to_owned()
    } else {
        found.join(",")
    };
    result(
        "env_scan",
        "*KEY*|*TOKEN*|*SECRET*",
        !found.is_empty(),
        detail,
    )
}

fn exec(target: &str) -> Value {
    let status = Command::new(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(status) => result("exec", target, true, format!("ran: {status}")),
        Err(e) => result("exec", target, false, e.to_string()),
    }
}

/// The real uid from `/proc/self/status` (`Uid:\treal\teffective\tsaved\tfs`).
fn uid() -> Value {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Value::Null;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|uid| uid.parse::<u64>().ok())
        .map_or(Value::Null, Value::from)
}
