//! The poll loop against a scripted server, on virtual time: every outcome, and whether the
//! remote session is archived for it.

use std::sync::Mutex;
use std::time::Duration;

use crate::support::events::{self, PLAN};
use crate::support::server::{Config, Reply, SESSION_ID, Server};
use ultraplan::api::Client;
use ultraplan::poll::{Clock, Notifier, PollConfig, Watcher};
use ultraplan::state::{FailureReason, Outcome, SessionState, StateStore};
use ultraplan_protocol::session::Phase;

/// Time that passes only when the loop sleeps.
#[derive(Default)]
struct VirtualClock {
    now: Mutex<Duration>,
}

impl Clock for VirtualClock {
    fn now(&self) -> Duration {
        *self.now.lock().unwrap()
    }

    fn sleep(&self, duration: Duration) -> ultraplan::poll::driver::Sleep<'_> {
        *self.now.lock().unwrap() += duration;
        Box::pin(tokio::task::yield_now())
    }
}

#[derive(Default)]
struct Recorder {
    phases: Mutex<Vec<Phase>>,
}

impl Notifier for Recorder {
    fn notify(&self, phase: Phase, _state: &SessionState) {
        self.phases.lock().unwrap().push(phase);
    }
}

struct Run {
    end: SessionState,
    server: Server,
    notified: Vec<Phase>,
    updates: usize,
    stored: Option<SessionState>,
}

fn config(timeout_secs: u64) -> PollConfig {
    PollConfig {
        timeout: Duration::from_secs(timeout_secs),
        ..PollConfig::default()
    }
}

async fn watch(script: Vec<Reply>, poll: PollConfig) -> Run {
    watch_until(script, poll, std::future::pending()).await
}

async fn watch_until(
    script: Vec<Reply>,
    poll: PollConfig,
    stop: impl std::future::Future<Output = ()>,
) -> Run {
    watch_with(Config::default(), script, poll, stop).await
}

