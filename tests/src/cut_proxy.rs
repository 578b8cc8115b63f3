//! A TCP proxy that cuts one connection once it has carried a number of request bytes, as a
//! dropped network link would: both sides of that connection are closed at once, mid-body.
//! Every other connection, before and after, is relayed whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct CutOnceProxy {
    pub base_url: String,
    sent: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

struct Shared {
    upstream: String,
    cut_after: u64,
    sent: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
}

impl CutOnceProxy {
    /// Relay to `upstream` (`http://host:port`); cut the first connection to carry
    /// `cut_after` request bytes.
    pub async fn start(upstream: &str, cut_after: u64) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let sent = Arc::new(AtomicU64::new(0));
        let cut = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            upstream: upstream
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
            cut_after,
            sent: Arc::clone(&sent),
            cut: Arc::clone(&cut),
        });
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    let _ = relay(client, &shared).await;
                });
            }
        });
        Ok(CutOnceProxy {
            base_url,
            sent,
            cut,
            task,
        })
    }

    /// Request bytes handed to the server, over every connection.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::SeqCst)
    }

    /// Whether the cut happened.
    pub fn was_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }
}

impl Drop for CutOnceProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let server = TcpStream::connect(&shared.upstream).await?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let download = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
    });
    let mut carried = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match client_rx.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let room = shared.cut_after.saturating_sub(carried);
        let cutting = !shared.cut.load(Ordering::SeqCst) && (n as u64) >= room;
        let pass = if cutting {
            usize::try_from(room).unwrap_or(n).min(n)
        } else {
            n
        };
        if server_tx.write_all(&buf[..pass]).await.is_err() {
            break;
        }
        carried += pass as u64;
        shared.sent.fetch_add(pass as u64, Ordering::SeqCst);
        if cutting && !shared.cut.swap(true, Ordering::SeqCst) {
            break;
        }
    }
    // Dropping both halves closes the server's side mid-request and the client's at once.
    download.abort();
    Ok(())
}
