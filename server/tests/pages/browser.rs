//! Headless Chromium driven over WebDriver. The test starts its own chromedriver on a free
//! port with a fresh profile. Missing browsers fail the test: CI installs them.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// How long any wait on the page may take.
pub const WAIT: Duration = Duration::from_secs(20);

/// One browser at a time: two cores cannot run several Chromiums quickly.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub struct Browser {
    pub client: Client,
    /// chromedriver, leader of a process group that holds Chromium too.
    _driver: Child,
    _profile: TempDir,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

fn binary(env: &str, default: &str) -> String {
    std::env::var(env).unwrap_or_else(|_| default.to_owned())
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

async fn wait_for_port(port: u16) {
    let deadline = Instant::now() + WAIT;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen on port {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Browser {
    /// Start chromedriver and a headless Chromium with a window of `width`×`height`.
    pub async fn start(width: u32, height: u32) -> Self {
        Self::start_with(width, height, &[]).await
    }

    /// Start with extra Chromium flags (e.g. `--force-dark-mode`).
    pub async fn start_with(width: u32, height: u32, extra: &[&str]) -> Self {
        let turn = ONE_AT_A_TIME.lock().await;
        let chromium = binary("ULTRAPLAN_CHROMIUM", "/usr/bin/chromium");
        let chromedriver = binary("ULTRAPLAN_CHROMEDRIVER", "/usr/bin/chromedriver");
        let port = free_port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {chromedriver} ({e}): install chromium and chromium-driver")
            });
        wait_for_port(port).await;
        let profile = tempfile::tempdir().expect("profile dir");
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-crash-reporter",
            "--disable-breakpad",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ];
        let mut args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push(format!("--window-size={width},{height}"));
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let caps = json!({ "goog:chromeOptions": { "binary": chromium, "args": args } });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let client = ClientBuilder::rustls()
            .expect("tls roots")
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("webdriver session");
        Browser {
            client,
            _driver: driver,
            _profile: profile,
            _turn: turn,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// Run a script and return its value.
    pub async fn js(&self, script: &str) -> Value {
        self.client
            .execute(script, Vec::new())
            .await
            .expect("script")
    }

    /// Wait until the script returns `true`; panics with `what` after [`WAIT`].
    pub async fn until(&self, what: &str, script: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            if self.js(script).await == Value::Bool(true) {
                return;
            }
            if Instant::now() >= deadline {
                let body = self
                    .js("return document.body ? document.body.innerText : ''")
                    .await;
                panic!(
                    "timed out waiting for {what}; page text:\n{}",
                    body.as_str().unwrap_or("")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until an element matching `css` contains `text`.
    pub async fn until_text(&self, css: &str, text: &str) {
        let script = format!(
            "var e = document.querySelector({}); return !!e && e.textContent.includes({});",
            json!(css),
            json!(text)
        );
        self.until(&format!("{css} to contain {text:?}"), &script)
            .await;
    }

    pub async fn click(&self, css: &str) {
        let element = self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .expect(css);
        element.click().await.expect("click");
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self
            .client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .expect(css);
        element.clear().await.expect("clear");
        element.send_keys(text).await.expect("type");
    }

    /// Save a screenshot of the whole page at the current width to
    /// `target/screenshots/<name>.png`.
    pub async fn screenshot(&self, name: &str, width: u32) {
        self.client
            .set_window_size(width, 900)
            .await
            .expect("resize");
        let script = "window.scrollTo(0, 0); \
            return document.documentElement.scrollHeight + outerHeight - innerHeight";
        let height = self
            .js(script)
            .await
            .as_u64()
            .unwrap_or(900)
            .clamp(600, 8000) as u32;
        self.client
            .set_window_size(width, height)
            .await
            .expect("resize");
        self.js("window.scrollTo(0, 0); return true").await;
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(dir.join(format!("{name}.png")), png).expect("write screenshot");
    }

    pub async fn close(self) {
        self.client.clone().close().await.expect("close browser");
    }
}

impl Drop for Browser {
    /// Chromium outlives a killed chromedriver; take down the whole process group, also when a
    /// test fails half-way.
    fn drop(&mut self) {
        if let Some(pid) = self._driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// `target/screenshots` of the workspace.
pub fn screenshots_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("screenshots")
}
