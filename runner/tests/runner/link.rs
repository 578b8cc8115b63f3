//! The `ultraplan-runner` binary against a real server: what it says when it cannot link.
//! (Runners planning and executing sessions are in the end-to-end suite, `tests/`.)

use std::process::Stdio;
use std::time::Duration;

use ultraplan_server::{AppState, Config};

const RUNNER: &str = env!("CARGO_BIN_EXE_ultraplan-runner");

/// A real server on SQLite with no agents of its own; stopped with the runtime.
async fn server(dir: &std::path::Path) -> (String, AppState) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut config = Config::for_data_dir(&dir.join("server"));
    config.bind = addr;
    config.public_url = format!("http://{addr}");
    let store = ultraplan_server::open(&config).await.unwrap();
    let state = AppState::new(config, store);
    let served = state.clone();
    tokio::spawn(async move {
        let _ = ultraplan_server::serve(listener, served, std::future::pending()).await;
    });
    (format!("http://{addr}"), state)
}

fn runner(server: &str, token: &str, data_dir: &std::path::Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(RUNNER);
    command
        .args(["--server", server, "--name", "r1", "--sandbox", "process"])
        .arg("--data-dir")
        .arg(data_dir)
        .env("ULTRAPLAN_RUNNER_TOKEN", token)
        .env("ULTRAPLAN_AGENT_BIN", "/bin/true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

#[tokio::test]
async fn a_server_url_that_is_not_http_is_refused_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = runner("ftp://example.com", "urt_x", dir.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not http:// or https://"), "{stderr}");
}

#[tokio::test]
async fn a_refused_token_is_reported_and_the_runner_keeps_dialing() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _state) = server(dir.path()).await;
    let mut child = runner(&url, "urt_not_a_token", &dir.path().join("runner"))
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let mut refusals = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while refusals < 2 {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .expect("the runner reports each refused dial")
            .unwrap()
            .expect("the runner keeps running");
        if line.contains("cannot link to the server") && line.contains("401") {
            refusals += 1;
        }
    }
    child.start_kill().unwrap();
}

#[tokio::test]
async fn a_server_that_takes_no_links_refuses_a_valid_token_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (url, state) = server(dir.path()).await;
    let token = ultraplan_server::auth::create_runner_token(state.core.store.as_ref(), "ci")
        .await
        .unwrap();
    let mut child = runner(&url, &token, &dir.path().join("runner"))
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .expect("the runner reports the refusal")
            .unwrap()
            .expect("the runner keeps running");
        if line.contains("cannot link to the server") && line.contains("409") {
            break;
        }
    }
    child.start_kill().unwrap();
}
