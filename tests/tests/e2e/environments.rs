//! Execution environments end to end: a Python project whose tests import a package that only
//! a package index on 127.0.0.1 serves. The real client launches; setup installs the package
//! through the egress proxy (a second, unlisted port is refused and listed as blocked); the
//! executing agent's Bash runs the tests against the snapshot with no network and no secret;
//! a second session reuses the snapshot. Failing and hanging setups end the session with
//! their log tail, exit code or time limit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

use serde_json::{Value, json};
use ultraplan_protocol::constants::{
    ENVIRONMENT_FAILED, ENVIRONMENT_OUTPUT, ENVIRONMENT_READY, ENVIRONMENT_REUSED,
    ENVIRONMENT_SETUP, ERROR_ENVIRONMENT,
};
use ultraplan_protocol::events::{Event, EventBody, SystemEvent};
use ultraplan_protocol::verdict::VerdictOutcome;
use ultraplan_tests::fake_models::{FakeAnthropic, RecordedRequest, Reply, Script};
use ultraplan_tests::harness::ServerProcess;

use crate::execution::{
    approve_first_plan, bash_output, client, client_as, git, text, wait_for_patch,
};
use crate::live_clients::{browser_login, session_page};

const SECRET: &str = "tok-6f1d2c-very-secret";

/// A package index: `python3 -m http.server` over a directory holding one wheel.
pub(crate) struct Index {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for Index {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Build `tinypkg-1.0-py3-none-any.whl` by hand (a wheel is a zip with metadata) and serve it.
pub(crate) fn package_index(root: &Path) -> Index {
    let wheels = root.join("wheels");
    std::fs::create_dir_all(&wheels).expect("mkdir");
    let script = r#"
import sys, zipfile
out = sys.argv[1]
files = {
    "tinypkg/__init__.py": "def greet():\n    return 'hello from tinypkg'\n",
    "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
    "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join(f"{name},,\n" for name in files) + "tinypkg-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(out, "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr("tinypkg-1.0.dist-info/RECORD", record)
"#;
    let wheel = wheels.join("tinypkg-1.0-py3-none-any.whl");
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&wheel)
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(&wheels)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("http.server");
    let index = Index { child, port };
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return index;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the package index did not start");
}

/// A committed repository holding `files`.
pub(crate) fn repository(root: &Path, name: &str, files: &[(&str, String)]) -> PathBuf {
    let repo = root.join(name);
    for (path, text) in files {
        let path = repo.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "base"]);
    repo
}

pub(crate) fn launch(server: &ServerProcess, home: &Path, repo: &Path) -> String {
    launch_as(server, &server.token, home, repo, &[])
}

/// Launch through the real client as `token`'s user, with `extra` launch flags.
fn launch_as(
    server: &ServerProcess,
    token: &str,
    home: &Path,
    repo: &Path,
    extra: &[&str],
) -> String {
    let mut args = vec!["launch", "--yes", "--json", "--no-watch"];
    args.extend_from_slice(extra);
    args.push("ultraplan make the tests pass");
    let out = client_as(server, token, home, repo, &args);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let session: Value = serde_json::from_slice(&out.stdout).expect("session json");
    session["id"].as_str().expect("id").to_owned()
}

pub(crate) fn system<'a>(event: &'a Event, subtype: &str) -> Option<&'a SystemEvent> {
    match &event.body {
        EventBody::System(s) if s.subtype == subtype => Some(s),
        _ => None,
    }
}

