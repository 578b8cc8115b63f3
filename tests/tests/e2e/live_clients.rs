//! Clients that stay attached to a session through a reverse proxy the way real ones do: the
//! review page's event stream (`GET /sessions/{id}/stream`, read as `EventSource` reads it,
//! reconnecting with `Last-Event-ID`), and a poller that long-polls the events API with `wait`
//! and retries transient failures like the terminal client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Mutex;
use ultraplan_protocol::api::EventsPage;
use ultraplan_protocol::events::Event;

/// Consecutive transient failures the terminal client survives (the fifth ends its watch).
pub(super) const CLIENT_TRANSIENT_LIMIT: u32 = 5;

/// Log a browser in through `base` for the bearer token's user: mint a one-time login link
/// over the API and spend it; the session cookie (`name=value`).
pub(super) async fn browser_login(base: &str, token: &str, next: &str) -> String {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let link: Value = http
        .post(format!("{base}/v1/login-links"))
        .bearer_auth(token)
        .json(&json!({ "next": next }))
        .send()
        .await
        .expect("mint a login link")
        .json()
        .await
        .expect("link json");
    let url = link["url"].as_str().expect("url");
    let path = &url[url.find("/login/").expect("a /login/ path")..];
    let response = http
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("spend the link");
    assert_eq!(response.status(), 303, "the link logs in");
    let cookie = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.contains("session"))
        .expect("a session cookie");
    cookie.split(';').next().unwrap_or_default().to_owned()
}

/// A session's review page as its owner sees it: logged in through a login link, then fetched.
pub(super) async fn session_page(base: &str, token: &str, id: &str) -> String {
    let path = format!("/sessions/{id}");
    let cookie = browser_login(base, token, &path).await;
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("cookie", cookie)
        .send()
        .await
        .expect("the page")
        .text()
        .await
        .expect("page html")
}

/// One `update` of the page stream: its SSE id (the last log event it covers), the ids of
/// the timeline entries (`<li class="entry" id=…>`) its operations append, and the result
/// slots (`res-<tool call>`) they fill.
#[derive(Debug, Clone)]
pub(super) struct Update {
    pub(super) id: i64,
    pub(super) entries: Vec<String>,
    pub(super) slots: Vec<String>,
}

/// The `id`s of every timeline entry in a piece of page HTML, in order.
pub(super) fn entry_ids(html: &str) -> Vec<String> {
    const MARK: &str = "<li class=\"entry\" id=\"";
    html.match_indices(MARK)
        .filter_map(|(at, _)| {
            let rest = &html[at + MARK.len()..];
            rest.find('"').map(|end| rest[..end].to_owned())
        })
        .collect()
}

/// The ids of the result slots of a page that hold a result.
pub(super) fn filled_slots(html: &str) -> Vec<String> {
    const MARK: &str = "<div class=\"slot\" id=\"";
    html.match_indices(MARK)
        .filter_map(|(at, _)| {
            let rest = &html[at + MARK.len()..];
            let end = rest.find('"')?;
            let filled = !rest[end..].starts_with("\"></div>");
            filled.then(|| rest[..end].to_owned())
        })
        .collect()
}

/// The page's event stream, one connection of it.
pub(super) struct PageStream {
    response: reqwest::Response,
    buffer: String,
    /// The proxy's name of the front that serves this connection.
    pub(super) front: String,
    /// The id of the last complete event: what a reconnect sends as `Last-Event-ID`.
    pub(super) last_id: Option<i64>,
}

