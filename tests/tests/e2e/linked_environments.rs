//! Environments on keyless runners (`ultraplan-runner`) linked to a server that runs no agents
//! itself: setup runs on the runner, into a snapshot on the runner's own disk, its output
//! (secrets masked) streams into the session's log; the planning agent reads what setup left
//! in `/env`, the executing agent runs the tool it installed and reaches only its allow-list;
//! a second session reuses the snapshot; a failing setup ends its session with the output's
//! tail. A runner that does not say it prepares environments gets the clear error it always did.

use std::path::Path;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use ultraplan_protocol::constants::{
    ENVIRONMENT_FAILED, ENVIRONMENT_READY, ENVIRONMENT_REUSED, ENVIRONMENT_SETUP, ERROR_ENVIRONMENT,
};
use ultraplan_protocol::events::{Event, EventBody};
use ultraplan_tests::fake_models::{
    FAKE_ANTHROPIC_KEY, FakeAnthropic, RecordedRequest, Reply, Script,
};
use ultraplan_tests::harness::ServerProcess;
use ultraplan_tests::runners::{RunnerProcess, runner_token};

use crate::environments::{
    files_containing, launch, output_of, package_index, put_secret, repository, system, wait_as,
};
use crate::execution::{approve_first_plan, bash_output, wait_for_patch};

const SECRET: &str = "tok-linked-4b1e-very-secret";