pub(crate) fn output_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| system(e, ENVIRONMENT_OUTPUT))
        .filter_map(|s| s.message.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Plans, then (executing) runs the project's tests and probes the agent phase.
fn script(index_port: u16) -> Script {
    Script::from_fn(move |req: &RecordedRequest| {
        if req.is_verifier() {
            return match req.tool_results().len() {
                0 => Reply::tool_use("Bash", json!({"command": "python3 -m unittest -v"})),
                _ => Reply::text(
                    "Ran `python3 -m unittest -v`: exit code 0 (test_greet ok).\nVERDICT: PASS",
                ),
            };
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            // Plan mode reads the environment: the installed package's source under /env.
            if req.tool_results().is_empty() {
                return Reply::tool_use(
                    "Grep",
                    json!({"pattern": "hello from tinypkg", "path": "/env", "output_mode": "files_with_matches"}),
                );
            }
            return Reply::exit_plan_mode("1. Run the tests with python3 -m unittest");
        }
        // The plan's Grep and the approval are the first two tool_results.
        match req.tool_results().len() {
            2 => Reply::tool_use(
                "Bash",
                json!({"command": format!(
                    "python3 -m unittest -v 2>&1; echo \"UNITTEST_EXIT=$?\"; \
                     echo \"TOKEN=[$SETUP_TOKEN]\"; echo \"SECRET_VARS=$(env | grep -c SETUP_TOKEN)\"; \
                     (exec 3<>/dev/tcp/127.0.0.1/{index_port}) 2>/dev/null && echo NET_OPEN || echo NET_BLOCKED; \
                     touch /env/agent-wrote 2>/dev/null && echo ENV_WRITTEN || echo ENV_READ_ONLY"
                )}),
            ),
            _ => Reply::text("Done: the tests pass."),
        }
    })
}

fn environment_file(index_port: u16, blocked_port: u16) -> String {
    format!(
        r#"[setup]
commands = [
  "python3 -m pip install --no-index --find-links http://127.0.0.1:{index_port}/ tinypkg",
  "python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{blocked_port}/')\" || echo unlisted host refused",
  "test \"${{#SETUP_TOKEN}}\" -eq {len} && echo \"setup sees the token: $SETUP_TOKEN\"",
]
network = ["127.0.0.1:{index_port}"]
secrets = ["SETUP_TOKEN"]
[agent]
network = []
"#,
        len = SECRET.len()
    )
}

const TESTS: &str = "import unittest\n\nimport tinypkg\n\n\nclass Greet(unittest.TestCase):\n    \
def test_greet(self):\n        self.assertEqual(tinypkg.greet(), 'hello from tinypkg')\n\n\n\
if __name__ == '__main__':\n    unittest.main()\n";

pub(crate) async fn put_secret(server: &ServerProcess, name: &str, value: &str) {
    let response = reqwest::Client::new()
        .put(format!("{}/v1/secrets/{name}", server.base_url))
        .bearer_auth(&server.token)
        .json(&json!({"value": value}))
        .send()
        .await
        .expect("put secret");
    assert_eq!(response.status(), 204, "{:?}", response.text().await);
}

/// Every file under `dir` (not following links) whose bytes contain `needle`.
pub(crate) fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file()
                && std::fs::read(&path).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
            {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_environment_is_set_up_once_under_bwrap_and_its_tests_pass() {
    python_environment("bwrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_environment_is_set_up_once_under_docker_and_its_tests_pass() {
    python_environment("docker").await;
}

async fn python_environment(runner: &str) {
    let root = tempfile::tempdir().expect("tempdir");
    let index = package_index(root.path());
    let unlisted = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let blocked_port = unlisted.local_addr().expect("addr").port();
    let fake = FakeAnthropic::start(script(index.port)).await;
    let server = ServerProcess::with_fake_anthropic(runner, &fake.base_url())
        .await
        .expect("server");
    put_secret(&server, "SETUP_TOKEN", SECRET).await;
    let home = root.path().join("home");
    let repo = repository(
        root.path(),
        "project",
        &[
            (
                ".ultraplan/environment.toml",
                environment_file(index.port, blocked_port),
            ),
            ("test_greet.py", TESTS.to_owned()),
        ],
    );

    // First session: setup runs, with its output in the log.
    let started = Instant::now();
    let id = launch(&server, &home, &repo);
    let mut seen = Vec::new();
    let ready = server
        .wait_for(&id, &mut seen, |e| {
            system(e, ENVIRONMENT_READY).is_some() || system(e, ENVIRONMENT_FAILED).is_some()
        })
        .await
        .expect("environment");
    let first_ready = started.elapsed();
    let ready = system(&ready, ENVIRONMENT_READY)
        .unwrap_or_else(|| panic!("setup failed: {seen:#?}\n{}", server.log()));
    let output = output_of(&seen);
    assert!(
        output.contains("Successfully installed tinypkg"),
        "{output}"
    );
    assert!(output.contains("unlisted host refused"), "{output}");
    assert!(output.contains("setup sees the token: ***"), "{output}");
    let blocked = &ready.data["blocked"];
    assert_eq!(blocked[0]["host"], "127.0.0.1", "{ready:?}");
    assert_eq!(blocked[0]["port"], blocked_port, "{ready:?}");
    assert!(
        ready
            .message
            .as_deref()
            .unwrap_or_default()
            .contains(&format!("127.0.0.1:{blocked_port}")),
        "{ready:?}"
    );

    // Execution: Bash runs the tests against the snapshot, with no network and no secret.
    approve_first_plan(&server, &id, &mut seen).await;
    // Plan mode read the installed package's source in /env.
    let found = bash_output(&seen, "tinypkg/__init__.py");
    assert!(found.contains("/env/venv/lib/"), "{found}");
    let result = wait_for_patch(&server, &id, &mut seen).await;
    let verdict = result
        .patch
        .clone()
        .and_then(|p| p.verdict)
        .expect("a verdict");
    assert_eq!(verdict.verdict, VerdictOutcome::Pass, "{verdict:?}");
    assert!(
        verdict.evidence.contains("python3 -m unittest"),
        "{verdict:?}"
    );
    let said = result.result.clone().unwrap_or_default();
    assert!(said.contains("Verification: PASS"), "{said}");
    let run = bash_output(&seen, "UNITTEST_EXIT=");
    assert!(run.contains("UNITTEST_EXIT=0"), "{run}");
    assert!(run.contains("test_greet"), "{run}");
    assert!(run.contains("TOKEN=[]"), "{run}");
    assert!(run.contains("SECRET_VARS=0"), "{run}");
    assert!(run.contains("NET_BLOCKED"), "{run}");
    assert!(run.contains("ENV_READ_ONLY"), "{run}");

    // The secret is nowhere but in setup's own process: not in events, logs or the snapshot.
    let all = serde_json::to_string(&seen).expect("json");
    assert!(!all.contains(SECRET), "the secret reached the event log");
    assert!(
        !server.log().contains(SECRET),
        "the secret reached the server log"
    );
    let leaks = files_containing(&server.data_dir, SECRET.as_bytes());
    assert!(
        leaks.is_empty(),
        "the secret is stored in plain text: {leaks:?}"
    );

    // Second session on the same repository: the snapshot is reused.
    let started = Instant::now();
    let second = launch(&server, &home, &repo);
    let mut seen2 = Vec::new();
    let reused = server
        .wait_for(&second, &mut seen2, |e| {
            system(e, ENVIRONMENT_REUSED).is_some() || system(e, ENVIRONMENT_READY).is_some()
        })
        .await
        .expect("second environment");
    let second_ready = started.elapsed();
    let reused = system(&reused, ENVIRONMENT_REUSED).expect("reused, not rebuilt");
    let message = reused.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("Environment reused (built "),
        "{message}"
    );
    assert!(message.ends_with(" ago)."), "{message}");
    eprintln!(
        "{runner}: environment ready after {:.2} s with setup, {:.2} s reused: {:.1}× faster",
        first_ready.as_secs_f64(),
        second_ready.as_secs_f64(),
        first_ready.as_secs_f64() / second_ready.as_secs_f64().max(0.001)
    );
    drop(unlisted);
    drop(index);
}

/// A session whose setup fails or hangs ends with the reason, the exit code or the time limit,
/// and the last lines of output, in the log and on the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_and_hanging_setups_end_the_session_with_their_reason() {
    let root = tempfile::tempdir().expect("tempdir");
    let fake = FakeAnthropic::start(Script::from_fn(|_| Reply::exit_plan_mode("1. nothing"))).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let home = root.path().join("home");
    let cases = [
        (
            "fails",
            "[setup]\ncommands = [\"echo preparing\", \"echo about to fail >&2; exit 3\", \"echo never\"]\n",
            "failed with exit code 3",
            json!(3),
            false,
        ),
        (
            "hangs",
            "[setup]\ncommands = [\"echo waiting; sleep 600\"]\ntimeout_seconds = 2\n",
            "ran past its time limit",
            Value::Null,
            true,
        ),
    ];
    for (name, file, says, code, timed_out) in cases {
        let repo = repository(
            root.path(),
            name,
            &[
                (".ultraplan/environment.toml", file.to_owned()),
                ("README.md", "# x\n".to_owned()),
            ],
        );
        let id = launch(&server, &home, &repo);
        let mut seen = Vec::new();
        let end = server
            .wait_for(
                &id,
                &mut seen,
                |e| matches!(&e.body, EventBody::Result(r) if r.is_terminal()),
            )
            .await
            .expect("end");
        let EventBody::Result(result) = &end.body else {
            unreachable!()
        };
        assert_eq!(result.subtype, ERROR_ENVIRONMENT, "{name}");
        let text = result.result.clone().unwrap_or_default();
        assert!(text.contains(says), "{name}: {text}");
        let failed = seen
            .iter()
            .find_map(|e| system(e, ENVIRONMENT_FAILED))
            .expect("failed note");
        assert_eq!(failed.data["exit_code"], code, "{name}");
        assert_eq!(failed.data["timed_out"], timed_out, "{name}");
        let tail = failed.data["tail"].to_string();
        if timed_out {
            assert!(tail.contains("waiting"), "{tail}");
        } else {
            assert!(
                tail.contains("about to fail") && !tail.contains("never"),
                "{tail}"
            );
            assert!(
                text.contains("about to fail"),
                "the result carries the tail: {text}"
            );
        }
        assert!(fake.requests().is_empty(), "no agent started for {name}");
        let page = session_page(&server.base_url, &server.token, &id).await;
        assert!(page.contains(says), "{name}: the page says why");
        let tail_line = if timed_out {
            "waiting"
        } else {
            "about to fail"
        };
        assert!(
            page.contains(tail_line),
            "{name}: the page shows the output"
        );
    }
}

/// Waits until `token`'s session `id` logs an event `pick` accepts; every event so far.
pub(crate) async fn wait_as(
    server: &ServerProcess,
    token: &str,
    id: &str,
    pick: impl Fn(&Event) -> bool,
) -> Vec<Event> {
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let page: Value = reqwest::Client::new()
            .get(format!(
                "{}/v1/sessions/{id}/events?limit=1000",
                server.base_url
            ))
            .bearer_auth(token)
            .send()
            .await
            .expect("events")
            .json()
            .await
            .expect("events json");
        let events: Vec<Event> = serde_json::from_value(page["data"].clone()).expect("events");
        if events.iter().any(&pick) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "timed out: {events:#?}\n{}",
            server.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Named environments: the operator shares one with every user and its snapshot serves them
/// all; a user keeps their own with `ultraplan env set`; `launch --env NAME` uses one instead
/// of the repository's file; a name nobody has is refused at launch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_environments_replace_the_repository_file_and_shared_ones_serve_every_user() {
    let root = tempfile::tempdir().expect("tempdir");
    let index = package_index(root.path());
    let fake = FakeAnthropic::start(Script::from_fn(|_| Reply::exit_plan_mode("1. nothing"))).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    let home = root.path().join("home");
    let definition = format!(
        "[setup]\ncommands = [\"python3 -m pip install --no-index --find-links \
         http://127.0.0.1:{port}/ tinypkg\"]\nnetwork = [\"127.0.0.1:{port}\"]\n",
        port = index.port
    );
    let file = root.path().join("py.toml");
    std::fs::write(&file, &definition).expect("write");
    let file_arg = file.to_str().expect("utf-8");
    // A shared environment may not name secrets: refused with the reason.
    let secretive = root.path().join("secretive.toml");
    std::fs::write(
        &secretive,
        "[setup]\ncommands = [\"true\"]\nsecrets = [\"TOKEN\"]\n",
    )
    .expect("write");
    let refused = server
        .admin(&[
            "env",
            "add",
            "team",
            "--shared",
            "--file",
            secretive.to_str().expect("utf-8"),
        ])
        .await
        .expect_err("refused");
    assert!(
        refused.to_string().contains("cannot name secrets"),
        "{refused}"
    );
    server
        .admin(&["env", "add", "team-py", "--shared", "--file", file_arg])
        .await
        .expect("env add --shared");
    let other = server.admin(&["user", "add", "other"]).await.expect("user");
    let other = other.trim();

    // The repository's own file would fail; a named environment replaces it.
    let repo = repository(
        root.path(),
        "project",
        &[
            (
                ".ultraplan/environment.toml",
                "[setup]\ncommands = [\"exit 9\"]\n".to_owned(),
            ),
            ("test_greet.py", TESTS.to_owned()),
        ],
    );
    let first = launch_as(
        &server,
        other,
        &home.join("other"),
        &repo,
        &["--env", "team-py"],
    );
    let seen = wait_as(&server, other, &first, |e| {
        system(e, ENVIRONMENT_READY).is_some() || system(e, ENVIRONMENT_FAILED).is_some()
    })
    .await;
    let setup = seen
        .iter()
        .find_map(|e| system(e, ENVIRONMENT_SETUP))
        .expect("setup note");
    assert!(
        setup
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("from environment team-py"),
        "{setup:?}"
    );
    assert!(
        seen.iter().any(|e| system(e, ENVIRONMENT_READY).is_some()),
        "{seen:#?}"
    );
    assert!(output_of(&seen).contains("Successfully installed tinypkg"));

    // The reviewer picks the environment of the execution when approving: here the
    // repository's own file, whose setup fails, so the choice visibly took effect.
    let seen = wait_as(&server, other, &first, |e| {
        !e.body.exit_plan_mode_calls().is_empty()
    })
    .await;
    let tool = seen
        .iter()
        .find_map(|e| {
            e.body
                .exit_plan_mode_calls()
                .first()
                .map(|c| c.0.to_owned())
        })
        .expect("plan");
    let path = format!("/sessions/{first}");
    let cookie = browser_login(&server.base_url, other, &path).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let page = http
        .get(format!("{}{path}", server.base_url))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(
        page.contains("id=\"approve-environment\""),
        "the approve form offers a choice"
    );
    assert!(
        page.contains("team-py (as launched)"),
        "it names the one in use"
    );
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("csrf")
        .to_owned();
    let posted = http
        .post(format!("{}{path}/plans/{tool}/decision", server.base_url))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&decision=approve&environment=-"))
        .send()
        .await
        .expect("decision");
    assert_eq!(posted.status(), 303, "{:?}", posted.text().await);
    let seen = wait_as(
        &server,
        other,
        &first,
        |e| matches!(&e.body, EventBody::Result(r) if r.subtype == ERROR_ENVIRONMENT),
    )
    .await;
    let setup = seen
        .iter()
        .rev()
        .find_map(|e| system(e, ENVIRONMENT_SETUP))
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    assert!(
        setup.contains("from .ultraplan/environment.toml"),
        "{setup}"
    );
    assert!(
        seen.iter()
            .any(|e| system(e, ENVIRONMENT_FAILED).is_some_and(|f| f.data["exit_code"] == 9)),
        "{seen:#?}"
    );

    // Another user of the shared environment reuses its snapshot.
    let second = launch_as(&server, &server.token, &home, &repo, &["--env", "team-py"]);
    let seen = wait_as(&server, &server.token, &second, |e| {
        system(e, ENVIRONMENT_REUSED).is_some() || system(e, ENVIRONMENT_READY).is_some()
    })
    .await;
    assert!(
        seen.iter().any(|e| system(e, ENVIRONMENT_REUSED).is_some()),
        "the shared snapshot serves every user: {seen:#?}"
    );

    // A user's own environment, through the client; the list shows it beside the shared one.
    let out = client(
        &server,
        &home,
        &repo,
        &["env", "set", "mine", "--file", file_arg],
    );
    assert!(out.status.success(), "{}", text(&out));
    let out = client(&server, &home, &repo, &["env", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    let names: Vec<(String, bool)> = list["environments"]
        .as_array()
        .expect("array")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default().to_owned(),
                e["shared"] == true,
            )
        })
        .collect();
    assert_eq!(
        names,
        [("mine".to_owned(), false), ("team-py".to_owned(), true)]
    );
    // Not the other user's to see, and a name nobody has is refused at launch.
    let out = client_as(
        &server,
        other,
        &home.join("other"),
        &repo,
        &["env", "list", "--json"],
    );
    assert!(!text(&out).contains("\"mine\""), "{}", text(&out));
    let out = client_as(
        &server,
        other,
        &home.join("other"),
        &repo,
        &[
            "launch",
            "--yes",
            "--no-watch",
            "--env",
            "mine",
            "ultraplan plan",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("no environment named mine"),
        "{}",
        text(&out)
    );
    drop(index);
}

/// `[maintenance]` runs on a reused snapshot, in a copy that becomes the snapshot: each reuse
/// builds on the last one, the agent reads the maintained tree, and a failing maintenance ends
/// the session with its exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_refreshes_a_reused_environment_and_its_failure_ends_the_session() {
    maintenance("bwrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_refreshes_a_reused_environment_under_docker() {
    maintenance("docker").await;
}

async fn maintenance(runner: &str) {
    let root = tempfile::tempdir().expect("tempdir");
    let fake = FakeAnthropic::start(Script::from_fn(|req: &RecordedRequest| {
        match req.tool_results().len() {
            0 => Reply::tool_use("Read", json!({"file_path": "/env/counter"})),
            _ => Reply::exit_plan_mode("1. nothing"),
        }
    }))
    .await;
    let server = ServerProcess::with_fake_anthropic(runner, &fake.base_url())
        .await
        .expect("server");
    let home = root.path().join("home");
    let file = "[setup]\ncommands = [\"echo 0 > /env/counter\"]\n[maintenance]\ncommands = \
                [\"echo $(( $(cat /env/counter) + 1 )) > /env/counter\", \
                \"echo maintained to $(cat /env/counter)\"]\n";
    let repo = repository(
        root.path(),
        "maintained",
        &[(".ultraplan/environment.toml", file.to_owned())],
    );
    let plan = |e: &Event| !e.body.exit_plan_mode_calls().is_empty();
    let first = launch(&server, &home, &repo);
    let seen = wait_as(&server, &server.token, &first, plan).await;
    assert!(
        seen.iter().any(|e| system(e, ENVIRONMENT_READY).is_some()),
        "built: {seen:#?}"
    );
    assert!(
        !output_of(&seen).contains("maintained to"),
        "no maintenance on a fresh build"
    );
    for round in 1..=2 {
        let id = launch(&server, &home, &repo);
        let seen = wait_as(&server, &server.token, &id, plan).await;
        assert!(
            seen.iter().any(|e| system(e, ENVIRONMENT_REUSED).is_some()),
            "{seen:#?}"
        );
        let output = output_of(&seen);
        assert!(
            output.contains(&format!("maintained to {round}")),
            "{output}"
        );
        let ready = seen
            .iter()
            .find_map(|e| system(e, ENVIRONMENT_READY))
            .and_then(|s| s.message.clone())
            .unwrap_or_default();
        assert!(ready.starts_with("Environment maintained"), "{ready}");
        let read = seen
            .iter()
            .flat_map(|e| e.body.tool_results())
            .map(|(_, text, _)| text)
            .next()
            .unwrap_or_default();
        assert!(
            read.contains(&round.to_string()),
            "the agent reads the maintained tree: {read}"
        );
    }

    // A maintenance that fails ends the session with its exit code and output.
    let failing = "[setup]\ncommands = [\"true\"]\n[maintenance]\ncommands = [\"echo refresh \
                   broke >&2; exit 4\"]\n";
    let repo = repository(
        root.path(),
        "broken",
        &[(".ultraplan/environment.toml", failing.to_owned())],
    );
    let built = launch(&server, &home, &repo);
    wait_as(&server, &server.token, &built, plan).await;
    let id = launch(&server, &home, &repo);
    let seen = wait_as(
        &server,
        &server.token,
        &id,
        |e| matches!(&e.body, EventBody::Result(r) if r.is_terminal()),
    )
    .await;
    let Some(EventBody::Result(result)) = seen.last().map(|e| &e.body) else {
        panic!("no result: {seen:#?}");
    };
    assert_eq!(result.subtype, ERROR_ENVIRONMENT);
    let text = result.result.clone().unwrap_or_default();
    assert!(
        text.contains("Environment maintenance failed with exit code 4"),
        "{text}"
    );
    assert!(text.contains("refresh broke"), "{text}");
}

/// A Docker image holding only BusyBox, imported into the engine the tests use (runners never
/// pull). Its tag is unique to the run.
pub(crate) fn busybox_image(root: &Path) -> String {
    let rootfs = root.join("rootfs");
    let bin = rootfs.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::fs::copy("/bin/busybox", bin.join("busybox")).expect("busybox-static is installed");
    for applet in [
        "sh", "cat", "echo", "head", "ls", "mkdir", "env", "uname", "true",
    ] {
        std::os::unix::fs::symlink("busybox", bin.join(applet)).expect("applet");
    }
    for dir in ["etc", "tmp", "workspace", "env"] {
        std::fs::create_dir_all(rootfs.join(dir)).expect("mkdir");
    }
    let tag = format!("ultraplan-test-busybox:{}", std::process::id());
    let archive = root.join("rootfs.tar");
    let tarred = Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .arg("-cf")
        .arg(&archive)
        .arg(".")
        .status()
        .expect("tar");
    assert!(tarred.success());
    let imported = Command::new("docker")
        .arg("import")
        .arg(&archive)
        .arg(&tag)
        .output()
        .expect("docker import");
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    tag
}

/// `[base] image`: under Docker, setup and every agent run in that image (here one holding only
/// BusyBox, which the host lacks), keyed on its id; under bwrap, and for an image the engine
/// does not have, the session ends saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_base_image_is_where_setup_and_the_agents_run() {
    let root = tempfile::tempdir().expect("tempdir");
    let image = busybox_image(root.path());
    let fake = FakeAnthropic::start(Script::from_fn(|req: &RecordedRequest| {
        if req.is_verifier() {
            return Reply::text("Nothing to test.\nVERDICT: PASS");
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return match req.tool_results().len() {
                0 => Reply::tool_use("Read", json!({"file_path": "/env/which"})),
                _ => Reply::exit_plan_mode("1. Say where we are"),
            };
        }
        match req.tool_results().len() {
            2 => Reply::tool_use(
                "Bash",
                json!({"command": "busybox | head -1; echo > NOTES.md; ls /usr 2>&1 | head -1"}),
            ),
            _ => Reply::text("Done."),
        }
    }))
    .await;
    let file = |image: &str| {
        format!(
            "[base]\nimage = \"{image}\"\n[setup]\ncommands = [\"busybox | head -1 > /env/which\"]\n"
        )
    };
    let home = root.path().join("home");
    let repo = repository(
        root.path(),
        "in-image",
        &[(".ultraplan/environment.toml", file(&image))],
    );
    let server = ServerProcess::with_fake_anthropic("docker", &fake.base_url())
        .await
        .expect("server");
    let id = launch(&server, &home, &repo);
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| {
            !e.body.exit_plan_mode_calls().is_empty()
        })
        .await
        .expect("plan");
    assert!(
        seen.iter().any(|e| system(e, ENVIRONMENT_READY).is_some()),
        "{seen:#?}"
    );
    let read = bash_output(&seen, "BusyBox");
    assert!(
        read.contains("BusyBox v"),
        "the planning agent reads setup's output: {read}"
    );
    approve_first_plan(&server, &id, &mut seen).await;
    wait_for_patch(&server, &id, &mut seen).await;
    let ran = bash_output(&seen, "No such file");
    assert!(ran.contains("BusyBox v"), "Bash runs in the image: {ran}");
    assert!(ran.contains("/usr"), "without the host's toolchain: {ran}");

    // Only the docker sandbox runs images, and only those its engine has.
    let missing = repository(
        root.path(),
        "missing",
        &[(
            ".ultraplan/environment.toml",
            file("ultraplan-test-absent:0"),
        )],
    );
    let bwrap = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    for (server, repo, says) in [
        (&server, &missing, "is not on this runner's Docker engine"),
        (&bwrap, &repo, "needs the docker sandbox"),
    ] {
        let id = launch(server, &home, repo);
        let mut seen = Vec::new();
        let end = server
            .wait_for(
                &id,
                &mut seen,
                |e| matches!(&e.body, EventBody::Result(r) if r.is_terminal()),
            )
            .await
            .expect("end");
        let EventBody::Result(result) = &end.body else {
            unreachable!()
        };
        assert_eq!(result.subtype, ERROR_ENVIRONMENT);
        let text = result.result.clone().unwrap_or_default();
        assert!(text.contains(says), "{text}");
    }
    let _ = Command::new("docker").args(["rmi", "-f", &image]).output();
}

