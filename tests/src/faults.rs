//! Fault injection for the end-to-end suites: a throwaway PostgreSQL the test stops and starts,
//! a small tmpfs that fills up, a proxy that stalls a model stream mid-response, a proxy that
//! slows uploads down, and a restart of the Docker daemon. Every guard undoes its fault when
//! dropped, even when the test fails.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A PostgreSQL cluster of its own (initdb + pg_ctl, as `postgres` when run as root) whose data
/// dir survives [`Postgres::stop`] / [`Postgres::start`]. Stopped and deleted on drop.
pub struct Postgres {
    bin: PathBuf,
    dir: TempDir,
    port: u16,
    /// `postgres://postgres@127.0.0.1:<port>/postgres`
    pub url: String,
}

impl Postgres {
    /// initdb a fresh cluster and start it on a free loopback port.
    pub async fn launch() -> anyhow::Result<Self> {
        let mut bins: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .context("PostgreSQL server binaries not found: install the postgresql package")?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("pg_ctl").is_file())
            .collect();
        bins.sort();
        let bin = bins.pop().context("no /usr/lib/postgresql/*/bin/pg_ctl")?;
        let dir = tempfile::tempdir()?;
        if is_root() {
            let out = std::process::Command::new("chown")
                .args(["postgres"])
                .arg(dir.path())
                .output()?;
            if !out.status.success() {
                bail!("chown postgres: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        let port = free_port()?;
        let pg = Postgres {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            bin,
            dir,
            port,
        };
        let data = pg.data();
        pg.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"],
        )
        .await?;
        pg.start().await?;
        Ok(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("db").display().to_string()
    }

    fn command(&self, tool: &str) -> std::process::Command {
        let exe = self.bin.join(tool);
        if is_root() {
            let mut cmd = std::process::Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(exe);
            cmd
        } else {
            std::process::Command::new(exe)
        }
    }

    async fn run(&self, tool: &str, args: &[&str]) -> anyhow::Result<()> {
        let mut cmd = tokio::process::Command::from(self.command(tool));
        let out = cmd.args(args).stdin(Stdio::null()).output().await?;
        if !out.status.success() {
            bail!(
                "{tool} {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// Start (again) on the same port and data dir; waits until it accepts connections.
    pub async fn start(&self) -> anyhow::Result<()> {
        let log = self.dir.path().join("log").display().to_string();
        let sock = self.dir.path().display().to_string();
        let opts = format!(
            "-p {} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100",
            self.port
        );
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-l", &log, "-w", "-o", &opts, "start"],
        )
        .await
    }

    /// `pg_ctl stop -m fast`: open connections are terminated, as in a restart by an operator.
    pub async fn stop(&self) -> anyhow::Result<()> {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"])
            .await
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A tmpfs of a fixed size mounted over a directory (root only); lazily unmounted on drop.
pub struct Tmpfs {
    point: PathBuf,
}

impl Tmpfs {
    /// Mount a `bytes`-sized tmpfs on `point` (hiding what was there).
    pub fn mount(point: &Path, bytes: u64) -> anyhow::Result<Self> {
        if !is_root() {
            bail!("mounting a tmpfs needs root");
        }
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes},mode=0755"),
                "tmpfs",
            ])
            .arg(point)
            .output()?;
        if !out.status.success() {
            bail!("mount tmpfs: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(Tmpfs {
            point: point.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.point)
            .status();
    }
}

/// A TCP proxy in front of a model server. The first `stalls` responses that contain `marker`
/// are forwarded up to it and then stall: the connection stays open and sends nothing more.
/// Every other connection is passed through untouched.
pub struct StallingProxy {
    pub base_url: String,
    stalled: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl StallingProxy {
    pub async fn start(
        upstream: &str,
        marker: &'static [u8],
        stalls: usize,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let budget = Arc::new(AtomicUsize::new(stalls));
        let stalled = Arc::new(AtomicUsize::new(0));
        let (b, s) = (Arc::clone(&budget), Arc::clone(&stalled));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, b, s) = (upstream.clone(), Arc::clone(&b), Arc::clone(&s));
                tokio::spawn(async move {
                    let _ = relay(client, &upstream, marker, &b, &s).await;
                });
            }
        });
        Ok(StallingProxy {
            base_url,
            stalled,
            task,
        })
    }

    /// Responses stalled so far.
    pub fn stalled(&self) -> usize {
        self.stalled.load(Ordering::SeqCst)
    }
}

impl Drop for StallingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(
    client: TcpStream,
    upstream: &str,
    marker: &[u8],
    budget: &AtomicUsize,
    stalled: &AtomicUsize,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let upload = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_rx, &mut server_tx).await;
    });
    let mut seen: Vec<u8> = Vec::new();
    let mut decided = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = server_rx.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        if decided {
            client_tx.write_all(&buf[..n]).await?;
            continue;
        }
        let start = seen.len();
        seen.extend_from_slice(&buf[..n]);
        if let Some(at) = seen.windows(marker.len()).position(|w| w == marker) {
            decided = true;
            if take_one(budget) {
                stalled.fetch_add(1, Ordering::SeqCst);
                client_tx.write_all(&seen[start.min(at)..at]).await?;
                client_tx.flush().await?;
                // Hold the connection open and silent until the client gives up on it.
                let _ = upload.await;
                return Ok(());
            }
        }
        client_tx.write_all(&buf[..n]).await?;
    }
    upload.abort();
    Ok(())
}

