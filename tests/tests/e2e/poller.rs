//! The real detached poller against the real server: `ultraplan launch` without `--no-watch`
//! starts `ultraplan watch --detached`, which polls the real server binary (bwrap sandbox, fake
//! Anthropic) and writes what it sees to its state file and log. Each outcome of the poll loop
//! (docs/ARCHITECTURE.md §3.4) is driven from the server side and read back from the client's
//! own records; a proxy that drops connections shows that four transient failures in a row are
//! survived and the fifth ends the watch with an archive.

use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use ultraplan_tests::fake_models::{FakeAnthropic, Reply, Script};
use ultraplan_tests::harness::{ServerProcess, workspace_bin};

/// How often the detached poller polls in these tests.
const INTERVAL_MS: &str = "150";

/// A home directory for the client, and the repository it launches from.
pub(super) struct Terminal {
    _dir: tempfile::TempDir,
    pub(super) home: PathBuf,
    pub(super) repo: PathBuf,
    server_url: String,
    token: String,
}

fn git(repo: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(args)
        .current_dir(repo)
        .status()
        .expect("git");
    assert!(ok.success(), "git {args:?}");
}

impl Terminal {
    pub(super) fn new(server_url: &str, token: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("src")).expect("repo");
        std::fs::write(
            repo.join("src/auth.rs"),
            "pub fn login(user: &str) -> bool {\n    !user.is_empty()\n}\n",
        )
        .expect("write");
        git(&repo, &["init", "-q", "-b", "main"]);
        let terminal = Terminal {
            _dir: dir,
            home,
            repo,
            server_url: server_url.to_owned(),
            token: token.to_owned(),
        };
        terminal.commit_all("base");
        terminal
    }

    /// Commit everything in the repository.
    pub(super) fn commit_all(&self, message: &str) {
        git(&self.repo, &["add", "-A"]);
        let identity = ["-c", "user.name=t", "-c", "user.email=t@e"];
        git(
            &self.repo,
            &[&identity[..], &["commit", "-qm", message]].concat(),
        );
    }

    pub(super) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run ultraplan")
    }

    /// [`run`](Self::run) with incremental bundles switched off: whole bundles only.
    pub(super) fn run_whole(&self, args: &[&str]) -> Output {
        self.command(args)
            .env("ULTRAPLAN_INCREMENTAL", "0")
            .output()
            .expect("run ultraplan")
    }

    /// `ultraplan <args>` in the repository, with this terminal's home and server.
    pub(super) fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(workspace_bin("ultraplan").expect("client"));
        cmd.args(args)
            .current_dir(&self.repo)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_STATE_HOME", self.home.join(".state"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("XDG_DATA_HOME", self.home.join(".data"))
            .env("ULTRAPLAN_SERVER", &self.server_url)
            .env("ULTRAPLAN_TOKEN", &self.token)
            .env("ULTRAPLAN_POLL_INTERVAL_MS", INTERVAL_MS)
            .env("ULTRAPLAN_LOG", "info");
        cmd
    }

    /// `ultraplan launch --yes --json` with the detached poller; returns the session id.
    pub(super) fn launch(&self) -> String {
        let out = self.run(&[
            "launch",
            "--yes",
            "--json",
            "ultraplan harden the login check",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let session: Value = serde_json::from_slice(&out.stdout).expect("session json");
        session["id"].as_str().expect("id").to_owned()
    }

    fn state_path(&self, id: &str) -> PathBuf {
        self.home
            .join(format!(".state/ultraplan/sessions/{id}.json"))
    }

    /// The poller's state file, once it exists and parses.
    pub(super) fn state(&self, id: &str) -> Option<Value> {
        let bytes = std::fs::read(self.state_path(id)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// The detached poller's log: one line per pill change.
    pub(super) fn log(&self, id: &str) -> String {
        std::fs::read_to_string(self.state_path(id).with_extension("log")).unwrap_or_default()
    }

    /// Waits (bounded) until the state file satisfies `done`.
    pub(super) async fn wait_state(
        &self,
        id: &str,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        for _ in 0..1200 {
            if let Some(state) = self.state(id).filter(|s| done(s)) {
                return state;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "poller never reached {what}; state: {:?}\nlog:\n{}",
            self.state(id),
            self.log(id)
        );
    }
}

pub(super) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(super) fn is_ready(state: &Value) -> bool {
    state["phase"] == "plan_ready" && state["outcome"].is_null()
}

/// Explore once (slowly, so the poller sees the session running first), then plan; a
/// rejection gets a second revision.
fn planning_script() -> Script {
    Script::from_fn(|req| {
        let results = req.tool_results();
        match results.last().map(|r| r.text.clone()) {
            None => Reply::tool_use("Glob", json!({"pattern": "**/*.rs"}))
                .slow(Duration::from_millis(1500)),
            Some(last) if last.contains("also log failures") => {
                Reply::exit_plan_mode("# Plan v2\n1. Reject empty users\n2. Log failures")
            }
            Some(_) => Reply::exit_plan_mode("# Plan v1\n1. Reject empty users"),
        }
    })
}

pub(super) async fn server_with(script: Script) -> (FakeAnthropic, ServerProcess) {
    let fake = FakeAnthropic::start(script).await;
    let server = ServerProcess::with_fake_anthropic("bwrap", &fake.base_url())
        .await
        .expect("server");
    (fake, server)
}

/// The newest pending plan's tool_use id, from the API.
async fn pending_plan(server: &ServerProcess, id: &str) -> String {
    let (status, plans) = server
        .get(&format!("/v1/sessions/{id}/plans"))
        .await
        .expect("plans");
    assert_eq!(status, 200, "{plans}");
    let pending = plans
        .as_array()
        .and_then(|all| all.iter().rev().find(|p| p["status"] == "pending"))
        .unwrap_or_else(|| panic!("no pending plan: {plans}"));
    pending["tool_use_id"]
        .as_str()
        .expect("tool_use_id")
        .to_owned()
}

async fn decide(server: &ServerProcess, id: &str, body: Value) {
    let tool_use_id = pending_plan(server, id).await;
    let (status, reply) = server
        .post(
            &format!("/v1/sessions/{id}/plans/{tool_use_id}/decision"),
            &body,
        )
        .await
        .expect("decision");
    assert_eq!(status, 200, "{reply}");
}

pub(super) async fn session_status(server: &ServerProcess, id: &str) -> String {
    let session = server.session(id).await.expect("session");
    session["session_status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(super) async fn wait_archived(server: &ServerProcess, id: &str) {
    for _ in 0..400 {
        if session_status(server, id).await == "archived" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("session {id} was never archived");
}

/// The pill lines the detached poller logged, in order.
pub(super) fn pill_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| {
            l.find('◇')
                .or_else(|| l.find('◆'))
                .map(|at| l[at..].to_owned())
        })
        .collect()
}

#[tokio::test]
async fn approve_drives_the_pill_from_running_to_ready_to_approved() {
    let (_fake, server) = server_with(planning_script()).await;
    let term = Terminal::new(&server.base_url, &server.token);
    let id = term.launch();

    let state = term.wait_state(&id, "plan_ready", is_ready).await;
    assert_eq!(state["pill"], "◆ ultraplan ready", "{state}");
    // The server says the same as the client's scanner, on both reads the client makes.
    let session = server.session(&id).await.expect("session");
    assert_eq!(session["phase"], "plan_ready", "{session}");
    assert_eq!(session["session_status"], "requires_action", "{session}");
    let (_, page) = server
        .get(&format!(
            "/v1/sessions/{id}/events?after_id=0&include=session"
        ))
        .await
        .expect("events");
    assert_eq!(page["session"]["phase"], "plan_ready", "{page}");
    let status = term.run(&["status", &id]);
    assert!(
        text(&status).contains("◆ ultraplan ready"),
        "{}",
        text(&status)
    );

    decide(&server, &id, json!({"decision": "approve"})).await;
    let state = term
        .wait_state(&id, "approved", |s| s["outcome"] == "approved")
        .await;
    assert!(
        state["plan"]
            .as_str()
            .unwrap_or_default()
            .contains("# Plan v1"),
        "{state}"
    );
    let log = term.log(&id);
    let pills = pill_lines(&log);
    let running = pills.iter().position(|l| l.starts_with("◇ ultraplan"));
    let ready = pills
        .iter()
        .position(|l| l.starts_with("◆ ultraplan ready"));
    assert!(
        matches!((running, ready), (Some(r), Some(p)) if r < p),
        "pill lines: {pills:?}; log:\n{log}"
    );
    // An approval never archives: execution continues remotely.
    assert_ne!(session_status(&server, &id).await, "archived");
    assert_eq!(state["failure"], Value::Null);
}

#[tokio::test]
async fn reject_goes_back_to_running_and_the_revision_is_ready_again() {
    let (_fake, server) = server_with(planning_script()).await;
    let term = Terminal::new(&server.base_url, &server.token);
    let id = term.launch();

    term.wait_state(&id, "plan_ready", is_ready).await;
    decide(
        &server,
        &id,
        json!({"decision": "reject", "feedback": "also log failures"}),
    )
    .await;
    term.wait_state(&id, "the revision", |s| {
        is_ready(s) && s["rejection_count"] == 1
    })
    .await;
    decide(&server, &id, json!({"decision": "teleport"})).await;
    let state = term
        .wait_state(&id, "teleport", |s| s["outcome"] == "teleport")
        .await;
    assert!(
        state["plan"]
            .as_str()
            .unwrap_or_default()
            .contains("# Plan v2"),
        "{state}"
    );
}

#[tokio::test]
async fn a_session_archived_elsewhere_stops_the_watch() {
    let (_fake, server) = server_with(planning_script()).await;
    let term = Terminal::new(&server.base_url, &server.token);
    let id = term.launch();

    term.wait_state(&id, "plan_ready", is_ready).await;
    let (status, body) = server
        .post(&format!("/v1/sessions/{id}/archive"), &json!({}))
        .await
        .expect("archive");
    assert_eq!(status, 200, "{body}");
    let state = term
        .wait_state(&id, "a failed outcome", |s| s["outcome"] == "failed")
        .await;
    assert_eq!(state["failure"], "stopped", "{state}");
}

#[tokio::test]
async fn a_session_that_dies_is_terminated_and_archived() {
    let script = Script::new()
        .then(
            Reply::tool_use("Glob", json!({"pattern": "**/*.rs"}))
                .slow(Duration::from_millis(1000)),
        )
        .then(Reply::invalid_request("this model does not take tools"));
    let (_fake, server) = server_with(script).await;
    let term = Terminal::new(&server.base_url, &server.token);
    let id = term.launch();

    let state = term
        .wait_state(&id, "a failed outcome", |s| s["outcome"] == "failed")
        .await;
    assert_eq!(state["failure"], "terminated", "{state}");
    wait_archived(&server, &id).await;
}

/// A TCP proxy in front of the server that can drop the next N connections it accepts (and
/// cut the connections it is forwarding when armed, so pooled connections fail too).
struct Proxy {
    url: String,
    drop_next: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    forwarded: Arc<AtomicUsize>,
    cut: Arc<Notify>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let proxy = Proxy {
            url,
            drop_next: Arc::default(),
            dropped: Arc::default(),
            forwarded: Arc::default(),
            cut: Arc::new(Notify::new()),
        };
        let (drop_next, dropped, forwarded, cut) = (
            proxy.drop_next.clone(),
            proxy.dropped.clone(),
            proxy.forwarded.clone(),
            proxy.cut.clone(),
        );
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let take = drop_next
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                if take.is_ok() {
                    dropped.fetch_add(1, Ordering::SeqCst);
                    drop(client);
                    continue;
                }
                forwarded.fetch_add(1, Ordering::SeqCst);
                let upstream = upstream.clone();
                let cut = cut.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = cut.notified() => {}
                    }
                });
            }
        });
        proxy
    }

    /// Drops the next `n` connections and cuts every connection being forwarded now.
    fn blip(&self, n: usize) {
        self.drop_next.store(n, Ordering::SeqCst);
        self.cut.notify_waiters();
    }

    async fn wait_dropped(&self, n: usize) {
        for _ in 0..600 {
            if self.dropped.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "the poller made only {} requests",
            self.dropped.load(Ordering::SeqCst)
        );
    }
}

