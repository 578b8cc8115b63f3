//! A real S3-compatible server for the blob store suites: `s3s-fs` (S3 over a directory) on a
//! free loopback port, with its own keys and a bucket, stopped and deleted on drop. The test
//! reads and changes objects through the directory it serves, as an operator with access to
//! the storage could.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use tempfile::TempDir;
use tokio::process::{Child, Command};

/// How to get the server binary, said whenever it is missing.
pub const INSTALL_HINT: &str = "cargo install s3s-fs --version 0.14.1 --locked --features binary \
     (or set S3S_FS_BIN to its path)";

const ACCESS_KEY: &str = "ultraplan-test-access";
const SECRET_KEY: &str = "ultraplan-test-secret-key";

/// A running `s3s-fs`.
pub struct S3Server {
    child: Child,
    dir: TempDir,
    port: u16,
    /// `http://127.0.0.1:<port>`
    pub endpoint: String,
    pub bucket: String,
}

/// `S3S_FS_BIN`, else `s3s-fs` on PATH, else in cargo's bin dir.
pub fn s3s_fs_bin() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("S3S_FS_BIN").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        bail!(
            "S3S_FS_BIN={} is not a file; install it: {INSTALL_HINT}",
            path.display()
        );
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        dirs.push(PathBuf::from(home).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join("s3s-fs"))
        .find(|p| p.is_file())
        .with_context(|| {
            format!("the S3-compatible test server s3s-fs is not installed: {INSTALL_HINT}")
        })
}

impl S3Server {
    /// Start on a free port with one (empty) bucket.
    pub async fn launch(bucket: &str) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("data").join(bucket))?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = spawn(dir.path(), port)?;
        let mut server = S3Server {
            child,
            dir,
            port,
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: bucket.to_owned(),
        };
        server.wait_listening().await?;
        Ok(server)
    }

    async fn wait_listening(&mut self) -> anyhow::Result<()> {
        for _ in 0..400 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            if !self.running() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        bail!("s3s-fs did not start listening; log:\n{}", self.log())
    }

    /// Kill the server, as an outage would; its data stays.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        self.child.start_kill()?;
        self.child.wait().await?;
        Ok(())
    }

    /// Start it again on the same port and data.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.child = spawn(self.dir.path(), self.port)?;
        self.wait_listening().await
    }

    /// The environment a server needs to use `s3://<bucket>/<prefix>` here.
    pub fn server_env(&self, prefix: &str) -> Vec<(String, String)> {
        [
            (
                "ULTRAPLAN_BLOB_STORE",
                format!("s3://{}/{prefix}", self.bucket),
            ),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// Where the object `key` of the bucket is stored on disk.
    pub fn object_path(&self, key: &str) -> PathBuf {
        self.dir.path().join("data").join(&self.bucket).join(key)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("s3s-fs.log")).unwrap_or_default()
    }

    /// The S3 operations the server has answered so far, in order (`PutObject`,
    /// `UploadPart`, `GetObject`, …), read from its debug log.
    pub fn operations(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter_map(|l| l.split("resolved route, op: ").nth(1))
            .filter_map(|rest| rest.split(',').next())
            .map(str::to_owned)
            .collect()
    }

    /// The directory the bucket lives in.
    pub fn bucket_dir(&self) -> PathBuf {
        self.dir.path().join("data").join(&self.bucket)
    }

    /// Whether the server process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// `s3s-fs` serving `<dir>/data` on the port, logging (appending) to `<dir>/s3s-fs.log`.
fn spawn(dir: &Path, port: u16) -> anyhow::Result<Child> {
    let bin = s3s_fs_bin()?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("s3s-fs.log"))?;
    Command::new(&bin)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
        .arg(dir.join("data"))
        .env("RUST_LOG", "s3s=debug,s3s_fs=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

/// Every file under `dir`, relative, sorted (for messages).
pub fn files_under(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(base, &path, out);
            } else if let Ok(rel) = path.strip_prefix(base) {
                out.push(rel.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
