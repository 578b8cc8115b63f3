//! Fault injection through the real binaries: PostgreSQL restarted mid-session, the Docker
//! daemon restarted while an agent runs, a data dir that fills up, a model stream that stalls,
//! and a client that dies mid-upload. Each fault is undone by a guard, even on failure.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_tests::fake_models::{
    FAKE_ANTHROPIC_KEY, FakeAnthropic, RecordedRequest, Reply, Script,
};
use ultraplan_tests::faults::{
    Postgres, StallingProxy, Tmpfs, docker_answers, start_dockerd, stop_dockerd,
};
use ultraplan_tests::harness::{ServerProcess, containers_of, demo_repo, plan_call, tarball};

const PLAN: &str = "# Plan\n1. Reject empty passwords in src/auth.rs";

/// Explore (Glob, Grep, Read), plan, then answer briefly once the plan is decided. Every event
/// is paced so the session spans the fault.
fn paced_script(pace: Duration) -> Script {
    Script::from_fn(move |req: &RecordedRequest| {
        let reply = match req.tool_results().len() {
            0 => Reply::tool_use("Glob", json!({"pattern": "**/*.rs"})),
            1 => Reply::tool_use("Grep", json!({"pattern": "password"})),
            2 => Reply::tool_use("Read", json!({"file_path": "src/auth.rs"})),
            3 => Reply::exit_plan_mode(PLAN),
            _ => Reply::text("Done."),
        };
        reply.slow(pace)
    })
}

fn result_of(event: &Event) -> Option<(String, bool, String)> {
    match &event.body {
        EventBody::Result(r) => Some((
            r.subtype.clone(),
            r.is_error,
            r.result.clone().unwrap_or_default(),
        )),
        _ => None,
    }
}

fn is_result(event: &Event) -> bool {
    result_of(event).is_some()
}

/// The tool calls of the log's assistant turns, in order.
fn tool_calls(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Assistant(a) => Some(a.message.content.clone()),
            _ => None,
        })
        .flatten()
        .filter_map(|block| match block {
            ContentBlock::ToolUse { name, .. } => Some(name),
            _ => None,
        })
        .collect()
}

/// One line per event: id, type, and what it carries, for failure messages.
fn summary(events: &[Event]) -> String {
    let lines: Vec<String> = events
        .iter()
        .map(|e| {
            let text = serde_json::to_string(&e.body).unwrap_or_default();
            let short: String = text.chars().take(160).collect();
            format!("{:>3} {short}", e.id)
        })
        .collect();
    lines.join("\n")
}

/// Every event of the session, page by page.
async fn all_events(server: &ServerProcess, id: &str) -> Vec<Event> {
    let mut events: Vec<Event> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.id);
        let page = server.events(id, after, 0).await.expect("events");
        if page.data.is_empty() {
            return events;
        }
        events.extend(page.data);
    }
}

/// The log is whole: ids 1..n without gaps or repeats, no model turn or result written twice,
/// and only system notes after the last result (a server restarted just after a result
/// resumes the idle agent, and says so).
async fn assert_log_whole(server: &ServerProcess, id: &str) -> Vec<Event> {
    let events = all_events(server, id).await;
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "ids 1..n without gaps or duplicates"
    );
    let mut turns = HashSet::new();
    for event in &events {
        if let EventBody::Assistant(_) = &event.body {
            let body = serde_json::to_string(&event.body).expect("json");
            assert!(
                turns.insert(body.clone()),
                "a turn was written twice: {body}"
            );
        }
    }
    let mut results = HashSet::new();
    for event in events.iter().filter(|e| is_result(e)) {
        let body = serde_json::to_string(&event.body).expect("json");
        assert!(
            results.insert(body.clone()),
            "a result was written twice: {body}"
        );
    }
    if let Some(last) = events.iter().rposition(is_result) {
        let after = &events[last + 1..];
        assert!(
            after.iter().all(|e| matches!(e.body, EventBody::System(_))),
            "only notes after the last result: {after:#?}"
        );
    }
    events
}

/// The server log's ERROR and WARN lines.
fn problems(server: &ServerProcess) -> String {
    let log = server.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARN"))
        .collect();
    lines.join("\n")
}