fn take_one(budget: &AtomicUsize) -> bool {
    budget
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
            left.checked_sub(1)
        })
        .is_ok()
}

/// A TCP proxy that paces every upload (client to server) to `bytes_per_second`, in tenths of
/// a second, and counts the bytes it has handed to the server. Downloads pass untouched. When
/// the client's side closes (or dies), the server's side is dropped at once, as a connection
/// cut mid-request would be. Its receive buffers are small, so what a client has written is
/// mostly still in the client when it dies.
pub struct ThrottlingProxy {
    pub base_url: String,
    rate: Arc<AtomicU64>,
    uploaded: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl ThrottlingProxy {
    pub async fn start(upstream: &str, bytes_per_second: u64) -> anyhow::Result<Self> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(64 * 1024)?;
        socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(64)?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let rate = Arc::new(AtomicU64::new(bytes_per_second));
        let uploaded = Arc::new(AtomicU64::new(0));
        let (r, u) = (Arc::clone(&rate), Arc::clone(&uploaded));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, r, u) = (upstream.clone(), Arc::clone(&r), Arc::clone(&u));
                tokio::spawn(async move {
                    let _ = paced_relay(client, &upstream, &r, &u).await;
                });
            }
        });
        Ok(ThrottlingProxy {
            base_url,
            rate,
            uploaded,
            task,
        })
    }

    /// Bytes of uploads handed to the server so far, over every connection.
    pub fn uploaded(&self) -> u64 {
        self.uploaded.load(Ordering::SeqCst)
    }

    /// A new pace for every upload, from its next tenth of a second on.
    pub fn set_rate(&self, bytes_per_second: u64) {
        self.rate.store(bytes_per_second, Ordering::SeqCst);
    }
}

impl Drop for ThrottlingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn paced_relay(
    client: TcpStream,
    upstream: &str,
    rate: &AtomicU64,
    uploaded: &AtomicU64,
) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    let download = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_rx, &mut client_tx).await;
    });
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let tenth = usize::try_from(rate.load(Ordering::SeqCst) / 10)
            .unwrap_or(usize::MAX)
            .clamp(1, buf.len());
        let n = match client_rx.read(&mut buf[..tenth]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if server_tx.write_all(&buf[..n]).await.is_err() {
            break;
        }
        uploaded.fetch_add(n as u64, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    download.abort();
    Ok(())
}

/// A Docker daemon of the test's own (its socket, data root, exec root and pid file in a temp
/// dir; no bridge, no iptables), so stopping it disturbs no other test's containers. Point the
/// server at it with `DOCKER_HOST` = [`Dockerd::host`]. Root only. Stopped, with its
/// containers removed, on drop.
pub struct Dockerd {
    dir: TempDir,
    pub host: String,
    child: Option<std::process::Child>,
}

impl Dockerd {
    pub async fn launch() -> anyhow::Result<Self> {
        if !is_root() {
            bail!("a Docker daemon of the test's own needs root");
        }
        let dir = tempfile::tempdir()?;
        let host = format!("unix://{}/docker.sock", dir.path().display());
        let mut dockerd = Dockerd {
            dir,
            host,
            child: None,
        };
        dockerd.start().await?;
        Ok(dockerd)
    }

    /// Start the daemon (again, on the same data root) and wait until it answers.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        let root = self.dir.path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("dockerd.log"))?;
        let child = std::process::Command::new("dockerd")
            .arg("--host")
            .arg(&self.host)
            .arg("--data-root")
            .arg(root.join("data"))
            .arg("--exec-root")
            .arg(root.join("exec"))
            .arg("--pidfile")
            .arg(root.join("docker.pid"))
            .args(["--bridge", "none", "--iptables=false", "--ip-masq=false"])
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("cannot start dockerd")?;
        self.child = Some(child);
        for _ in 0..240 {
            if self
                .docker(&["info"])
                .output()
                .is_ok_and(|o| o.status.success())
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        bail!("dockerd did not answer within a minute:\n{}", self.log())
    }

    /// SIGTERM (as `service docker stop` would) and wait until the daemon has exited.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()?;
        for _ in 0..600 {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = child.kill();
        bail!("dockerd did not stop within a minute")
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default()
    }

    /// `docker -H <this daemon> <args>`.
    pub fn docker(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new("docker");
        cmd.arg("-H").arg(&self.host).args(args);
        cmd
    }

    /// Containers (any state) this daemon holds for a session. Panics when Docker cannot be
    /// asked, so an emptiness check is never satisfied by an error.
    pub fn containers_of(&self, session_id: &str) -> Vec<String> {
        let filter = format!("label=dev.ultraplan.session={session_id}");
        match self.docker(&["ps", "-aq", "--filter", &filter]).output() {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_owned)
                .collect(),
            Ok(out) => panic!("docker ps failed: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => panic!("cannot run docker ps: {e}"),
        }
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        if let Ok(out) = self.docker(&["ps", "-aq"]).output() {
            for id in String::from_utf8_lossy(&out.stdout).lines() {
                let _ = self.docker(&["rm", "-f", id]).output();
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            for _ in 0..300 {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
