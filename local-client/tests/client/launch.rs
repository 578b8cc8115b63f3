//! `ultraplan launch` against the scripted server: eligibility, confirmation rules, the
//! deduplicated upload, the create-session request, and the detached poller.

use std::time::{Duration, Instant};

use crate::support::server::{Config, Reply, SESSION_ID, Server};
use crate::support::{Home, events, git_repo};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn launch_uploads_once_then_dedupes() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(Config::default(), vec![]);
    let launch = || {
        home.cmd(&repo)
            .args(["--server", &server.url, "--token", "t"])
            .args([
                "launch",
                "--yes",
                "--no-watch",
                "please ultraplan fix the login bug",
            ])
            .assert()
            .success()
    };
    let first = launch();
    let first = first.get_output();
    assert!(stdout(first).contains(&format!("{}/sessions/{SESSION_ID}", server.url)));
    assert!(
        !stderr(first).contains("bundle unchanged"),
        "{}",
        stderr(first)
    );
    let recorded = server.recorded();
    assert_eq!((recorded.heads, recorded.puts), (1, 1));

    let second = launch();
    assert!(stderr(second.get_output()).contains("bundle unchanged, not uploaded"));
    let recorded = server.recorded();
    assert_eq!(
        (recorded.heads, recorded.puts),
        (2, 1),
        "HEAD 200 means no PUT"
    );
    assert_eq!(recorded.created.len(), 2);
    assert_eq!(
        recorded.created[0]["bundle_id"],
        recorded.created[1]["bundle_id"]
    );
}

#[test]
fn the_session_request_carries_plan_mode_prompt_and_repo_state() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(Config::default(), vec![]);
    let out = home
        .cmd(&repo.join("src"))
        .env("ULTRAPLAN_SERVER", &server.url)
        .args(["--yes", "--no-watch", "--json", "ultraplan", "fix", "auth"])
        .assert()
        .success();
    let session: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(session["id"], SESSION_ID);
    assert_eq!(session["type"], "session");
    let created = &server.recorded().created[0];
    assert_eq!(created["title"], "plan fix auth");
    assert_eq!(created["events"][0]["type"], "control_request");
    assert_eq!(created["events"][0]["request"]["mode"], "plan");
    assert_eq!(created["events"][0]["request"]["ultraplan"], true);
    assert_eq!(created["events"][1]["message"]["content"], "plan fix auth");
    let ctx = &created["session_context"];
    assert_eq!(ctx["base"]["branch"], "main");
    assert_eq!(ctx["base"]["dirty"], true, "notes.txt is untracked");
    assert_eq!(ctx["base"]["commit"].as_str().unwrap().len(), 40);
    assert_eq!(ctx["repo"], "repo");
    assert_eq!(ctx["manifest"]["untracked_files"][0], "notes.txt");
    assert!(ctx.get("draft_plan").is_none());
    let state = home.read_state(SESSION_ID).unwrap();
    assert_eq!(state["repo_root"], repo.to_str().unwrap());
    assert_eq!(
        state["pid"],
        serde_json::Value::Null,
        "--no-watch starts no poller"
    );
}

#[test]
fn refine_sends_the_draft_plan() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let draft = home.path().join("PLAN.md");
    std::fs::write(&draft, "# Draft\n- step").unwrap();
    let server = Server::start(Config::default(), vec![]);
    home.cmd(&repo)
        .env("ULTRAPLAN_SERVER", &server.url)
        .env("ULTRAPLAN_NO_WATCH", "1")
        .arg("launch")
        .arg("--yes")
        .arg("--refine")
        .arg(&draft)
        .assert()
        .success();
    let created = &server.recorded().created[0];
    assert_eq!(created["session_context"]["draft_plan"], "# Draft\n- step");
    assert!(
        created["events"][1]["message"]["content"]
            .as_str()
            .unwrap()
            .contains("Refine")
    );
}