/// Bounded wait for a condition.
async fn eventually(what: &str, mut done: impl FnMut() -> bool, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Drive a session past a fault: the plan arrives, the decision is taken, and a result
/// follows the decision; or the session ends with a result before any plan. Error results
/// must say why (an agent lost to the fault ends its turn with one; approving its plan then
/// starts another). Returns the last result.
async fn plan_or_clear_failure(
    server: &ServerProcess,
    id: &str,
    decision: &str,
) -> (String, bool, String) {
    let mut seen = Vec::new();
    let hit = server
        .wait_for(id, &mut seen, |e| plan_call(e).is_some() || is_result(e))
        .await
        .expect("a plan or a result after the fault");
    let mut after = 0;
    if let Some((tool, plan)) = plan_call(&hit) {
        assert_eq!(plan, PLAN);
        let code = server
            .decide(id, &tool, json!({ "decision": decision }))
            .await
            .expect("decide");
        assert_eq!(code, 200, "the decision works after the fault");
        let answered = |e: &Event| {
            matches!(e.body, EventBody::User(_))
                && e.body.tool_results().iter().any(|(t, _, _)| *t == tool)
        };
        after = server
            .wait_for(id, &mut seen, answered)
            .await
            .expect("the decision is in the log")
            .id;
    }
    let done = server
        .wait_for(id, &mut seen, |e| is_result(e) && e.id > after)
        .await
        .expect("result");
    for result in seen.iter().filter_map(result_of) {
        assert!(
            !result.1 || !result.2.trim().is_empty(),
            "an error result says why: {result:?}"
        );
    }
    let (subtype, is_error, text) = result_of(&done).expect("result");
    if !is_error {
        assert_eq!(subtype, "success");
    }
    (subtype, is_error, text)
}

async fn fake_anthropic_server(
    fake_url: &str,
    runner: &str,
    extra: &[(&str, &str)],
) -> ServerProcess {
    let mut env = vec![
        ("ULTRAPLAN_RUNNER", runner),
        ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
        ("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY),
        ("ANTHROPIC_BASE_URL", fake_url),
    ];
    env.extend_from_slice(extra);
    ServerProcess::start(&env).await.expect("server")
}

#[tokio::test]
async fn postgres_restarted_mid_session_the_session_goes_on_and_the_log_stays_whole() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let fake = FakeAnthropic::start(paced_script(Duration::from_millis(300))).await;
    let server =
        fake_anthropic_server(&fake.base_url(), "bwrap", &[("DATABASE_URL", &pg.url)]).await;
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| {
            matches!(e.body, EventBody::Assistant(_))
        })
        .await
        .expect("the agent works");

    pg.stop().await.expect("stop postgres");
    // While the database is down the API answers with an error that says so, not a hang.
    let (status, body) = server
        .get(&format!("/v1/sessions/{id}"))
        .await
        .expect("the API answers while the database is down");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("database_unavailable")),
        "{body}"
    );
    eprintln!("while postgres is down: {status} {body}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    pg.start().await.expect("start postgres again");

    let (subtype, is_error, text) = plan_or_clear_failure(&server, &id, "approve").await;
    let events = assert_log_whole(&server, &id).await;
    if !is_error {
        assert_eq!(
            tool_calls(&events),
            ["Glob", "Grep", "Read", "ExitPlanMode"],
            "every turn is in the log once, none lost while the database was away: {}\n{}",
            summary(&events),
            problems(&server)
        );
    }
    eprintln!("after the postgres restart: {subtype} (error: {is_error}) {text}");
    for line in server
        .log()
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARN"))
    {
        eprintln!("server: {line}");
    }

    let next = server.demo_session("a second session").await.expect("new");
    let (subtype, is_error, _) = plan_or_clear_failure(&server, &next, "approve").await;
    assert_eq!((subtype.as_str(), is_error), ("success", false));
    assert_log_whole(&server, &next).await;
}

#[tokio::test]
async fn a_model_stream_that_stalls_is_cut_by_the_idle_timeout_and_retried() {
    let fake = FakeAnthropic::start(paced_script(Duration::ZERO)).await;
    // The first answer that starts streaming text or a tool call stalls right there.
    let proxy = StallingProxy::start(&fake.base_url(), b"event: content_block_delta", 1)
        .await
        .expect("proxy");
    let server = fake_anthropic_server(
        &proxy.base_url,
        "bwrap",
        &[("ULTRAPLAN_MODEL_IDLE_TIMEOUT_SECS", "2")],
    )
    .await;
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let (subtype, is_error, _) = plan_or_clear_failure(&server, &id, "approve").await;
    assert_eq!((subtype.as_str(), is_error), ("success", false));
    assert_eq!(proxy.stalled(), 1, "one answer stalled mid-stream");
    assert!(
        server.log().contains("stream stalled"),
        "the gateway says why it retried:\n{}",
        server.log()
    );
    let requests = fake.requests();
    assert_eq!(
        requests[0].body_text(),
        requests[1].body_text(),
        "the stalled request was sent again as it was"
    );
    let events = assert_log_whole(&server, &id).await;
    assert_eq!(events.iter().filter_map(plan_call).count(), 1);
}

