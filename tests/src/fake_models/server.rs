//! Plumbing shared by both fakes: binding, state, streamed bodies that can be slowed or cut.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream;
use tokio::task::JoinHandle;

use super::record::Recorder;
use super::script::Script;

/// State every handler sees.
pub(crate) struct FakeState {
    pub(crate) script: Script,
    pub(crate) recorder: Recorder,
    /// The key requests must carry; `None` accepts any (or no) key.
    pub(crate) api_key: Option<String>,
    ids: AtomicUsize,
}

impl FakeState {
    pub(crate) fn new(script: Script, api_key: Option<String>) -> Self {
        FakeState {
            script,
            recorder: Recorder::default(),
            api_key,
            ids: AtomicUsize::new(1),
        }
    }

    /// A fresh number for tool-call ids: 1, 2, 3… per fake, in rendering order.
    pub(crate) fn next_id(&self) -> usize {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }
}

/// A running axum server; aborted on drop.
pub(crate) struct RunningServer {
    pub(crate) addr: SocketAddr,
    pub(crate) state: Arc<FakeState>,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// Bind 127.0.0.1:0 and serve. Panics when no port can be bound: test support only.
    pub(crate) async fn start(router: Router<Arc<FakeState>>, state: Arc<FakeState>) -> Self {
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(e) => panic!("fake model server cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(e) => panic!("fake model server has no local address: {e}"),
        };
        let app = router.with_state(Arc::clone(&state));
        let task = tokio::spawn(async move {
            // Serving ends only when the task is aborted; an IO error ends the fake.
            let _ = axum::serve(listener, app).await;
        });
        RunningServer { addr, state, task }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Marks a request complete when dropped: at the end of its body, or when the client hangs up.
struct CompleteOnDrop {
    recorder: Recorder,
    seq: usize,
}

impl Drop for CompleteOnDrop {
    fn drop(&mut self) {
        self.recorder.complete(self.seq);
    }
}

/// How a body is sent: frames, with a pause before each, maybe cut after some.
pub(crate) struct Frames {
    pub(crate) frames: Vec<Bytes>,
    pub(crate) delay: Duration,
    /// Drop the connection after this many frames.
    pub(crate) drop_after: Option<usize>,
}

struct BodyState {
    frames: VecDeque<Bytes>,
    delay: Duration,
    drop_after: Option<usize>,
    sent: usize,
    finished: bool,
    _guard: CompleteOnDrop,
}

/// A body that yields the frames one by one and records completion on the request `seq`.
pub(crate) fn frames_body(frames: Frames, recorder: &Recorder, seq: usize) -> Body {
    let state = BodyState {
        frames: frames.frames.into(),
        delay: frames.delay,
        drop_after: frames.drop_after,
        sent: 0,
        finished: false,
        _guard: CompleteOnDrop {
            recorder: recorder.clone(),
            seq,
        },
    };
    Body::from_stream(stream::unfold(state, next_frame))
}

async fn next_frame(mut s: BodyState) -> Option<(Result<Bytes, std::io::Error>, BodyState)> {
    if s.finished {
        return None;
    }
    if s.drop_after == Some(s.sent) {
        s.finished = true;
        // Pause first so hyper flushes what was sent: the client sees a partial body.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let err = std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "fake drop");
        return Some((Err(err), s));
    }
    let frame = s.frames.pop_front()?;
    if !s.delay.is_zero() {
        tokio::time::sleep(s.delay).await;
    }
    s.sent += 1;
    Some((Ok(frame), s))
}

/// A response with this status, content type and body.
pub(crate) fn response(status: u16, content_type: &'static str, body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Add a header whose value is known to be valid; invalid values are skipped.
pub(crate) fn add_header(response: &mut Response, name: &'static str, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

/// Split `text` into pieces of at most `max_chars` characters (never inside a character).
pub(crate) fn split_chars(text: &str, max_chars: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(max_chars.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// An SSE frame with an event name.
pub(crate) fn sse_event(event: &str, data: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// An SSE frame with only data.
pub(crate) fn sse_data(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_chars_respects_character_boundaries() {
        let cases = [
            ("", 3, vec![]),
            ("abcdefg", 3, vec!["abc", "def", "g"]),
            ("héllo", 2, vec!["hé", "ll", "o"]),
            ("ab", 0, vec!["a", "b"]),
        ];
        for (text, max, want) in cases {
            assert_eq!(split_chars(text, max), want, "{text}");
        }
    }
}
