//! Hostile clients over raw TCP: uploads that send their headers and then a byte now and
//! then, and a server in a runtime of its own whose threads can be counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use ultraplan_server::{AppState, Config};

use crate::support::{Backend, test_db};

/// The name of the isolated server's runtime threads (workers and blocking pool).
pub const SERVER_THREADS: &str = "up-iso-server";

/// A server on its own multi-thread runtime (two workers), so its threads can be told apart
/// from the test's.
pub struct IsolatedServer {
    pub addr: SocketAddr,
    pub base: String,
    pub state: AppState,
    /// API tokens of the users asked for, in order.
    pub tokens: Vec<String>,
    stop: Option<oneshot::Sender<()>>,
}

impl IsolatedServer {
    pub fn start(users: &[&str], tweak: impl FnOnce(&mut Config) + Send + 'static) -> Self {
        let users: Vec<String> = users.iter().map(|u| (*u).to_owned()).collect();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name(SERVER_THREADS)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let db = test_db(Backend::Sqlite).await;
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                let addr = listener.local_addr().expect("addr");
                let mut config = Config::for_data_dir(&db.dir.path().join("data"));
                config.database_url = ultraplan_server::config::Secret::new(db.url.clone());
                config.bind = addr;
                config.public_url = format!("http://{addr}");
                tweak(&mut config);
                let store = ultraplan_server::open(&config).await.expect("open store");
                let state = AppState::new(config, store);
                let mut tokens = Vec::new();
                for user in &users {
                    let store = state.core.store.as_ref();
                    let token = ultraplan_server::auth::create_user_with_token(store, user)
                        .await
                        .expect("user");
                    tokens.push(token);
                }
                ready_tx.send((addr, state.clone(), tokens)).expect("ready");
                ultraplan_server::serve(listener, state, async {
                    let _ = stopped.await;
                })
                .await
                .expect("serve");
                drop(db);
            });
        });
        let (addr, state, tokens) = ready_rx.recv().expect("server started");
        IsolatedServer {
            addr,
            base: format!("http://{addr}"),
            state,
            tokens,
            stop: Some(stop),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for IsolatedServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Threads of this process whose name starts with `prefix` (from /proc/self/task).
pub fn threads_named(prefix: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .filter(|comm| comm.trim_end().starts_with(prefix))
        .count()
}

/// All threads of this process (`Threads:` in /proc/self/status).
pub fn process_threads() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What a slow client got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A response: status and the raw text (head and whatever body came with it).
    Answered(u16, String),
    /// The server closed the connection without a response.
    Closed,
    /// Still waiting when the client gave up.
    Open,
}

/// A valid start of a gzip'd tar that can go on for 64 KiB of zeros: a gzip header, then a
/// stored deflate block of 65535 bytes. The validator keeps waiting for more.
pub const GZIP_STORED_PREFIX: [u8; 15] = [
    0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xff, 0x00, 0xff, 0xff, 0x00, 0x00,
];

/// Send `head` (a request line and headers, without the blank line) and
/// [`GZIP_STORED_PREFIX`], then one zero byte every `every` until the server answers or closes, or `give_up` passes. `started` counts
/// clients whose headers are out.
pub async fn trickle(
    addr: SocketAddr,
    head: String,
    every: Duration,
    give_up: Duration,
    started: Arc<AtomicUsize>,
) -> Outcome {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return Outcome::Closed;
    };
    let mut opening = format!("{head}\r\n\r\n").into_bytes();
    opening.extend_from_slice(&GZIP_STORED_PREFIX);
    let sent = stream.write_all(&opening).await;
    started.fetch_add(1, Ordering::SeqCst);
    if sent.is_err() {
        return Outcome::Closed;
    }
    let deadline = tokio::time::Instant::now() + give_up;
    let mut buf = vec![0_u8; 4096];
    loop {
        tokio::select! {
            read = stream.read(&mut buf) => {
                return match read {
                    Ok(0) | Err(_) => Outcome::Closed,
                    Ok(n) => answered(&mut stream, buf[..n].to_vec()).await,
                };
            }
            () = tokio::time::sleep(every) => {
                // The server may have stopped reading; a failed write is not the answer yet.
                let _ = stream.write_all(&[0]).await;
            }
            () = tokio::time::sleep_until(deadline) => return Outcome::Open,
        }
    }
}

/// Read the rest of a small response (until close or a quiet second).
async fn answered(stream: &mut TcpStream, mut got: Vec<u8>) -> Outcome {
    let mut buf = vec![0_u8; 4096];
    while got.len() < 64 * 1024 {
        match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Outcome::Answered(status, text)
}

/// The head of a bundle upload that announces `length` bytes.
pub fn upload_head(sha: &str, token: &str, length: u64) -> String {
    format!(
        "PUT /v1/bundles/{sha} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/gzip\r\nContent-Length: {length}"
    )
}