/// Bytes of `n` hex characters that gzip cannot shrink much.
fn noise(n: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut out = String::with_capacity(n + 64);
    let mut block = Sha256::digest(b"seed");
    while out.len() < n {
        out.push_str(&hex::encode(block));
        block = Sha256::digest(block);
    }
    out.truncate(n);
    out
}

fn staged_or_stored(bundles: &Path, sha: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for name in [sha.to_owned(), format!("{sha}.tar.gz")] {
        if bundles.join(&name).exists() {
            found.push(name);
        }
    }
    if let Ok(entries) = std::fs::read_dir(bundles.join(".staging")) {
        found.extend(entries.flatten().map(|e| e.path().display().to_string()));
    }
    found
}

#[tokio::test]
async fn a_client_killed_mid_upload_leaves_nothing_behind() {
    let server = ServerProcess::start(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
    ])
    .await
    .expect("server");
    let big = noise(6 * 1024 * 1024);
    let mut files = demo_repo();
    files.push(("assets/blob.txt", big.as_str()));
    let (bytes, sha) = tarball(&files).expect("tarball");
    let bundles = server.data_dir.join("bundles");

    let addr = server.base_url.trim_start_matches("http://").to_owned();
    let mut conn = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let head = format!(
        "PUT /v1/bundles/{sha} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/gzip\r\nContent-Length: {}\r\n\r\n",
        server.token,
        bytes.len()
    );
    conn.write_all(head.as_bytes()).await.expect("head");
    conn.write_all(&bytes[..bytes.len() / 2])
        .await
        .expect("half");
    conn.flush().await.expect("flush");
    eventually(
        "the server staging the upload",
        || !staged_or_stored(&bundles, &sha).is_empty(),
        Duration::from_secs(30),
    )
    .await;
    drop(conn);

    eventually(
        "the half upload's files going away",
        || staged_or_stored(&bundles, &sha).is_empty(),
        Duration::from_secs(30),
    )
    .await;
    let head = reqwest::Client::new()
        .head(format!("{}/v1/bundles/{sha}", server.base_url))
        .bearer_auth(&server.token)
        .send()
        .await
        .expect("head");
    assert_eq!(head.status().as_u16(), 404, "no bundle is recorded");

    let stored = server
        .upload(&files)
        .await
        .expect("the full upload succeeds");
    assert_eq!(stored, sha);
    let id = server
        .create_session(&sha, "fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan over the bundle");
}

/// Fill a filesystem: write 1 MiB pieces until it refuses.
fn fill(path: &Path) -> u64 {
    use std::io::Write;
    let mut file = std::fs::File::create(path).expect("filler");
    let chunk = vec![0u8; 1024 * 1024];
    let mut written = 0;
    while let Ok(n) = file.write(&chunk) {
        if n == 0 {
            break;
        }
        written += n as u64;
    }
    written
}