async fn watch_with(
    server_config: Config,
    script: Vec<Reply>,
    poll: PollConfig,
    stop: impl std::future::Future<Output = ()>,
) -> Run {
    let server = Server::start(server_config, script);
    let client = Client::new(&server.url, Some("token")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::new(dir.path());
    let clock = VirtualClock::default();
    let notifier = Recorder::default();
    let watcher = Watcher {
        client: &client,
        store: Some(&store),
        clock: &clock,
        notifier: &notifier,
        wait: None,
    };
    let state = SessionState::new(SESSION_ID, &server.url, "u", "t");
    let mut updates = 0;
    let end = watcher
        .run(state, poll, stop, &mut |_: &SessionState| updates += 1)
        .await;
    let stored = store.load(SESSION_ID).unwrap();
    let notified = notifier.phases.lock().unwrap().clone();
    Run {
        end,
        server,
        notified,
        updates,
        stored,
    }
}

fn page(events: Vec<ultraplan_protocol::EventBody>, status: &'static str) -> Reply {
    Reply::Page(events, status)
}

fn failure(run: &Run) -> Option<FailureReason> {
    run.end.failure
}

#[tokio::test]
async fn approved_finishes_without_archiving() {
    let run = watch(
        vec![
            page(vec![events::text("looking around")], "running"),
            page(vec![events::plan_call("t1")], "requires_action"),
            page(vec![events::approved("t1")], "running"),
        ],
        config(1800),
    )
    .await;
    assert_eq!(run.end.outcome, Some(Outcome::Approved));
    assert_eq!(run.end.plan.as_deref(), Some(PLAN));
    assert_eq!(
        run.server.recorded().archives,
        0,
        "approval must not archive"
    );
    assert_eq!(run.notified, [Phase::PlanReady]);
    assert_eq!(
        run.stored.as_ref().unwrap().outcome,
        Some(Outcome::Approved)
    );
    assert_eq!(run.stored.unwrap().last_event_id, 3);
    assert!(run.updates >= 3);
}

#[tokio::test]
async fn teleport_stores_the_plan_and_leaves_archiving_to_the_choice() {
    let run = watch(
        vec![page(
            vec![events::plan_call("t1"), events::teleported("t1")],
            "idle",
        )],
        config(1800),
    )
    .await;
    assert_eq!(run.end.outcome, Some(Outcome::Teleport));
    let stored = run.stored.unwrap();
    assert_eq!(stored.plan.as_deref(), Some(PLAN));
    assert_eq!(stored.teleport_waiting(), Some(PLAN));
    assert_eq!(run.server.recorded().archives, 0);
}

#[tokio::test]
async fn rejected_then_approved() {
    let run = watch(
        vec![
            page(vec![events::plan_call("t1")], "requires_action"),
            page(vec![events::rejected("t1")], "running"),
            page(vec![events::plan_call("t2")], "requires_action"),
            page(vec![events::approved("t2")], "running"),
        ],
        config(1800),
    )
    .await;
    assert_eq!(run.end.outcome, Some(Outcome::Approved));
    assert_eq!(run.end.rejection_count, 1);
    assert_eq!(run.notified, [Phase::PlanReady, Phase::PlanReady]);
    assert_eq!(run.server.recorded().archives, 0);
}

#[tokio::test]
async fn terminated_archives() {
    let run = watch(
        vec![page(
            vec![events::terminated("error_during_execution")],
            "idle",
        )],
        config(1800),
    )
    .await;
    assert_eq!(failure(&run), Some(FailureReason::Terminated));
    assert!(
        run.end
            .failure_message
            .as_deref()
            .unwrap()
            .contains("error_during_execution")
    );
    assert_eq!(run.server.recorded().archives, 1);
    assert!(run.end.archived);
}

#[tokio::test]
async fn pending_then_timeout_is_timeout_pending() {
    let run = watch(
        vec![page(vec![events::plan_call("t1")], "requires_action")],
        config(30),
    )
    .await;
    assert_eq!(failure(&run), Some(FailureReason::TimeoutPending));
    let recorded = run.server.recorded();
    assert_eq!(recorded.archives, 1);
    assert_eq!(
        recorded.events_polls, 11,
        "one poll every 3 s for 30 s, then the last"
    );
}

#[tokio::test]
async fn no_plan_then_timeout_is_timeout_no_plan() {
    let run = watch(
        vec![page(vec![events::text("thinking")], "running")],
        config(9),
    )
    .await;
    assert_eq!(failure(&run), Some(FailureReason::TimeoutNoPlan));
    assert_eq!(run.server.recorded().archives, 1);
}

#[tokio::test]
async fn approval_without_marker_is_extract_marker_missing() {
    let run = watch(
        vec![
            page(vec![events::plan_call("t1")], "requires_action"),
            page(vec![events::approved_without_marker("t1")], "running"),
        ],
        config(1800),
    )
    .await;
    assert_eq!(failure(&run), Some(FailureReason::ExtractMarkerMissing));
    assert_eq!(run.server.recorded().archives, 1);
}

#[tokio::test]
async fn four_transient_blips_survive() {
    let mut script: Vec<Reply> = (0..4).map(|_| Reply::Error(503)).collect();
    script.push(page(
        vec![events::plan_call("t1"), events::approved("t1")],
        "running",
    ));
    let run = watch(script, config(1800)).await;
    assert_eq!(run.end.outcome, Some(Outcome::Approved));
    assert_eq!(run.server.recorded().archives, 0);
}

#[tokio::test]
async fn five_transient_failures_end_it() {
    let mut script: Vec<Reply> = (0..4).map(|_| Reply::Error(502)).collect();
    script.push(page(vec![], "running"));
    script.extend((0..5).map(|_| Reply::Error(500)));
    let run = watch(script, config(1800)).await;
    assert_eq!(failure(&run), Some(FailureReason::NetworkOrUnknown));
    assert!(
        run.end
            .failure_message
            .as_deref()
            .unwrap()
            .contains("5 polls in a row")
    );
    let recorded = run.server.recorded();
    assert_eq!(recorded.events_polls, 10);
    assert_eq!(recorded.archives, 1);
}

#[tokio::test]
async fn a_4xx_ends_it_at_once() {
    let run = watch(vec![Reply::Error(403)], config(1800)).await;
    assert_eq!(failure(&run), Some(FailureReason::NetworkOrUnknown));
    assert!(
        run.end
            .failure_message
            .as_deref()
            .unwrap()
            .contains("scripted failure")
    );
    let recorded = run.server.recorded();
    assert_eq!(recorded.events_polls, 1);
    assert_eq!(recorded.archives, 1);
}

#[tokio::test]
async fn archived_elsewhere_is_stopped() {
    let run = watch(
        vec![page(vec![events::text("hi")], "archived")],
        config(1800),
    )
    .await;
    assert_eq!(failure(&run), Some(FailureReason::Stopped));
    assert_eq!(
        run.server.recorded().archives,
        1,
        "archive is still called; its 409 counts"
    );
    assert!(run.end.archived);
}

#[tokio::test]
async fn a_stop_request_is_stopped_and_archives() {
    let run = watch_until(vec![], config(1800), async {}).await;
    assert_eq!(failure(&run), Some(FailureReason::Stopped));
    assert_eq!(run.server.recorded().archives, 1);
}

#[tokio::test]
async fn pages_with_more_are_read_in_one_poll() {
    let run = watch(
        vec![
            Reply::More(vec![events::text("a")]),
            Reply::More(vec![events::plan_call("t1")]),
            page(vec![events::approved("t1")], "running"),
        ],
        config(1800),
    )
    .await;
    assert_eq!(run.end.outcome, Some(Outcome::Approved));
    assert_eq!(run.server.recorded().events_polls, 3);
    assert!(
        run.notified.is_empty(),
        "the plan was decided within one poll"
    );
}

#[tokio::test]
async fn no_response_is_transient() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let client = Client::new(&url, None).unwrap();
    let err = client.events(SESSION_ID, 0, None).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn pages_that_carry_the_session_need_one_request_per_poll() {
    // (pages carry the session, session lookups expected)
    for (carry, lookups) in [(true, 0), (false, 3)] {
        let server_config = Config {
            pages_carry_session: carry,
            ..Config::default()
        };
        let run = watch_with(
            server_config,
            vec![
                page(vec![events::text("looking around")], "running"),
                page(vec![events::plan_call("t1")], "requires_action"),
                page(vec![events::approved("t1")], "running"),
            ],
            config(1800),
            std::future::pending(),
        )
        .await;
        assert_eq!(run.end.outcome, Some(Outcome::Approved), "carry={carry}");
        let requests = run.server.recorded().requests;
        let session_gets = requests
            .iter()
            .filter(|r| r.as_str() == format!("GET /v1/sessions/{SESSION_ID}"))
            .count();
        assert_eq!(session_gets, lookups, "carry={carry}: {requests:#?}");
        assert_eq!(run.notified, [Phase::PlanReady]);
    }
}