/// `[agent] network`: the executing agent's Bash reaches the allow-listed host through the
/// proxy, is refused the others, and the refused hosts are logged when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_allow_list_lets_bash_reach_only_the_listed_hosts() {
    agent_allow_list("bwrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_allow_list_works_under_docker() {
    agent_allow_list("docker").await;
}

async fn agent_allow_list(runner: &str) {
    let root = tempfile::tempdir().expect("tempdir");
    let index = package_index(root.path());
    let unlisted = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let blocked_port = unlisted.local_addr().expect("addr").port();
    let probe = format!(
        "for port in {} {blocked_port}; do python3 -c \"import sys, urllib.request; \
         urllib.request.urlopen(f'http://127.0.0.1:{{sys.argv[1]}}/', timeout=10); \
         print('REACHED', sys.argv[1])\" $port 2>/dev/null || echo REFUSED $port; done",
        index.port
    );
    let fake = FakeAnthropic::start(Script::from_fn(move |req: &RecordedRequest| {
        if req.is_verifier() {
            return Reply::text("Nothing to test.\nVERDICT: PASS");
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return Reply::exit_plan_mode("1. Probe the network");
        }
        match req.tool_results().len() {
            1 => Reply::tool_use("Bash", json!({"command": probe.clone()})),
            _ => Reply::text("Done."),
        }
    }))
    .await;
    let server = ServerProcess::with_fake_anthropic(runner, &fake.base_url())
        .await
        .expect("server");
    let file = format!(
        "[setup]\ncommands = [\"true\"]\n[agent]\nnetwork = [\"127.0.0.1:{}\"]\n",
        index.port
    );
    let home = root.path().join("home");
    let repo = repository(
        root.path(),
        "agent-net",
        &[(".ultraplan/environment.toml", file)],
    );
    let id = launch(&server, &home, &repo);
    let mut seen = Vec::new();
    approve_first_plan(&server, &id, &mut seen).await;
    wait_for_patch(&server, &id, &mut seen).await;
    let ran = bash_output(&seen, "REFUSED");
    assert!(ran.contains(&format!("REACHED {}", index.port)), "{ran}");
    assert!(ran.contains(&format!("REFUSED {blocked_port}")), "{ran}");
    let note = seen
        .iter()
        .filter_map(|e| system(e, ENVIRONMENT_READY))
        .find(|s| s.data["phase"] == "agent")
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    assert!(
        note.contains(&format!("127.0.0.1:{blocked_port}")),
        "{seen:#?}"
    );
    drop(unlisted);
    drop(index);
}