#[tokio::test]
async fn a_full_data_dir_gives_clear_errors_and_recovers_once_space_returns() {
    let fake = FakeAnthropic::start(paced_script(Duration::ZERO)).await;
    let mut server = fake_anthropic_server(&fake.base_url(), "bwrap", &[]).await;
    let before = server
        .demo_session("before the disk fills")
        .await
        .expect("session");
    let (subtype, _, _) = plan_or_clear_failure(&server, &before, "teleport").await;
    assert_eq!(subtype, "success");
    server.kill9().await.expect("stop");

    // Move the data dir onto a 64 MiB tmpfs and start the server there.
    let saved = tempfile::tempdir().expect("tmp");
    let copy = |from: &Path, to: &Path| {
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", from.display()))
            .arg(to)
            .status()
            .expect("cp");
        assert!(status.success());
    };
    copy(&server.data_dir, saved.path());
    let _tmpfs = Tmpfs::mount(&server.data_dir, 64 * 1024 * 1024).expect("tmpfs");
    copy(saved.path(), &server.data_dir);
    // The server's log stays off the tmpfs, so it can say what went wrong once it is full.
    let log = saved.path().join("server.log");
    std::fs::remove_file(server.data_dir.join("server.log")).expect("log");
    std::os::unix::fs::symlink(&log, server.data_dir.join("server.log")).expect("symlink");
    server.restart().await.expect("start on the tmpfs");
    let bundle = server
        .upload(&demo_repo())
        .await
        .expect("upload before full");

    let filler = server.data_dir.join("filler");
    assert!(fill(&filler) > 0);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client");
    let big = noise(2 * 1024 * 1024);
    let mut files = demo_repo();
    files.push(("assets/blob.txt", big.as_str()));
    let (bytes, sha) = tarball(&files).expect("tarball");
    let r = http
        .put(format!("{}/v1/bundles/{sha}", server.base_url))
        .bearer_auth(&server.token)
        .header("content-type", "application/gzip")
        .body(bytes.clone())
        .send()
        .await
        .unwrap_or_else(|e| panic!("the upload gets an answer: {e}\n{}", server.log()));
    let status = r.status().as_u16();
    let body = r.text().await.unwrap_or_default();
    assert_eq!(
        status, 507,
        "a full disk refuses the upload, saying why: {body}"
    );
    assert!(
        body.contains("storage_full") && body.contains("disk space"),
        "{body}"
    );
    eprintln!("upload on a full disk: {status} {body}");

    let (status, body) = server
        .post(
            "/v1/sessions",
            &json!({
                "title": "on a full disk", "bundle_id": bundle,
                "events": [{"type":"user","message":{"role":"user","content":"fix it"}}],
                "session_context": {"base": {"commit": null, "branch": "main", "dirty": false}}
            }),
        )
        .await
        .expect("create answers");
    eprintln!("create on a full disk: {status} {body}");
    // Either the session is made (its first event fit) or it is refused, saying why.
    let during = body["id"].as_str().map(str::to_owned);
    if during.is_none() {
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (507, Some("storage_full")),
            "{body}"
        );
    }
    let (health, _) = server.get("/healthz").await.expect("healthz");
    assert_eq!(health, 200, "the server stays up");
    assert_log_whole(&server, &before).await;

    std::fs::remove_file(&filler).expect("free the space");
    if let Some(during) = &during {
        server
            .wait_for(during, &mut Vec::new(), |e| {
                plan_call(e).is_some() || is_result(e)
            })
            .await
            .expect("the session made on a full disk moves or ends");
        assert_log_whole(&server, during).await;
    }
    let stored = server
        .upload(&files)
        .await
        .unwrap_or_else(|e| panic!("upload once space returns: {e}\n{}", problems(&server)));
    assert_eq!(stored, sha);
    let after = server
        .create_session(&stored, "after")
        .await
        .expect("session");
    let (subtype, is_error, _) = plan_or_clear_failure(&server, &after, "approve").await;
    assert_eq!((subtype.as_str(), is_error), ("success", false));
    assert_log_whole(&server, &after).await;
    assert_log_whole(&server, &before).await;
}

/// Restarts dockerd when dropped if it is not answering, so a failed test leaves Docker up.
struct DockerBack;

impl Drop for DockerBack {
    fn drop(&mut self) {
        if !docker_answers() {
            let _ = std::process::Command::new("sh")
                .args(["-c", "dockerd >>/tmp/ultraplan-dockerd.log 2>&1 &"])
                .status();
        }
    }
}

#[tokio::test]
async fn docker_daemon_restarted_while_an_agent_runs() {
    assert!(
        docker_answers(),
        "the docker runner tests need a Docker engine (scripts/ensure-dockerd)"
    );
    let _back = DockerBack;
    let fake = FakeAnthropic::start(paced_script(Duration::from_millis(60))).await;
    let server = fake_anthropic_server(&fake.base_url(), "docker", &[]).await;
    let id = server
        .demo_session("fix the login bug")
        .await
        .expect("session");
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| {
            matches!(e.body, EventBody::Assistant(_))
        })
        .await
        .expect("the agent works");
    assert_eq!(containers_of(&id).len(), 1, "the agent runs in a container");

    stop_dockerd().await.expect("stop dockerd");
    start_dockerd().await.expect("start dockerd");

    let (subtype, is_error, text) = plan_or_clear_failure(&server, &id, "approve").await;
    eprintln!("after the dockerd restart: {subtype} (error: {is_error}) {text}");
    assert_log_whole(&server, &id).await;
    eventually(
        "the session's containers going away",
        || containers_of(&id).is_empty(),
        Duration::from_secs(60),
    )
    .await;
    let (health, _) = server.get("/healthz").await.expect("healthz");
    assert_eq!(health, 200);

    let next = server.demo_session("after the restart").await.expect("new");
    let (subtype, is_error, _) = plan_or_clear_failure(&server, &next, "approve").await;
    assert_eq!((subtype.as_str(), is_error), ("success", false));
    assert_log_whole(&server, &next).await;
    eventually(
        "the new session's container going away",
        || containers_of(&next).is_empty(),
        Duration::from_secs(60),
    )
    .await;
}