/// A session whose plan is ready, watched through a proxy that then drops `count` polls.
struct Blipped {
    _fake: FakeAnthropic,
    server: ServerProcess,
    term: Terminal,
    proxy: Proxy,
    id: String,
}

async fn blips(count: usize) -> Blipped {
    let (fake, server) = server_with(planning_script()).await;
    let upstream = server.base_url.trim_start_matches("http://").to_owned();
    let proxy = Proxy::start(upstream).await;
    let term = Terminal::new(&proxy.url, &server.token);
    let id = term.launch();
    term.wait_state(&id, "plan_ready", is_ready).await;
    proxy.blip(count);
    proxy.wait_dropped(count).await;
    Blipped {
        _fake: fake,
        server,
        term,
        proxy,
        id,
    }
}

// The proxy runs on the test's runtime while the client blocks in `launch`: two threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_dropped_polls_in_a_row_are_survived() {
    let Blipped {
        _fake,
        server,
        term,
        proxy,
        id,
    } = blips(4).await;
    // The poll after the blips goes through and the watch goes on.
    let after = proxy.forwarded.load(Ordering::SeqCst);
    for _ in 0..400 {
        if proxy.forwarded.load(Ordering::SeqCst) > after {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        proxy.forwarded.load(Ordering::SeqCst) > after,
        "no poll after the blips"
    );
    let state = term.state(&id).expect("state");
    assert!(state["outcome"].is_null(), "the watch ended: {state}");

    decide(&server, &id, json!({"decision": "approve"})).await;
    let state = term
        .wait_state(&id, "approved", |s| s["outcome"] == "approved")
        .await;
    assert_eq!(state["failure"], Value::Null);
    assert_ne!(session_status(&server, &id).await, "archived");
}

// The proxy runs on the test's runtime while the client blocks in `launch`: two threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_dropped_polls_in_a_row_end_the_watch_and_archive() {
    let Blipped {
        _fake,
        server,
        term,
        id,
        ..
    } = blips(5).await;
    let state = term
        .wait_state(&id, "a failed outcome", |s| s["outcome"] == "failed")
        .await;
    assert_eq!(state["failure"], "network_or_unknown", "{state}");
    wait_archived(&server, &id).await;
}
