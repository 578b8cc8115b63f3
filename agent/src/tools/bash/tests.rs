//! Bash tool tests. They run real commands (bash and coreutils are on every test machine);
//! waits are hang guards only, no test asserts on durations.

use std::time::{Duration, Instant};

use serde_json::json;

use super::group::signal_process;
use super::*;
use crate::test_support::tree;

/// Longest wait for a process to disappear; reaching it fails the test.
const HANG_GUARD: Duration = Duration::from_secs(20);

fn workspace() -> (tempfile::TempDir, Workspace) {
    let dir = tree(&[("src/a.rs", b"fn a() {}\n")]);
    let ws = Workspace::new(dir.path()).expect("workspace");
    (dir, ws)
}

async fn bash(ws: &Workspace, input: Value) -> ToolOutput {
    run(ws, input, &LiveGroups::default()).await
}

/// The state letter of `/proc/<pid>/stat` and the process group, if the process exists.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgrp = fields.nth(1)?.parse().ok()?;
    Some((state, pgrp))
}

/// Whether `pid` runs (a zombie waiting to be reaped counts as gone).
fn alive(pid: i32) -> bool {
    signal_process(pid, 0).is_ok() && proc_stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// Live (non-zombie) processes of the group `pgid`.
fn members(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| proc_stat(pid).is_some_and(|(state, pgrp)| pgrp == pgid && state != 'Z'))
        .collect()
}

/// Polls until `done` holds; fails after the hang guard.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < HANG_GUARD, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn commands_report_output_and_exit_status() {
    let (_dir, ws) = workspace();
    // (command, is_error, every needle expected in the output)
    let cases: [(&str, bool, &[&str]); 8] = [
        ("echo hello", false, &["hello"]),
        ("true", false, &["(no output)"]),
        ("cat", false, &["(no output)"]),
        (
            "echo out; echo err >&2; exit 2",
            true,
            &["out", "err", "Exit code 2"],
        ),
        ("ls src", false, &["a.rs"]),
        ("printf 'bad \\377 byte'", false, &["bad \u{fffd} byte"]),
        ("kill -TERM $$", true, &["Killed by signal 15 (SIGTERM)"]),
        ("sleep 1000 & echo started", false, &["started"]),
    ];
    for (command, is_error, needles) in cases {
        let out = bash(&ws, json!({"command": command, "timeout": 60_000})).await;
        assert_eq!(out.is_error, is_error, "{command}: {}", out.content);
        for needle in needles {
            assert!(out.content.contains(needle), "{command}: {}", out.content);
        }
    }
    let out = bash(&ws, json!({"command": "exit 3"})).await;
    assert_eq!(out.content, "Exit code 3");
}

#[tokio::test]
async fn every_call_starts_in_the_workspace_root() {
    let (_dir, ws) = workspace();
    let out = bash(&ws, json!({"command": "cd /tmp && pwd"})).await;
    assert_eq!(out.content, "/tmp");
    let out = bash(&ws, json!({"command": "pwd"})).await;
    assert_eq!(out.content, ws.root().display().to_string());
}

#[tokio::test]
async fn the_environment_is_cleared() {
    let (_dir, ws) = workspace();
    let out = bash(&ws, json!({"command": "env"})).await;
    assert!(!out.is_error, "{}", out.content);
    let lines: Vec<&str> = out.content.lines().collect();
    for (key, value) in process::SHELL_ENV {
        let line = format!("{key}={value}");
        assert!(lines.contains(&line.as_str()), "{line} missing: {lines:?}");
    }
    // Only the variables set on purpose, plus the ones the shell sets itself.
    let own = ["PWD", "SHLVL", "_", "OLDPWD"];
    for line in &lines {
        let name = line.split('=').next().unwrap_or_default();
        let expected = process::SHELL_ENV.iter().any(|(k, _)| *k == name) || own.contains(&name);
        assert!(expected, "unexpected variable {line}");
    }
    let leaked = std::env::vars().find(|(name, _)| {
        !own.contains(&name.as_str())
            && !process::SHELL_ENV.iter().any(|(k, _)| k == name)
            && lines.iter().any(|l| l.starts_with(&format!("{name}=")))
    });
    assert_eq!(leaked, None);
}

#[tokio::test]
async fn long_output_keeps_its_head_and_tail() {
    let (_dir, ws) = workspace();
    let out = bash(&ws, json!({"command": "seq 1 200000"})).await;
    assert!(!out.is_error);
    assert!(
        out.content.starts_with("1\n2\n3\n"),
        "{}",
        &out.content[..20]
    );
    assert!(out.content.ends_with("\n199999\n200000"));
    assert!(out.content.contains("characters of output cut here"));
    assert!(out.content.chars().count() < MAX_OUTPUT_CHARS + 100);
}