impl PageStream {
    /// Connect through `base`; with `last_event_id`, resume after it as `EventSource` does.
    /// Connection errors and 5xx answers (a dead front the proxy has not noticed yet) are
    /// retried, bounded, like `EventSource`'s reconnection.
    pub(super) async fn open(
        base: &str,
        session: &str,
        cookie: &str,
        last_event_id: Option<i64>,
    ) -> PageStream {
        let http = reqwest::Client::new();
        for _ in 0..100 {
            let mut request = http
                .get(format!("{base}/sessions/{session}/stream"))
                .header("cookie", cookie)
                .header("accept", "text/event-stream");
            if let Some(id) = last_event_id {
                request = request.header("last-event-id", id.to_string());
            }
            match request.send().await {
                Ok(response) if response.status() == 200 => {
                    let front = response
                        .headers()
                        .get("x-ultraplan-front")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    return PageStream {
                        response,
                        buffer: String::new(),
                        front,
                        last_id: last_event_id,
                    };
                }
                Ok(response) if response.status().is_server_error() => {}
                Ok(response) => panic!("the stream was refused: {}", response.status()),
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the page stream could not be reopened through the proxy");
    }

    /// The next complete `update`; `None` once the connection ended (or broke).
    pub(super) async fn next(&mut self) -> Option<Update> {
        loop {
            if let Some(at) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..at + 2).collect();
                if let Some(update) = self.parse(&block) {
                    return Some(update);
                }
                continue;
            }
            // Keep-alive comments arrive every 15 s, so a silent minute means a hung proxy.
            let chunk = tokio::time::timeout(Duration::from_secs(60), self.response.chunk())
                .await
                .expect("the stream stays alive");
            match chunk {
                Ok(Some(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// An event block: an `update` carries an id and JSON data; comments carry neither.
    fn parse(&mut self, block: &str) -> Option<Update> {
        let (mut kind, mut id, mut data) = (None, None, String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                kind = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().parse::<i64>().expect("a numeric event id"));
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if id.is_some() {
            self.last_id = id;
        }
        if kind.as_deref() != Some("update") {
            return None;
        }
        let update: Value = serde_json::from_str(&data).expect("update json");
        let id = id.expect("every update has an id");
        assert_eq!(
            update["last"].as_i64(),
            Some(id),
            "the id is the update's last"
        );
        let ops = update["ops"].as_array().cloned().unwrap_or_default();
        let entries = ops
            .iter()
            .flat_map(|op| entry_ids(op["html"].as_str().unwrap_or_default()))
            .collect();
        // A slot is filled by a `result` op, or already filled in an appended entry.
        let slots = ops
            .iter()
            .flat_map(|op| match op["op"].as_str() {
                Some("result") => op["into"].as_str().map(str::to_owned).into_iter().collect(),
                _ => filled_slots(op["html"].as_str().unwrap_or_default()),
            })
            .collect();
        Some(Update { id, entries, slots })
    }

    /// Read updates into `seen` until one covers event `target`; false when the connection
    /// ended first.
    pub(super) async fn read_until(&mut self, target: i64, seen: &mut Vec<Update>) -> bool {
        while let Some(update) = self.next().await {
            let id = update.id;
            seen.push(update);
            if id >= target {
                return true;
            }
        }
        false
    }
}

/// What a poller saw.
#[derive(Debug, Default)]
pub(super) struct Polled {
    pub(super) events: Vec<Event>,
    /// Failed polls (status or error), in order.
    pub(super) failures: Vec<String>,
    /// The longest run of failures in a row.
    pub(super) worst_run: u32,
}

/// A client long-polling a session's events (`wait`, `include=session`), as the terminal
/// client does with `ULTRAPLAN_POLL_WAIT_SECS`, until stopped.
pub(super) struct Poller {
    seen: Arc<Mutex<Polled>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Poller {
    pub(super) fn start(base: &str, token: &str, session: &str) -> Poller {
        let seen: Arc<Mutex<Polled>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let url = format!("{base}/v1/sessions/{session}/events");
        let (token, s, halt) = (token.to_owned(), seen.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut run = 0;
            while !halt.load(Ordering::SeqCst) {
                let after = s.lock().await.events.last().map_or(0, |e| e.id);
                let query = format!("?after_id={after}&wait=2&include=session");
                let response = http
                    .get(format!("{url}{query}"))
                    .bearer_auth(&token)
                    .timeout(Duration::from_secs(20))
                    .send()
                    .await;
                let page = match response {
                    Ok(r) if r.status() == 200 => {
                        r.json::<EventsPage>().await.map_err(|e| e.to_string())
                    }
                    Ok(r) => Err(format!("status {}", r.status())),
                    Err(e) => Err(e.to_string()),
                };
                let mut polled = s.lock().await;
                match page {
                    Ok(page) => {
                        run = 0;
                        polled.events.extend(page.data);
                    }
                    Err(error) => {
                        run += 1;
                        polled.worst_run = polled.worst_run.max(run);
                        polled.failures.push(error);
                    }
                }
                drop(polled);
                if run > 0 {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
        });
        Poller { seen, stop, task }
    }

    /// Wait (bounded) until the poller has seen an event that satisfies `pred`.
    pub(super) async fn wait_for(&self, what: &str, pred: impl Fn(&Event) -> bool) -> Event {
        for _ in 0..1200 {
            if let Some(hit) = self.seen.lock().await.events.iter().find(|e| pred(e)) {
                return hit.clone();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let polled = self.seen.lock().await;
        panic!(
            "the poller never saw {what}; failures: {:?}; events: {:#?}",
            polled.failures, polled.events
        );
    }

    /// Stop polling; everything it saw.
    pub(super) async fn stop(self) -> Polled {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("poller");
        Arc::try_unwrap(self.seen)
            .expect("the poller's task is done")
            .into_inner()
    }
}
