//! Pollers that follow their session the way the client does (`after_id` = the newest event
//! they have, `include=session`), while a writer posts a message to a share of the sessions
//! every poll interval: how fast each poll is, and how long each posted event takes to reach
//! its poller. With several server replicas, session `i` is polled through replica `i mod n`
//! and written to through the next one, so every message crosses replicas.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::POLL_EVERY;

/// What a run measured.
pub struct Run {
    /// Every poll's time, sorted.
    pub polls: Vec<Duration>,
    /// Messages posted during the run.
    pub posted: usize,
    /// From a message's post (its 200) to its poller seeing it, sorted; one per message seen.
    pub lags: Vec<Duration>,
}

impl Run {
    /// Every posted message reached its poller, none later than one poll interval.
    pub fn all_in_time(&self) -> bool {
        self.lags.len() >= self.posted && self.lags.last().is_none_or(|l| *l <= POLL_EVERY)
    }
}

/// Where each session stands: the newest event id its poller has, read through the replica
/// that polls it (session `i`: `bases[i mod n]`), as its client's first poll would.
pub async fn heads(
    http: &reqwest::Client,
    bases: &[&str],
    token: &str,
    ids: &[String],
) -> Vec<i64> {
    let mut heads = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        let base = bases[i % bases.len()];
        let page = get(
            http,
            &format!("{base}/v1/sessions/{id}/events?after_id=0"),
            token,
        )
        .await;
        heads.push(page["last_id"].as_i64().unwrap_or(0));
    }
    heads
}

/// Poll every session every [`POLL_EVERY`] (staggered) for `seconds`, posting a message to
/// each of the first `active` sessions once per interval; then one last poll each. Sessions
/// are spread over the replicas `bases`.
pub async fn run(
    http: &reqwest::Client,
    (bases, token): (&[&str], &str),
    ids: &[String],
    heads: Vec<i64>,
    active: usize,
    seconds: u64,
) -> Run {
    let posted: Arc<Mutex<HashMap<(usize, i64), Instant>>> = Arc::default();
    let seen: Arc<Mutex<HashMap<(usize, i64), Instant>>> = Arc::default();
    let polls = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let stagger = POLL_EVERY / u32::try_from(ids.len().max(1)).unwrap_or(u32::MAX);
    let mut tasks = Vec::new();
    for (i, (id, head)) in ids.iter().cloned().zip(heads).enumerate() {
        let start = tokio::time::Instant::now() + stagger * u32::try_from(i).unwrap_or(0);
        let base = bases[i % bases.len()];
        let ctx = (http.clone(), base.to_owned(), token.to_owned());
        let (seen, polls) = (seen.clone(), polls.clone());
        tasks.push(tokio::spawn(async move {
            let mut after = head;
            let mut ticks = tokio::time::interval_at(start, POLL_EVERY);
            loop {
                ticks.tick().await;
                let last = Instant::now() >= deadline;
                let url = format!(
                    "{}/v1/sessions/{id}/events?after_id={after}&include=session",
                    ctx.1
                );
                let started = Instant::now();
                let page = get(&ctx.0, &url, &ctx.2).await;
                let now = Instant::now();
                polls.lock().await.push(now - started);
                for event in page["data"].as_array().into_iter().flatten() {
                    let event_id = event["id"].as_i64().unwrap_or(0);
                    seen.lock().await.insert((i, event_id), now);
                }
                after = page["last_id"].as_i64().unwrap_or(after);
                if last {
                    break;
                }
            }
        }));
    }
    let writer = tokio::spawn(write(
        (
            http.clone(),
            bases.iter().map(|b| (*b).to_owned()).collect(),
            token.to_owned(),
        ),
        active_sessions(ids, active, bunched()),
        posted.clone(),
        deadline,
    ));
    let posted_count = writer.await.expect("writer");
    for task in tasks {
        task.await.expect("poller");
    }
    let mut polls = polls.lock().await.clone();
    polls.sort();
    let seen = seen.lock().await;
    let mut lags: Vec<Duration> = posted
        .lock()
        .await
        .iter()
        .filter_map(|(key, at)| seen.get(key).map(|s| s.saturating_duration_since(*at)))
        .collect();
    lags.sort();
    Run {
        polls,
        posted: posted_count,
        lags,
    }
}

/// `ULTRAPLAN_BENCH_BUNCHED=1`: the active sessions are the first ones in poll order, so all
/// their polls fall in the same tenth of the interval (a burst), instead of spread through it
/// as independent terminals' polls are.
fn bunched() -> bool {
    std::env::var("ULTRAPLAN_BENCH_BUNCHED").is_ok_and(|v| v == "1")
}

/// The `count` sessions that get messages, with their poller's index: every n-th session,
/// so their polls are spread through the interval like everyone's, or the first `count` when
/// `bunched`.
fn active_sessions(ids: &[String], count: usize, bunched: bool) -> Vec<(usize, String)> {
    let count = count.min(ids.len());
    if count == 0 {
        return Vec::new();
    }
    let step = if bunched { 1 } else { ids.len() / count };
    (0..count)
        .map(|k| (k * step, ids[k * step].clone()))
        .collect()
}

/// One message to each active session per interval (staggered, half an interval after its
/// polls) until `deadline` minus one interval, so every message has a poll left to be seen
/// in; how many were posted. Session `i`'s messages go through replica `i + 1` (mod n), not
/// the one that polls it.
async fn write(
    (http, bases, token): (reqwest::Client, Vec<String>, String),
    active: Vec<(usize, String)>,
    posted: Arc<Mutex<HashMap<(usize, i64), Instant>>>,
    deadline: Instant,
) -> usize {
    if active.is_empty() {
        return 0;
    }
    let stop = deadline - POLL_EVERY;
    let stagger = POLL_EVERY / u32::try_from(active.len()).unwrap_or(u32::MAX);
    let mut count = 0;
    // Each message lands halfway between two polls of its session, so a fresh cache shows
    // it about half an interval later and a stale one would miss a whole interval.
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + POLL_EVERY / 2, stagger);
    let mut round = 0;
    while Instant::now() < stop {
        for (i, id) in &active {
            let i = *i;
            ticks.tick().await;
            let body = json!({"events": [
                {"type": "user", "message": {"role": "user", "content": format!("note {round}")}}
            ]});
            let base = &bases[(i + 1) % bases.len()];
            let response = http
                .post(format!("{base}/v1/sessions/{id}/events"))
                .bearer_auth(&token)
                .json(&body)
                .send()
                .await
                .expect("post");
            assert!(response.status().is_success(), "{}", response.status());
            let page: Value = response.json().await.expect("json");
            let at = Instant::now();
            for event in page["data"].as_array().into_iter().flatten() {
                posted
                    .lock()
                    .await
                    .insert((i, event["id"].as_i64().unwrap_or(0)), at);
                count += 1;
            }
        }
        round += 1;
    }
    count
}

async fn get(http: &reqwest::Client, url: &str, token: &str) -> Value {
    let response = http.get(url).bearer_auth(token).send().await.expect("get");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("json")
}