#[tokio::test]
async fn timeouts_kill_the_whole_process_group() {
    let (_dir, ws) = workspace();
    // Each command prints the pid of a process that would run forever.
    let cases = [
        "echo $$; exec sleep 1000",
        "sleep 1000 & echo $!; wait",
        "(sleep 1000; echo never) & echo $!; sleep 1000 | cat",
    ];
    for command in cases {
        let live = LiveGroups::default();
        let out = run(&ws, json!({"command": command, "timeout": 300}), &live).await;
        assert!(out.is_error, "{command}");
        let (head, pid) = out.content.split_once("\n\n").expect("message and output");
        assert_eq!(head, "Command timed out after 300 ms and was killed.");
        let pid: i32 = pid.trim().parse().expect("a pid");
        eventually(command, || !alive(pid)).await;
        assert!(live.list().is_empty(), "{command}");
    }
}

#[tokio::test]
async fn plain_sleep_times_out_and_its_group_is_gone() {
    let (_dir, ws) = workspace();
    for command in ["sleep 1000", "sleep 1000 & wait"] {
        let live = LiveGroups::default();
        let task = {
            let (ws, live) = (ws.clone(), live.clone());
            tokio::spawn(async move {
                run(&ws, json!({"command": command, "timeout": 300}), &live).await
            })
        };
        eventually("the group is listed", || !live.list().is_empty()).await;
        let pgid = live.list()[0];
        let out = task.await.expect("join");
        assert!(
            out.content
                .starts_with("Command timed out after 300 ms and was killed."),
            "{command}: {}",
            out.content
        );
        eventually(command, || members(pgid).is_empty()).await;
    }
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let (_dir, ws) = workspace();
    let live = LiveGroups::default();
    let task = {
        let (ws, live) = (ws.clone(), live.clone());
        tokio::spawn(async move {
            let input = json!({"command": "sleep 1000 & sleep 1000 | cat; wait"});
            run(&ws, input, &live).await
        })
    };
    eventually("the group is listed", || !live.list().is_empty()).await;
    let pgid = live.list()[0];
    eventually("the pipeline started", || members(pgid).len() >= 3).await;
    task.abort();
    assert!(task.await.is_err(), "cancelled");
    eventually("the group is killed", || members(pgid).is_empty()).await;
    assert!(live.list().is_empty());
}

#[tokio::test]
async fn kill_all_stops_running_commands() {
    let (_dir, ws) = workspace();
    let live = LiveGroups::default();
    let task = {
        let (ws, live) = (ws.clone(), live.clone());
        tokio::spawn(async move { run(&ws, json!({"command": "sleep 1000"}), &live).await })
    };
    eventually("the group is listed", || !live.list().is_empty()).await;
    let pgid = live.list()[0];
    live.kill_all();
    let out = task.await.expect("join");
    assert!(
        out.content.contains("Killed by signal 9 (SIGKILL)"),
        "{}",
        out.content
    );
    eventually("the group is killed", || members(pgid).is_empty()).await;
}

#[tokio::test]
async fn invalid_inputs_and_missing_shells_are_reported() {
    let (_dir, ws) = workspace();
    let cases = [
        (json!({}), "missing field `command`"),
        (json!({"command": "  "}), "`command` is empty"),
        (json!({"command": "ls", "timeout": 0}), "at least 1 ms"),
        (json!({"command": "ls", "timeout": -5}), "field `timeout`"),
        (json!({"command": "ls", "cwd": "/"}), "unknown field `cwd`"),
    ];
    for (input, needle) in cases {
        let out = bash(&ws, input.clone()).await;
        assert!(
            out.is_error && out.content.contains(needle),
            "{input}: {}",
            out.content
        );
    }
    let live = LiveGroups::default();
    let input = json!({"command": "ls"});
    let out = run_with_shells(&ws, input, &live, &["/nonexistent/bash", "/nonexistent/sh"]).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("The sandbox has no shell"),
        "{}",
        out.content
    );
    let described = json!({"command": "echo hi", "description": "Say hi", "timeout": 900_000});
    assert_eq!(bash(&ws, described).await.content, "hi");
}

#[test]
fn a_bound_environment_comes_first_on_path() {
    let root = tempfile::tempdir().expect("tempdir");
    let none = process::shell_env(None);
    assert_eq!(none.len(), process::SHELL_ENV.len());
    let bare = process::shell_env(Some(root.path()));
    let get = |vars: &[(String, String)], key: &str| {
        vars.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    };
    assert_eq!(
        get(&bare, "PATH").as_deref(),
        Some("/usr/local/bin:/usr/bin:/bin")
    );
    assert_eq!(get(&bare, "VIRTUAL_ENV"), None, "no venv, none claimed");
    std::fs::create_dir_all(root.path().join("venv/bin")).expect("venv");
    std::fs::create_dir_all(root.path().join("bin")).expect("bin");
    let full = process::shell_env(Some(root.path()));
    let r = root.path().display();
    assert_eq!(
        get(&full, "PATH"),
        Some(format!("{r}/venv/bin:{r}/bin:/usr/local/bin:/usr/bin:/bin"))
    );
    assert_eq!(get(&full, "VIRTUAL_ENV"), Some(format!("{r}/venv")));
    assert_eq!(get(&full, "ULTRAPLAN_ENV"), Some(r.to_string()));
}
