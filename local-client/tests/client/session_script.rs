//! The scriptable session commands through the real binary: `logs` (once and following),
//! `wait` and its exit codes, and the `--json` shapes of `logs`, `wait`, `status` and `list`,
//! against the scripted server. `message` is in tests/client/session_message.rs.

use serde_json::Value;

use crate::support::Home;
use crate::support::events::{self, PLAN};
use crate::support::server::{Config, Reply, SESSION_ID, Server, finished};

/// Text no terminal should receive raw.
const HOSTILE: &str = "look\u{1b}]52;c;ZXZpbA==\u{7} here\u{1b}[2J\u{9b}31m now\u{202e}";

fn run(server: &Server, args: &[&str]) -> std::process::Output {
    let home = Home::new();
    home.cmd(home.path())
        .env("ULTRAPLAN_POLL_INTERVAL_MS", "10")
        .args(["--server", &server.url])
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn assert_clean(text: &str) {
    assert!(
        !text.chars().any(|c| c == '\u{1b}'
            || c == '\u{7}'
            || ('\u{80}'..='\u{9f}').contains(&c)
            || c == '\u{202e}'),
        "raw control in {text:?}"
    );
}

fn session_events() -> Vec<Reply> {
    vec![Reply::Page(
        vec![
            events::text(HOSTILE),
            events::plan_call("p1"),
            events::rejected("p1"),
        ],
        "running",
    )]
}

#[test]
fn logs_prints_the_timeline_sanitised() {
    let server = Server::start(Config::default(), session_events());
    let out = run(&server, &["logs", SESSION_ID]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert_clean(&text);
    let lines: Vec<&str> = text.lines().map(|l| &l[9..]).collect();
    assert_eq!(
        lines,
        [
            "agent     look here now",
            "plan      ready for review: Plan (4 lines)",
            "decision  rejected: cover the error path",
        ]
    );
    let recorded = server.recorded();
    assert!(
        recorded.requests.iter().all(|r| !r.contains("wait=")),
        "no long poll without -f: {:?}",
        recorded.requests
    );
}

#[test]
fn logs_json_is_one_stable_object_per_line() {
    let server = Server::start(Config::default(), session_events());
    let out = run(&server, &["logs", SESSION_ID, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert_clean(&text);
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records[1]["text"], PLAN);
    insta::assert_json_snapshot!("logs_json", records);
}

#[test]
fn logs_follow_prints_events_as_they_come_and_returns_when_the_session_ends() {
    let endings = [
        Reply::Page(vec![], "archived"),
        Reply::Page(vec![events::terminated("error_max_turns")], "idle"),
    ];
    for ending in endings {
        let script = vec![
            Reply::Page(vec![events::text("first")], "running"),
            Reply::Page(vec![], "running"),
            Reply::More(vec![events::text("second")]),
            Reply::Page(vec![events::plan_call("p1")], "requires_action"),
            Reply::Page(vec![], "requires_action"),
            ending,
        ];
        let server = Server::start(Config::default(), script);
        let out = run(&server, &["logs", "-f", SESSION_ID]);
        assert!(out.status.success(), "{out:?}");
        let text = stdout(&out);
        let first = text.find("agent     first").expect(&text);
        let second = text.find("agent     second").expect(&text);
        let plan = text.find("ready for review").expect(&text);
        assert!(first < second && second < plan, "{text}");
        let recorded = server.recorded();
        assert!(
            recorded.requests.iter().any(|r| r.contains("wait=3")),
            "following long-polls: {:?}",
            recorded.requests
        );
        assert_eq!(recorded.archives, 0, "logs never archives");
    }
}

#[test]
fn wait_until_plan_returns_once_the_plan_is_ready() {
    let script = vec![
        Reply::Page(vec![events::text("reading")], "running"),
        Reply::Page(vec![], "running"),
        Reply::Page(vec![events::plan_call("p1")], "requires_action"),
    ];
    let server = Server::start(Config::default(), script);
    let out = run(&server, &["wait", SESSION_ID, "--until", "plan", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: Value = serde_json::from_str(stdout(&out).trim()).unwrap();
    insta::assert_json_snapshot!("wait_json", report);
    assert_eq!(server.recorded().archives, 0, "wait never archives");
}

/// A name, the server's configuration and script, `wait`'s extra arguments, the exit code and
/// what the output says.
type Case = (
    &'static str,
    Config,
    Vec<Reply>,
    Vec<&'static str>,
    i32,
    &'static str,
);

#[test]
fn wait_exit_codes_tell_how_it_went() {
    let approved = || {
        vec![Reply::Page(
            vec![events::plan_call("p1"), events::approved("p1")],
            "running",
        )]
    };
    let cases: Vec<Case> = vec![
        (
            "decided",
            Config::default(),
            approved(),
            vec!["--until", "decided"],
            0,
            "reached a decision",
        ),
        (
            "done after execution",
            Config {
                executions: vec![finished()],
                ..Config::default()
            },
            approved(),
            vec!["--until", "done"],
            0,
            "reached the end of the work",
        ),
        (
            "archived first",
            Config::default(),
            vec![Reply::Page(vec![events::text("hm")], "archived")],
            vec![],
            4,
            "ended before a plan: it is archived",
        ),
        (
            "agent died",
            Config::default(),
            vec![Reply::Page(
                vec![events::terminated("error_budget")],
                "idle",
            )],
            vec!["--until", "decided"],
            4,
            "its agent ended (error_budget)",
        ),
        (
            "rejected is not decided",
            Config::default(),
            vec![Reply::Page(
                vec![events::plan_call("p1"), events::rejected("p1")],
                "running",
            )],
            vec!["--until", "decided", "--timeout", "1"],
            3,
            "Timed out waiting for a decision",
        ),
        (
            "marker missing",
            Config::default(),
            vec![Reply::Page(
                vec![
                    events::plan_call("p1"),
                    events::approved_without_marker("p1"),
                ],
                "running",
            )],
            vec![],
            1,
            "plan decisions",
        ),
    ];
    for (name, config, script, extra, code, says) in cases {
        let server = Server::start(config, script);
        let mut args = vec!["wait", SESSION_ID];
        args.extend(extra);
        let out = run(&server, &args);
        let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(code), "{name}: {all}");
        assert!(all.contains(says), "{name}: {all}");
    }
}

#[test]
fn unknown_sessions_and_bad_arguments_are_errors_with_their_own_codes() {
    let server = Server::start(Config::default(), vec![]);
    for args in [
        &["wait", "nope"][..],
        &["logs", "nope"],
        &["logs", "-f", "nope"],
    ] {
        let out = run(&server, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no session nope"), "{args:?}: {err}");
    }
    let out = run(&server, &["wait", SESSION_ID, "--until", "later"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn status_and_list_json_shapes_are_unchanged() {
    let server = Server::start(Config::default(), vec![]);
    let out = run(&server, &["status", SESSION_ID, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("status_json", status, {
        ".url" => "[url]", ".created_at" => "[time]", ".updated_at" => "[time]"
    });
    let out = run(&server, &["list", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    insta::assert_json_snapshot!("list_json", list, {
        ".data[].url" => "[url]", ".data[].created_at" => "[time]", ".data[].updated_at" => "[time]"
    });
}