#[test]
fn not_eligible_prints_every_reason_and_launches_nothing() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let config = Config {
        eligible: false,
        reasons: vec![
            serde_json::json!({"code": "no_runner", "message": "No sandbox runner is available."}),
            serde_json::json!({"code": "no_model", "message": "ANTHROPIC_API_KEY is not set."}),
        ],
        ..Config::default()
    };
    let server = Server::start(config, vec![]);
    let out = home
        .cmd(&repo)
        .args(["--server", &server.url, "--yes", "fix auth"])
        .assert()
        .code(1);
    let err = stderr(out.get_output());
    assert!(
        err.contains("No sandbox runner is available. (no_runner)"),
        "{err}"
    );
    assert!(
        err.contains("ANTHROPIC_API_KEY is not set. (no_model)"),
        "{err}"
    );
    let recorded = server.recorded();
    assert_eq!((recorded.heads, recorded.created.len()), (0, 0));
}

#[test]
fn without_a_terminal_launch_needs_yes() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(Config::default(), vec![]);
    let out = home
        .cmd(&repo)
        .args(["--server", &server.url, "fix auth"])
        .assert()
        .code(1);
    assert!(
        stderr(out.get_output()).contains("Pass --yes"),
        "{}",
        stderr(out.get_output())
    );
    assert!(server.recorded().created.is_empty());
}

#[test]
fn launch_starts_a_detached_poller_that_records_the_outcome() {
    let home = Home::new();
    let repo = git_repo(home.path());
    let server = Server::start(
        Config::default(),
        vec![
            Reply::Page(vec![events::plan_call("t1")], "requires_action"),
            Reply::Page(vec![events::approved("t1")], "running"),
        ],
    );
    let out = home
        .cmd(&repo)
        .env("ULTRAPLAN_POLL_INTERVAL_MS", "10")
        .args(["--server", &server.url, "--token", "t", "--yes", "fix auth"])
        .assert()
        .success();
    assert!(stdout(out.get_output()).contains("ultraplan status sess-1"));
    let state = wait_for_outcome(&home);
    assert_eq!(state["outcome"], "approved");
    assert!(state["pid"].as_u64().is_some());
    assert_eq!(state["plan"], events::PLAN);
    assert_eq!(server.recorded().archives, 0);
    assert!(home.sessions().join("sess-1.log").exists());
}

/// Waits for the detached poller to finish (bounded so a broken poller fails the test).
fn wait_for_outcome(home: &Home) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(state) = home.read_state(SESSION_ID)
            && !state["outcome"].is_null()
        {
            return state;
        }
        assert!(Instant::now() < deadline, "the poller never finished");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// zstd when the server advertises it, gzip when it does not (a server that predates the
/// field) or lists only gzip; the Content-Type always says what the bytes are.
#[test]
fn launch_compresses_with_what_the_server_accepts() {
    const ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    const GZIP: [u8; 2] = [0x1f, 0x8b];
    type Case<'a> = (Option<&'a [&'a str]>, &'a str, &'a [u8]);
    let cases: [Case; 4] = [
        (None, "application/gzip", &GZIP),
        (Some(&["gzip"]), "application/gzip", &GZIP),
        (Some(&["zstd", "gzip"]), "application/zstd", &ZSTD),
        (Some(&["gzip", "zstd"]), "application/zstd", &ZSTD),
    ];
    for (advertised, content_type, magic) in cases {
        let home = Home::new();
        let repo = git_repo(home.path());
        let config = Config {
            bundle_encodings: advertised.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
            ..Config::default()
        };
        let server = Server::start(config, vec![]);
        home.cmd(&repo)
            .args(["--server", &server.url, "--token", "t"])
            .args(["launch", "--yes", "--no-watch", "fix the login bug"])
            .assert()
            .success();
        let recorded = server.recorded();
        let [(sent_type, sent_magic)] = recorded.put_bodies.as_slice() else {
            panic!(
                "{advertised:?}: one PUT expected, got {:?}",
                recorded.put_bodies
            );
        };
        assert_eq!(sent_type, content_type, "{advertised:?}");
        assert!(
            sent_magic.starts_with(magic),
            "{advertised:?}: {sent_magic:?}"
        );
    }
}
