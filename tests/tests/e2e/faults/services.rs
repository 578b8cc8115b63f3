//! Services that go away under a running session: PostgreSQL, the Docker daemon, a model
//! stream.

use std::time::Duration;

use ultraplan_protocol::events::EventBody;
use ultraplan_tests::fake_models::FakeAnthropic;
use ultraplan_tests::faults::{Dockerd, Postgres, StallingProxy};
use ultraplan_tests::harness::plan_call;

use super::*;

#[tokio::test]
async fn postgres_restarted_mid_session_the_session_goes_on_and_the_log_stays_whole() {
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let fake = FakeAnthropic::start(paced_script(Duration::from_millis(300))).await;
    let server =
        fake_anthropic_server(&fake.base_url(), "bwrap", &[("DATABASE_URL", &pg.url)]).await;
    let id = working_session(&server).await;

    pg.stop().await.expect("stop postgres");
    // While the database is down a request that needs it gets an error that says so, not a
    // hang. (Idle polls of the session are answered from memory.)
    let (status, body) = server
        .get("/v1/sessions")
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

/// The daemon is one of the test's own: stopping the shared one would kill every other Docker
/// test's containers. It fails (never skips) where no dockerd can be started.
#[tokio::test]
async fn docker_daemon_restarted_while_an_agent_runs() {
    let mut dockerd = Dockerd::launch()
        .await
        .expect("a Docker daemon of the test's own (dockerd from docker.io, as root)");
    let fake = FakeAnthropic::start(paced_script(Duration::from_millis(60))).await;
    let server = fake_anthropic_server(
        &fake.base_url(),
        "docker",
        &[("DOCKER_HOST", &dockerd.host)],
    )
    .await;
    let id = working_session(&server).await;
    assert_eq!(
        dockerd.containers_of(&id).len(),
        1,
        "the agent runs in a container"
    );

    dockerd.stop().await.expect("stop dockerd");
    dockerd.start().await.expect("start dockerd again");

    let (subtype, is_error, text) = plan_or_clear_failure(&server, &id, "approve").await;
    eprintln!("after the dockerd restart: {subtype} (error: {is_error}) {text}");
    let events = assert_log_whole(&server, &id).await;
    for result in events.iter().filter_map(result_of) {
        eprintln!("result in the log: {result:?}");
    }
    eventually(
        "the session's containers going away",
        || dockerd.containers_of(&id).is_empty(),
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
        || dockerd.containers_of(&next).is_empty(),
        Duration::from_secs(60),
    )
    .await;
}

/// A demo session whose agent has said something: the fault strikes a session at work.
async fn working_session(server: &ServerProcess) -> String {
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
    id
}
