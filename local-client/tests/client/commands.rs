//! The session commands against the scripted server: login and configuration precedence,
//! status, list, open, stop, approve, reject, teleport, pull of a teleported plan (the patch
//! of an executed plan: tests/client/pull.rs), and the teleport-back hint.

use std::os::unix::fs::PermissionsExt;

use crate::support::server::{Config, SESSION_ID, Server, plan};
use crate::support::{Home, events, git_repo, state_json};

fn out_text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A port nothing listens on.
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

fn with_token(token: &str) -> Config {
    Config {
        token: Some(token.into()),
        ..Config::default()
    }
}

#[test]
fn login_saves_a_private_config_that_later_commands_use() {
    let home = Home::new();
    let server = Server::start(with_token("good"), vec![]);
    let url = format!("{}/", server.url);
    home.cmd(home.path())
        .args(["login", "--server", &url, "--token", "good"])
        .assert()
        .success();
    let path = home.config().join("ultraplan/config.toml");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!("server = \"{}\"", server.url)),
        "{text}"
    );
    let out = home
        .cmd(home.path())
        .args(["list", "--json"])
        .assert()
        .success();
    let list: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(list["data"][0]["id"], SESSION_ID);
}

#[test]
fn login_refuses_a_token_the_server_rejects() {
    let home = Home::new();
    let server = Server::start(with_token("good"), vec![]);
    let out = home
        .cmd(home.path())
        .args(["login", "--server", &server.url, "--token", "bad"])
        .assert()
        .code(1);
    assert!(
        out_text(out.get_output())
            .1
            .contains("does not accept this token")
    );
    assert!(!home.config().join("ultraplan/config.toml").exists());
}

#[test]
fn flags_beat_env_beat_file() {
    let home = Home::new();
    let server = Server::start(with_token("good"), vec![]);
    let dead = dead_url();
    std::fs::create_dir_all(home.config().join("ultraplan")).unwrap();
    std::fs::write(
        home.config().join("ultraplan/config.toml"),
        format!("server = \"{dead}\"\ntoken = \"bad\"\n"),
    )
    .unwrap();
    let list = |cmd: &mut assert_cmd::Command| cmd.args(["list", "--json"]).assert();
    list(home.cmd(home.path()).env("ULTRAPLAN_SERVER", &server.url)).code(1);
    list(
        home.cmd(home.path())
            .env("ULTRAPLAN_SERVER", &server.url)
            .env("ULTRAPLAN_TOKEN", "good"),
    )
    .success();
    list(
        home.cmd(home.path())
            .env("ULTRAPLAN_SERVER", &dead)
            .env("ULTRAPLAN_TOKEN", "bad")
            .args(["--server", &server.url, "--token", "good"]),
    )
    .success();
}

#[test]
fn status_shows_the_pill_elapsed_and_tokens_from_the_state_file() {
    let home = Home::new();
    let mut state = state_json(SESSION_ID, "http://127.0.0.1:9", None);
    state["pill"] = "◆ ultraplan ready".into();
    state["phase"] = "plan_ready".into();
    state["usage"] = serde_json::json!({"input_tokens": 12000, "output_tokens": 345});
    home.write_state(&state);
    let out = home.cmd(home.path()).arg("status").assert().success();
    let (stdout, _) = out_text(out.get_output());
    let first = stdout.lines().next().unwrap();
    assert!(first.starts_with("◆ ultraplan ready · "), "{stdout}");
    assert!(first.ends_with(" · 12.3k tokens"), "{stdout}");
    assert!(stdout.contains("/sessions/sess-1"), "{stdout}");
    let out = home
        .cmd(home.path())
        .args(["status", SESSION_ID, "--json"])
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["pill"], "◆ ultraplan ready");
}

#[test]
fn status_of_an_unknown_local_session_asks_the_server() {
    let home = Home::new();
    let server = Server::start(Config::default(), vec![]);
    let out = home
        .cmd(home.path())
        .args(["--server", &server.url, "status", SESSION_ID])
        .assert()
        .success();
    let (stdout, _) = out_text(out.get_output());
    assert!(stdout.starts_with("◇ ultraplan"), "{stdout}");
    assert!(stdout.contains("1.2k tokens"), "{stdout}");
}

#[test]
fn list_prints_a_table_and_open_prints_the_url() {
    let home = Home::new();
    let server = Server::start(Config::default(), vec![]);
    let out = home
        .cmd(home.path())
        .args(["--server", &server.url, "list"])
        .assert()
        .success();
    let (stdout, _) = out_text(out.get_output());
    assert!(stdout.starts_with("ID "), "{stdout}");
    assert!(stdout.contains("sess-1  idle"), "{stdout}");
    assert!(stdout.contains("fix the auth flow"), "{stdout}");
    let out = home
        .cmd(home.path())
        .args(["--server", &server.url, "open", SESSION_ID])
        .assert()
        .success();
    assert_eq!(
        out_text(out.get_output()).0,
        format!("{}/sessions/sess-1\n", server.url)
    );
}

