//! Losing a server replica under live clients (kill -9): two `--no-local-runner` fronts on one
//! PostgreSQL behind HAProxy, a keyless runner linked through it, and a session with three
//! clients attached through the proxy: the review page's event stream, a poller long-polling
//! the events API, and the real terminal client's detached watch. The front that serves the
//! page stream is killed mid-session. The stream reconnects with `Last-Event-ID` (to the other
//! front) and delivers what happened while it was down and after, each timeline entry exactly
//! once, ending at the log's last event; the poller and the real client keep polling through
//! the proxy and see every event 1..n once.

use std::collections::BTreeSet;

use serde_json::json;
use ultraplan_protocol::events::EventBody;
use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, plan_call};
use ultraplan_tests::runners::{RunnerProcess, runner_token};

use crate::cluster::Proxy;
use crate::faults::assert_log_whole;
use crate::live_clients::{
    CLIENT_TRANSIENT_LIMIT, PageStream, Poller, Update, browser_login, entry_ids, filled_slots,
};
use crate::poller::{Terminal, is_ready, text};

/// Post through the proxy, retrying what a dead front the proxy has not yet noticed answers.
async fn post(base: &str, token: &str, path: &str, body: serde_json::Value) -> u16 {
    let http = reqwest::Client::new();
    for _ in 0..50 {
        let sent = http
            .post(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(r) if !r.status().is_server_error() => return r.status().as_u16(),
            _ => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
    panic!("{path}: no front answered through the proxy");
}

fn is_execution_result(e: &ultraplan_protocol::events::Event) -> bool {
    matches!(&e.body, EventBody::Result(r) if r.result.as_deref().is_some_and(|t| t.starts_with("Remote execution finished")))
}

#[tokio::test]
async fn killing_the_replica_under_a_page_stream_and_pollers_loses_nothing() {
    let pg = Postgres::launch().await.expect("postgres");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let env = [
        ("DATABASE_URL", pg.url.as_str()),
        ("ULTRAPLAN_BLOB_STORE", blob_url.as_str()),
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_MODEL", "offline"),
        ("ULTRAPLAN_LEASE_SECONDS", "4"),
        ("ULTRAPLAN_PARK_AFTER_SECONDS", "1"),
    ];
    let first = ServerProcess::start(&env).await.expect("front 0");
    let token = first.token.clone();
    let second = ServerProcess::start_replica(&env, &token)
        .await
        .expect("front 1");
    let mut fronts = [first, second];
    let proxy = Proxy::start(&[&fronts[0], &fronts[1]]).await;
    let runner_secret = runner_token(&fronts[0], "fleet").await.expect("token");
    let runner = RunnerProcess::start(&proxy.url, &runner_secret, "fleet", "r1", 2)
        .await
        .expect("runner");

    // The real client launches through the proxy; its detached watch long-polls through it.
    let term = Terminal::new(&proxy.url, &token);
    let out = term
        .command(&[
            "launch",
            "--yes",
            "--json",
            "ultraplan harden the login check",
        ])
        .env("ULTRAPLAN_POLL_WAIT_SECS", "2")
        .output()
        .expect("ultraplan launch");
    assert!(out.status.success(), "{}", text(&out));
    let launched: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = launched["id"].as_str().expect("id").to_owned();
    let poller = Poller::start(&proxy.url, &token, &id);
    let cookie = browser_login(&proxy.url, &token, &format!("/sessions/{id}")).await;

    let mut stream = PageStream::open(&proxy.url, &id, &cookie, None).await;
    let plan = poller
        .wait_for("the plan", |e| plan_call(e).is_some())
        .await;
    let mut before = Vec::new();
    assert!(
        stream.read_until(plan.id, &mut before).await,
        "the stream shows the plan"
    );

    // Kill the front that serves the stream; the stream breaks.
    let victim = match stream.front.as_str() {
        "f0" => 0,
        "f1" => 1,
        other => panic!("the proxy named no front: {other:?}"),
    };
    let survivor = 1 - victim;
    fronts[victim]
        .kill9()
        .await
        .expect("kill -9 the stream's front");
    while let Some(update) = stream.next().await {
        before.push(update);
    }
    let resume_from = stream.last_id.expect("the stream had sent an id");

    // While no stream is open the session moves on: a rejection posted through the proxy
    // reaches the runner (redialled through the proxy if it was linked to the dead front).
    let (tool_use_id, _) = plan_call(&plan).expect("plan call");
    let reject = json!({"decision": "reject", "feedback": "Also cover the empty password."});
    let decide = |tool: &str| format!("/v1/sessions/{id}/plans/{tool}/decision");
    assert_eq!(
        post(&proxy.url, &token, &decide(&tool_use_id), reject).await,
        200
    );
    let revised = poller
        .wait_for("the revised plan", |e| {
            plan_call(e).is_some_and(|(call, _)| call != tool_use_id)
        })
        .await;
    term.wait_state(&id, "the revised plan", |s| {
        is_ready(s) && s["last_event_id"].as_i64() >= Some(revised.id)
    })
    .await;

    // Reconnected as EventSource does, the stream serves from the other front and catches up.
    let mut stream = PageStream::open(&proxy.url, &id, &cookie, Some(resume_from)).await;
    assert_eq!(
        stream.front,
        format!("f{survivor}"),
        "the other front serves it"
    );
    let mut after = Vec::new();
    assert!(stream.read_until(revised.id, &mut after).await, "caught up");
    let (revised_call, _) = plan_call(&revised).expect("revised plan call");
    let approve = json!({"decision": "approve"});
    assert_eq!(
        post(&proxy.url, &token, &decide(&revised_call), approve).await,
        200
    );
    let done = poller
        .wait_for("the execution's end", is_execution_result)
        .await;
    assert!(
        stream.read_until(done.id, &mut after).await,
        "the stream shows it live"
    );
    let polled = poller.stop().await;

    let log = assert_log_whole(&fronts[survivor], &id).await;
    let n = log.last().expect("events").id;
    assert_eq!(done.id, n, "the execution's result ends the log");
    check_stream(&before, &after, resume_from, n);
    check_entries(&proxy.url, &id, &cookie, &before, &after).await;

    let ids: Vec<i64> = polled.events.iter().map(|e| e.id).collect();
    assert_eq!(
        ids,
        (1..=n).collect::<Vec<_>>(),
        "the poller saw 1..n once each"
    );
    for (seen, logged) in polled.events.iter().zip(&log) {
        assert_eq!(
            serde_json::to_value(seen).expect("json"),
            serde_json::to_value(logged).expect("json"),
            "the poller saw the logged event"
        );
    }
    assert!(
        polled.worst_run < CLIENT_TRANSIENT_LIMIT,
        "the poller's failures in a row stay under the client's limit: {:?}",
        polled.failures
    );
    let state = term.state(&id).expect("the client's state");
    assert!(
        state["failure"].is_null(),
        "the client's watch never failed: {state}"
    );
    eprintln!(
        "killed f{victim}; stream resumed after {resume_from} of {n}; poller failures: {:?}",
        polled.failures
    );
    drop(runner);
}

/// The updates' ids never go back, the first connection ends where the second resumes, and
/// the last update covers the whole log.
fn check_stream(before: &[Update], after: &[Update], resume_from: i64, n: i64) {
    let ids: Vec<i64> = before.iter().chain(after).map(|u| u.id).collect();
    assert!(
        ids.windows(2).all(|w| w[0] <= w[1]),
        "ids never go back: {ids:?}"
    );
    assert_eq!(before.last().map(|u| u.id), Some(resume_from));
    assert!(after.iter().all(|u| u.id >= resume_from), "{ids:?}");
    assert_eq!(after.last().map(|u| u.id), Some(n), "{ids:?}");
}

/// Every timeline entry and every filled result slot of the page (rendered afterwards) came
/// over the stream exactly once, and nothing else did: each log event shows on the page as an
/// entry (prompts, turns, tool calls, notes) or a slot's content (tool results), so a lost or
/// repeated event shows as a missing or repeated one.
async fn check_entries(base: &str, id: &str, cookie: &str, before: &[Update], after: &[Update]) {
    let streamed: Vec<&String> = before
        .iter()
        .chain(after)
        .flat_map(|u| &u.entries)
        .collect();
    let unique: BTreeSet<&String> = streamed.iter().copied().collect();
    assert_eq!(unique.len(), streamed.len(), "no entry twice: {streamed:?}");
    let page = reqwest::Client::new()
        .get(format!("{base}/sessions/{id}"))
        .header("cookie", cookie)
        .send()
        .await
        .expect("the page")
        .text()
        .await
        .expect("page html");
    let rendered = entry_ids(&page);
    let on_page: BTreeSet<&String> = rendered.iter().collect();
    assert_eq!(
        unique, on_page,
        "the stream carried exactly the page's entries"
    );
    let slots: Vec<&String> = before.iter().chain(after).flat_map(|u| &u.slots).collect();
    let unique_slots: BTreeSet<&String> = slots.iter().copied().collect();
    assert_eq!(
        unique_slots.len(),
        slots.len(),
        "no slot filled twice: {slots:?}"
    );
    let filled = filled_slots(&page);
    assert_eq!(
        unique_slots,
        filled.iter().collect(),
        "the stream filled exactly the page's filled slots"
    );
    assert!(
        after
            .iter()
            .any(|u| !u.entries.is_empty() && !u.slots.is_empty()),
        "the resumed stream carried entries and results"
    );
}