/// A server with no runner of its own, its model the fake.
async fn fleet_server(fake: &FakeAnthropic) -> ServerProcess {
    let url = fake.base_url();
    ServerProcess::start(&[
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
        ("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY),
        ("ANTHROPIC_BASE_URL", url.as_str()),
    ])
    .await
    .expect("server")
}

fn is_end(event: &Event) -> bool {
    matches!(&event.body, EventBody::Result(r) if r.is_terminal())
}

/// Plans after reading what setup wrote; executing, runs setup's tool and probes the network.
fn script(probe: String) -> Script {
    Script::from_fn(move |req: &RecordedRequest| {
        if req.is_verifier() {
            return Reply::text("Nothing to test.\nVERDICT: PASS");
        }
        if !req.tool_names().iter().any(|t| t == "Bash") {
            return match req.tool_results().len() {
                0 => Reply::tool_use("Read", json!({"file_path": "/env/marker"})),
                _ => Reply::exit_plan_mode("1. Run the environment's tool"),
            };
        }
        match req.tool_results().len() {
            2 => Reply::tool_use(
                "Bash",
                json!({"command": format!("envtool; echo \"TOKEN=[$SETUP_TOKEN]\"; {probe}")}),
            ),
            _ => Reply::text("Done."),
        }
    })
}

fn environment_file(allowed_port: u16, blocked_port: u16) -> String {
    format!(
        r#"[setup]
commands = [
  "echo made on the runner > /env/marker",
  "mkdir -p /env/bin && printf '#!/bin/sh\necho envtool ran\n' > /env/bin/envtool && chmod +x /env/bin/envtool",
  "echo \"setup sees the token: $SETUP_TOKEN\"",
  "python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{blocked_port}/')\" || echo unlisted host refused",
]
network = ["127.0.0.1:{allowed_port}"]
secrets = ["SETUP_TOKEN"]
[agent]
network = ["127.0.0.1:{allowed_port}"]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_bwrap_runner_sets_up_reuses_and_fails_environments_like_the_local_one() {
    linked_environment("bwrap").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_docker_runner_sets_up_and_reuses_environments() {
    linked_environment("docker").await;
}

async fn linked_environment(sandbox: &str) {
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
    let fake = FakeAnthropic::start(script(probe)).await;
    let server = fleet_server(&fake).await;
    let token = runner_token(&server, "ci").await.expect("token");
    let runner = RunnerProcess::start_in(&server.base_url, (&token, "ci"), "r1", 2, sandbox)
        .await
        .expect("runner");
    put_secret(&server, "SETUP_TOKEN", SECRET).await;
    let home = root.path().join("home");
    let repo = repository(
        root.path(),
        "project",
        &[(
            ".ultraplan/environment.toml",
            environment_file(index.port, blocked_port),
        )],
    );

    // Setup runs on the runner, its output in the log with the secret masked.
    let id = launch(&server, &home, &repo);
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| {
            !e.body.exit_plan_mode_calls().is_empty() || is_end(e)
        })
        .await
        .expect("a plan");
    let ready = seen
        .iter()
        .find_map(|e| system(e, ENVIRONMENT_READY))
        .unwrap_or_else(|| panic!("no setup: {seen:#?}\n{}", runner.log()));
    let key = ready.data["key"].as_str().expect("key").to_owned();
    assert!(seen.iter().any(|e| system(e, ENVIRONMENT_SETUP).is_some()));
    let output = output_of(&seen);
    assert!(output.contains("setup sees the token: ***"), "{output}");
    // Setup reached only its allow-list, through the runner's proxy, which said what it refused.
    assert!(output.contains("unlisted host refused"), "{output}");
    assert_eq!(ready.data["blocked"][0]["port"], blocked_port, "{ready:?}");
    // The planning agent read what setup left in /env.
    let read = first_read(&seen);
    assert!(read.contains("made on the runner"), "{read}");
    // The snapshot is the runner's, not the server's.
    let tree = runner.data_dir.join("environments").join(&key);
    assert!(tree.join("meta.json").is_file(), "{}", runner.log());
    assert!(!server.data_dir.join("environments").join(&key).exists());

    // Execution: Bash runs setup's tool, reaches only its allow-list, and holds no secret.
    approve_first_plan(&server, &id, &mut seen).await;
    wait_for_patch(&server, &id, &mut seen).await;
    let ran = bash_output(&seen, "envtool ran");
    assert!(ran.contains("TOKEN=[]"), "{ran}");
    assert!(ran.contains(&format!("REACHED {}", index.port)), "{ran}");
    assert!(ran.contains(&format!("REFUSED {blocked_port}")), "{ran}");
    let refused = seen
        .iter()
        .filter_map(|e| system(e, ENVIRONMENT_READY))
        .find(|s| s.data["phase"] == "agent")
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    assert!(
        refused.contains(&format!("127.0.0.1:{blocked_port}")),
        "{seen:#?}"
    );

    // The secret is in no event, log or file of either side.
    let all = serde_json::to_string(&seen).expect("json");
    assert!(!all.contains(SECRET), "the secret reached the event log");
    assert!(!server.log().contains(SECRET), "the server logged it");
    assert!(!runner.log().contains(SECRET), "the runner logged it");
    for dir in [&server.data_dir, &runner.data_dir] {
        let leaks = files_containing(dir, SECRET.as_bytes());
        assert!(leaks.is_empty(), "the secret is on disk: {leaks:?}");
    }

    // A second session reuses the runner's snapshot.
    let second = launch(&server, &home, &repo);
    let seen = wait_as(&server, &server.token, &second, |e| {
        !e.body.exit_plan_mode_calls().is_empty() || is_end(e)
    })
    .await;
    let reused = seen
        .iter()
        .find_map(|e| system(e, ENVIRONMENT_REUSED))
        .unwrap_or_else(|| panic!("not reused: {seen:#?}"));
    assert_eq!(reused.data["key"], key.as_str());
    assert!(seen.iter().all(|e| system(e, ENVIRONMENT_SETUP).is_none()));

    if sandbox == "bwrap" {
        maintenance_runs_on_the_runner(&server, &runner, &home, root.path()).await;
        a_failing_setup_ends_its_session(&server, &home, root.path()).await;
        a_base_image_needs_a_docker_runner(&server, &home, root.path()).await;
    } else {
        a_base_image_is_the_runners_engines(&server, &home, root.path()).await;
    }
    drop(unlisted);
    drop(index);
}

/// What the planning agent read first (its `Read` of `/env/marker`).
fn first_read(seen: &[Event]) -> String {
    seen.iter()
        .flat_map(|e| e.body.tool_results())
        .map(|(_, text, _)| text)
        .next()
        .unwrap_or_default()
}

/// `[maintenance]` runs on the runner when a session first reuses the snapshot, and its copy
/// becomes the snapshot's next generation there.
async fn maintenance_runs_on_the_runner(
    server: &ServerProcess,
    runner: &RunnerProcess,
    home: &Path,
    root: &Path,
) {
    let file = "[setup]\ncommands = [\"echo made on the runner > /env/marker\"]\n[maintenance]\n\
                commands = [\"echo maintained on the runner >> /env/marker\", \"echo maintenance \
                ran\"]\n";
    let repo = repository(
        root,
        "maintained",
        &[(".ultraplan/environment.toml", file.to_owned())],
    );
    let plan = |e: &Event| !e.body.exit_plan_mode_calls().is_empty() || is_end(e);
    let built = launch(server, home, &repo);
    let seen = wait_as(server, &server.token, &built, plan).await;
    let ready = seen
        .iter()
        .find_map(|e| system(e, ENVIRONMENT_READY))
        .unwrap_or_else(|| panic!("not built: {seen:#?}"));
    let key = ready.data["key"].as_str().expect("key").to_owned();
    assert!(!output_of(&seen).contains("maintenance ran"));
    let id = launch(server, home, &repo);
    let seen = wait_as(server, &server.token, &id, plan).await;
    assert!(seen.iter().any(|e| system(e, ENVIRONMENT_REUSED).is_some()));
    assert!(output_of(&seen).contains("maintenance ran"), "{seen:#?}");
    let maintained = seen
        .iter()
        .find_map(|e| system(e, ENVIRONMENT_READY))
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    assert!(
        maintained.starts_with("Environment maintained"),
        "{maintained}"
    );
    let read = first_read(&seen);
    assert!(read.contains("maintained on the runner"), "{read}");
    let generation = runner
        .data_dir
        .join("environments")
        .join(&key)
        .join("gen-1");
    assert!(generation.is_dir(), "the runner keeps the new generation");
}

/// `[base] image` on a linked docker runner: its own engine resolves the image (runners never
/// pull), and setup and the agents run in it.
async fn a_base_image_is_the_runners_engines(server: &ServerProcess, home: &Path, root: &Path) {
    let image = crate::environments::busybox_image(root);
    let file = format!(
        "[base]\nimage = \"{image}\"\n[setup]\ncommands = [\"busybox | head -1 > /env/marker\"]\n"
    );
    let repo = repository(root, "in-image", &[(".ultraplan/environment.toml", file)]);
    let id = launch(server, home, &repo);
    let seen = wait_as(server, &server.token, &id, |e| {
        !e.body.exit_plan_mode_calls().is_empty() || is_end(e)
    })
    .await;
    assert!(
        seen.iter().any(|e| system(e, ENVIRONMENT_READY).is_some()),
        "{seen:#?}"
    );
    let read = first_read(&seen);
    assert!(read.contains("BusyBox v"), "setup ran in the image: {read}");
    let _ = std::process::Command::new("docker")
        .args(["rmi", "-f", &image])
        .output();
}

async fn a_failing_setup_ends_its_session(server: &ServerProcess, home: &Path, root: &Path) {
    // One past its time limit is stopped on the runner.
    let hangs = "[setup]\ncommands = [\"echo waiting; sleep 600\"]\ntimeout_seconds = 2\n";
    let repo = repository(
        root,
        "hangs",
        &[(".ultraplan/environment.toml", hangs.to_owned())],
    );
    let id = launch(server, home, &repo);
    let seen = wait_as(server, &server.token, &id, is_end).await;
    let failed = seen
        .iter()
        .find_map(|e| system(e, ENVIRONMENT_FAILED))
        .unwrap_or_else(|| panic!("no failure: {seen:#?}"));
    assert_eq!(failed.data["timed_out"], true, "{failed:?}");
    assert!(
        failed.data["tail"].to_string().contains("waiting"),
        "{failed:?}"
    );

    let file = "[setup]\ncommands = [\"echo preparing\", \"echo about to fail >&2; exit 3\", \
                \"echo never\"]\n";
    let repo = repository(
        root,
        "failing",
        &[(".ultraplan/environment.toml", file.to_owned())],
    );
    let id = launch(server, home, &repo);
    let seen = wait_as(server, &server.token, &id, is_end).await;
    let failed = seen
        .iter()
        .find_map(|e| system(e, ENVIRONMENT_FAILED))
        .unwrap_or_else(|| panic!("no failure: {seen:#?}"));
    assert_eq!(failed.data["exit_code"], 3);
    let tail = failed.data["tail"].to_string();
    assert!(
        tail.contains("about to fail") && !tail.contains("never"),
        "{tail}"
    );
    let Some(EventBody::Result(result)) = seen.last().map(|e| &e.body) else {
        panic!("no result: {seen:#?}");
    };
    assert_eq!(result.subtype, ERROR_ENVIRONMENT);
    let text = result.result.clone().unwrap_or_default();
    assert!(text.contains("failed with exit code 3"), "{text}");
    assert!(text.contains("about to fail"), "{text}");
}

/// `[base] image` on a linked bwrap runner ends the session saying how to run one that can.
async fn a_base_image_needs_a_docker_runner(server: &ServerProcess, home: &Path, root: &Path) {
    let file = "[base]\nimage = \"ultraplan-test-absent:0\"\n[setup]\ncommands = [\"true\"]\n";
    let repo = repository(
        root,
        "imaged",
        &[(".ultraplan/environment.toml", file.to_owned())],
    );
    let id = launch(server, home, &repo);
    let seen = wait_as(server, &server.token, &id, is_end).await;
    let Some(EventBody::Result(result)) = seen.last().map(|e| &e.body) else {
        panic!("no result: {seen:#?}");
    };
    assert_eq!(result.subtype, ERROR_ENVIRONMENT);
    let text = result.result.clone().unwrap_or_default();
    assert!(text.contains("--sandbox docker"), "{text}");
}

/// A runner that predates environments (it names no features in its hello): a session with an
/// environment ends with the clear error instead of running without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_does_not_prepare_environments_gets_the_clear_error() {
    let root = tempfile::tempdir().expect("tempdir");
    let fake = FakeAnthropic::start(Script::from_fn(|_| Reply::exit_plan_mode("1. nothing"))).await;
    let server = fleet_server(&fake).await;
    let token = runner_token(&server, "ci").await.expect("token");
    let url = format!(
        "{}/v1/runner/connect",
        server.base_url.replacen("http://", "ws://", 1)
    );
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("link");
    let hello = json!({"type": "hello", "protocol_version": 1, "name": "old", "capacity": 1, "sandbox": "bwrap"});
    socket
        .send(tokio_tungstenite::tungstenite::Message::text(
            hello.to_string(),
        ))
        .await
        .expect("hello");
    let welcome = socket.next().await.expect("welcome").expect("welcome");
    assert!(welcome.to_string().contains("welcome"), "{welcome}");
    // Whatever else the server says, it asks this runner to prepare nothing.
    let said = tokio::spawn(async move {
        let mut said = Vec::new();
        while let Some(Ok(message)) = socket.next().await {
            said.push(message.to_string());
        }
        said
    });

    let repo = repository(
        root.path(),
        "with-env",
        &[(
            ".ultraplan/environment.toml",
            "[setup]\ncommands = [\"true\"]\n".to_owned(),
        )],
    );
    let id = launch(&server, &root.path().join("home"), &repo);
    let seen = wait_as(&server, &server.token, &id, is_end).await;
    let Some(EventBody::Result(result)) = seen.last().map(|e| &e.body) else {
        panic!("no result: {seen:#?}");
    };
    assert_eq!(result.subtype, ERROR_ENVIRONMENT);
    let text = result.result.clone().unwrap_or_default();
    assert!(text.contains("does not build environments"), "{text}");
    assert!(text.contains("ci:old"), "{text}");
    assert!(fake.requests().is_empty(), "no agent started");
    drop(server);
    let said = said.await.expect("reader");
    assert!(
        said.iter()
            .all(|m| !m.contains("\"prepare\"") && !m.contains("\"launch\"")),
        "{said:?}"
    );
}