#[test]
fn stop_needs_yes_without_a_terminal_and_archives() {
    let home = Home::new();
    let server = Server::start(Config::default(), vec![]);
    home.write_state(&state_json(SESSION_ID, &server.url, None));
    let out = home
        .cmd(home.path())
        .args(["--server", &server.url, "stop", SESSION_ID])
        .assert()
        .code(1);
    assert!(out_text(out.get_output()).1.contains("pass --yes"));
    assert_eq!(server.recorded().archives, 0);
    let stop = || {
        home.cmd(home.path())
            .args(["--server", &server.url, "stop", SESSION_ID, "--yes"])
            .assert()
            .success()
    };
    assert!(
        out_text(stop().get_output())
            .0
            .contains("Stopped and archived")
    );
    assert!(
        out_text(stop().get_output()).0.contains("already archived"),
        "409 is success"
    );
    let state = home.read_state(SESSION_ID).unwrap();
    assert_eq!(state["failure"], "stopped");
    assert_eq!(state["archived"], true);
}

#[test]
fn approve_and_reject_decide_the_pending_plan() {
    let home = Home::new();
    let config = Config {
        plans: vec![plan("t1", 1, "rejected"), plan("t2", 2, "pending")],
        ..Config::default()
    };
    let server = Server::start(config, vec![]);
    let run = |args: &[&str]| {
        home.cmd(home.path())
            .args(["--server", &server.url])
            .args(args)
            .assert()
            .success()
    };
    assert!(
        out_text(run(&["approve", SESSION_ID]).get_output())
            .0
            .contains("revision 2")
    );
    run(&["reject", SESSION_ID, "-m", "add tests"]);
    let decisions = server.recorded().decisions;
    assert_eq!(decisions[0].0, "t2");
    assert_eq!(decisions[0].1, serde_json::json!({"decision": "approve"}));
    assert_eq!(
        decisions[1].1,
        serde_json::json!({"decision": "reject", "feedback": "add tests"})
    );
}

#[test]
fn deciding_without_a_pending_plan_or_against_another_decision_is_clear() {
    let home = Home::new();
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "approved")],
            ..Config::default()
        },
        vec![],
    );
    let out = home
        .cmd(home.path())
        .args(["--server", &server.url, "teleport", SESSION_ID])
        .assert()
        .code(1);
    let (_, stderr) = out_text(out.get_output());
    assert!(stderr.contains("no plan is waiting for review"), "{stderr}");
    assert!(stderr.contains("already approved"), "{stderr}");

    let conflicted = Server::start(
        Config {
            plans: vec![plan("t1", 1, "pending")],
            decision_conflict: true,
            ..Config::default()
        },
        vec![],
    );
    let out = home
        .cmd(home.path())
        .args(["--server", &conflicted.url, "approve", SESSION_ID])
        .assert()
        .code(1);
    let (_, stderr) = out_text(out.get_output());
    assert!(
        stderr.contains("another decision already stands"),
        "{stderr}"
    );
}

#[test]
fn teleport_records_the_plan_and_without_a_terminal_only_hints() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "pending")],
            ..Config::default()
        },
        vec![],
    );
    let out = home
        .cmd(&repo)
        .args(["--server", &server.url, "teleport", SESSION_ID])
        .assert()
        .success();
    let (stdout, stderr) = out_text(out.get_output());
    assert!(stdout.contains("Teleported plan revision 1"), "{stdout}");
    assert!(
        stderr.contains(&format!("ultraplan pull {SESSION_ID}")),
        "{stderr}"
    );
    assert!(stderr.contains(".ultraplan/plans/"), "{stderr}");
    let state = home.read_state(SESSION_ID).unwrap();
    assert_eq!(state["outcome"], "teleport");
    assert_eq!(state["plan"], events::PLAN);
    assert_eq!(server.recorded().archives, 0, "nothing chosen yet");

    // Any later command repeats the hint without blocking.
    let out = home.cmd(&repo).arg("status").assert().success();
    assert!(
        out_text(out.get_output())
            .1
            .contains("was teleported back and waits")
    );
}

#[test]
fn pull_saves_prints_and_archives_a_teleported_plan() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(
        Config {
            plans: vec![plan("t1", 1, "teleported")],
            ..Config::default()
        },
        vec![],
    );
    home.write_state(&state_json(SESSION_ID, &server.url, Some(&repo)));
    let out = home
        .cmd(home.path())
        .args(["--server", &server.url, "pull", SESSION_ID])
        .assert()
        .success();
    let (stdout, stderr) = out_text(out.get_output());
    assert_eq!(stdout, format!("{}\n", events::PLAN));
    let dir = repo.join(".ultraplan/plans");
    let saved: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(saved.len(), 1);
    let name = saved[0].file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(&name[10..], "-fix-the-auth-flow.md", "{name}");
    assert!(
        name[..10].chars().all(|c| c.is_ascii_digit() || c == '-'),
        "{name}"
    );
    assert_eq!(
        std::fs::read_to_string(&saved[0]).unwrap(),
        format!("{}\n", events::PLAN)
    );
    assert!(stderr.contains(&saved[0].display().to_string()), "{stderr}");
    assert_eq!(server.recorded().archives, 1);
    let state = home.read_state(SESSION_ID).unwrap();
    assert_eq!(state["handled"], "pull");
    assert_eq!(state["archived"], true);
}
