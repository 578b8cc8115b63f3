//! The real `ultraplan-server` binary on a free port with its own data dir, plus helpers to
//! drive it over HTTP the way a client does. Kill it with SIGKILL and start it again to test
//! recovery.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use tokio::process::{Child, Command};
use ultraplan_protocol::api::EventsPage;
use ultraplan_protocol::events::Event;

/// A workspace binary (built by `cargo test --workspace`) beside the test executable's dir,
/// unless `ULTRAPLAN_SERVER_BIN` names the server binary to use.
pub fn workspace_bin(name: &str) -> anyhow::Result<PathBuf> {
    if name == "ultraplan-server"
        && let Some(path) = std::env::var_os("ULTRAPLAN_SERVER_BIN")
    {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .context("test executable has no target dir")?;
    let path = dir.join(name);
    if !path.is_file() {
        bail!(
            "{} not built: run the suite with scripts/test",
            path.display()
        );
    }
    Ok(path)
}

/// The static agent the sandboxes run (scripts/test exports ULTRAPLAN_AGENT_BIN).
pub fn agent_bin() -> anyhow::Result<PathBuf> {
    std::env::var_os("ULTRAPLAN_AGENT_BIN")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .context("ULTRAPLAN_AGENT_BIN is not set to the static agent: run scripts/test")
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A running server process.
pub struct ServerProcess {
    child: Option<Child>,
    pub base_url: String,
    pub token: String,
    pub data_dir: PathBuf,
    port: u16,
    env: Vec<(String, String)>,
    http: reqwest::Client,
    _dir: TempDir,
}

/// A root server mounts each execution workspace as a tmpfs (it outlives the server, so an
/// execution resumes after a restart): a test's server takes its mounts away with it, so the
/// data dir can be removed.
impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
        let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return;
        };
        let prefix = format!("{}/", self.data_dir.display());
        for point in table.lines().filter_map(|l| l.split(' ').nth(4)) {
            if point.starts_with(&prefix) {
                let _ = std::process::Command::new("umount")
                    .args(["-l", point])
                    .status();
            }
        }
    }
}

impl ServerProcess {
    /// Start a server with extra environment (runner, model, provider URLs…) and one user.
    pub async fn start(env: &[(&str, &str)]) -> anyhow::Result<Self> {
        Self::start_as(env, None).await
    }

    /// Start another replica over a database that already has the user: no user is created,
    /// and requests carry `token`.
    pub async fn start_replica(env: &[(&str, &str)], token: &str) -> anyhow::Result<Self> {
        Self::start_as(env, Some(token)).await
    }

    async fn start_as(env: &[(&str, &str)], token: Option<&str>) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let data_dir = dir.path().join("data");
        let mut server = ServerProcess {
            child: None,
            base_url: String::new(),
            token: String::new(),
            data_dir,
            port: free_port()?,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            http: reqwest::Client::new(),
            _dir: dir,
        };
        server.base_url = format!("http://127.0.0.1:{}", server.port);
        server.token = match token {
            Some(token) => token.to_owned(),
            None => server
                .admin(&["user", "add", "tester"])
                .await?
                .trim()
                .to_owned(),
        };
        server.spawn().await?;
        Ok(server)
    }

    /// A server whose model is `anthropic:claude-test-1` served by a fake at `base_url`.
    pub async fn with_fake_anthropic(runner: &str, base_url: &str) -> anyhow::Result<Self> {
        Self::start(&[
            ("ULTRAPLAN_RUNNER", runner),
            ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
            ("ANTHROPIC_API_KEY", crate::fake_models::FAKE_ANTHROPIC_KEY),
            ("ANTHROPIC_BASE_URL", base_url),
        ])
        .await
    }

    /// Run an admin subcommand against the same data dir; returns stdout.
    pub async fn admin(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = Command::new(workspace_bin("ultraplan-server")?)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .await?;
        if !output.status.success() {
            bail!(
                "{args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8(output.stdout)?)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        // On PostgreSQL the admin command writes nothing here, so the dir may not exist yet.
        std::fs::create_dir_all(&self.data_dir)?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.join("server.log"))?;
        let child = Command::new(workspace_bin("ultraplan-server")?)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["serve", "--bind", &format!("127.0.0.1:{}", self.port)])
            .env("ULTRAPLAN_AGENT_BIN", agent_bin()?)
            .env("ULTRAPLAN_LOG", "info,ultraplan_server=debug")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        self.wait_healthy().await
    }

    async fn wait_healthy(&self) -> anyhow::Result<()> {
        for _ in 0..400 {
            let ok = self
                .http
                .get(format!("{}/healthz", self.base_url))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("server did not come up; log:\n{}", self.log())
    }

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("server.log")).unwrap_or_default()
    }

    /// SIGKILL the server, as a crash would.
    pub async fn kill9(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Start the server again on the same port and data dir.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9().await?;
        self.spawn().await
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, Value)> {
        let r = self
            .http
            .get(format!("{}{path}", self.base_url))
            .bearer_auth(&self.token)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        let r = self
            .http
            .post(format!("{}{path}", self.base_url))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?;
        let status = r.status().as_u16();
        Ok((status, r.json().await.unwrap_or(Value::Null)))
    }

    /// Upload a repository bundle built from the files; returns its id.
    pub async fn upload(&self, files: &[(&str, &str)]) -> anyhow::Result<String> {
        let (bytes, sha) = tarball(files)?;
        let r = self
            .http
            .put(format!("{}/v1/bundles/{sha}", self.base_url))
            .bearer_auth(&self.token)
            .header("content-type", "application/gzip")
            .body(bytes)
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("upload failed: {}", r.text().await?);
        }
        Ok(sha)
    }

    /// Create a plan-mode session over a bundle; returns the session id.
    pub async fn create_session(&self, bundle: &str, prompt: &str) -> anyhow::Result<String> {
        let body = json!({
            "title": prompt,
            "bundle_id": bundle,
            "events": [
                {"type":"control_request","request_id":"r1",
                 "request":{"subtype":"set_permission_mode","mode":"plan","ultraplan":true}},
                {"type":"user","message":{"role":"user","content":prompt}}
            ],
            "session_context": {"base": {"commit": null, "branch": "main", "dirty": false}}
        });
        let (status, resource) = self.post("/v1/sessions", &body).await?;
        if status != 201 {
            bail!("create failed ({status}): {resource}");
        }
        resource["id"]
            .as_str()
            .map(str::to_owned)
            .context("no session id")
    }

    /// Upload [`demo_repo`] and create a session over it; returns the session id.
    pub async fn demo_session(&self, prompt: &str) -> anyhow::Result<String> {
        let bundle = self.upload(&demo_repo()).await?;
        self.create_session(&bundle, prompt).await
    }

    /// Events after `after_id`, long-polling up to `wait` seconds.
    pub async fn events(&self, id: &str, after_id: i64, wait: u64) -> anyhow::Result<EventsPage> {
        let (status, page) = self
            .get(&format!(
                "/v1/sessions/{id}/events?after_id={after_id}&wait={wait}"
            ))
            .await?;
        if status != 200 {
            bail!("events failed ({status}): {page}");
        }
        Ok(serde_json::from_value(page)?)
    }

    /// Long-poll until an event satisfies `pred` (bounded); returns all events seen so far.
    pub async fn wait_for(
        &self,
        id: &str,
        seen: &mut Vec<Event>,
        pred: impl Fn(&Event) -> bool,
    ) -> anyhow::Result<Event> {
        if let Some(hit) = seen.iter().find(|e| pred(e)) {
            return Ok(hit.clone());
        }
        for _ in 0..60 {
            let after = seen.last().map_or(0, |e| e.id);
            let page = self.events(id, after, 5).await?;
            let hit = page.data.iter().find(|e| pred(e)).cloned();
            seen.extend(page.data);
            if let Some(hit) = hit {
                return Ok(hit);
            }
        }
        bail!(
            "condition not met; events: {seen:#?}\nserver log:\n{}",
            self.log()
        )
    }

    /// The session resource.
    pub async fn session(&self, id: &str) -> anyhow::Result<Value> {
        Ok(self.get(&format!("/v1/sessions/{id}")).await?.1)
    }

    /// Post a plan decision.
    pub async fn decide(
        &self,
        id: &str,
        tool_use_id: &str,
        decision: Value,
    ) -> anyhow::Result<u16> {
        let path = format!("/v1/sessions/{id}/plans/{tool_use_id}/decision");
        Ok(self.post(&path, &decision).await?.0)
    }
}

/// The first main-agent ExitPlanMode call of an event: `(tool_use_id, plan)`.
pub fn plan_call(event: &Event) -> Option<(String, String)> {
    event
        .body
        .exit_plan_mode_calls()
        .first()
        .map(|(id, plan)| ((*id).to_owned(), plan.unwrap_or_default().to_owned()))
}

/// A gzip'd tar of the files and its sha256.
pub fn tarball(files: &[(&str, &str)]) -> anyhow::Result<(Vec<u8>, String)> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, path, data.as_bytes())?;
    }
    let tar = builder.into_inner()?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar)?;
    let bytes = gz.finish()?;
    let sha = hex::encode(Sha256::digest(&bytes));
    Ok((bytes, sha))
}

/// A small Rust project with an auth bug, for plans to be about.
pub fn demo_repo() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "Cargo.toml",
            "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("README.md", "# demo\n\nA login service.\n"),
        (
            "src/auth.rs",
            "pub fn login(user: &str, password: &str) -> bool {\n    // BUG: accepts any password\n    !user.is_empty() && password.len() >= 0\n}\n",
        ),
        (
            "src/main.rs",
            "mod auth;\nfn main() {\n    println!(\"{}\", auth::login(\"a\", \"b\"));\n}\n",
        ),
        (
            "tests/login.rs",
            "#[test]\nfn login_rejects_empty_user() {}\n",
        ),
    ]
}

/// Lines of the process table of processes that mention `needle` in their command line or
/// have a path under it mounted (sandboxed agents: their command lines name no host path, but
/// the bundle they run over is bound in their mount table, whose root field names the host
/// path). Panics when `ps` cannot be run: an empty answer must mean "no such process", never
/// "could not look".
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let output = match std::process::Command::new("ps")
        .args(["-eo", "pid,args"])
        .output()
    {
        Ok(out) if out.status.success() => out,
        Ok(out) => panic!(
            "ps -eo pid,args failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!("cannot run ps (install procps): {e}"),
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| (l.contains(needle) || mounts_under(l, needle)) && !l.contains(" ps -eo"))
        .map(str::to_owned)
        .collect()
}

/// Whether the process of a `pid,args` line has a mount whose root (the fourth field of
/// `/proc/PID/mountinfo`: the bound path within its filesystem) lies under `needle` as its
/// filesystem spells it (the path relative to the mount that holds it, e.g. when /tmp is a
/// tmpfs of its own).
fn mounts_under(line: &str, needle: &str) -> bool {
    let Some(pid) = line.split_whitespace().next() else {
        return false;
    };
    let within = within_filesystem(needle);
    std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).is_ok_and(|table| {
        table
            .lines()
            .filter_map(|m| m.split(' ').nth(3))
            .any(|root| root.starts_with(needle) || (within.len() > 1 && root.starts_with(&within)))
    })
}

/// `path` relative to the root of the filesystem that holds it (for this process's mounts).
fn within_filesystem(path: &str) -> String {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let holder = table
        .lines()
        .filter_map(|m| {
            let mut fields = m.split(' ').skip(3);
            Some((fields.next()?, fields.next()?))
        })
        .filter(|(_, point)| {
            *point == "/" || path == *point || path.starts_with(&format!("{point}/"))
        })
        .max_by_key(|(_, point)| point.len());
    match holder {
        Some((root, point)) => {
            let rest = path
                .strip_prefix(point)
                .unwrap_or(path)
                .trim_start_matches('/');
            format!("{}/{rest}", root.trim_end_matches('/'))
        }
        None => path.to_owned(),
    }
}

/// Containers (any state) Docker holds for a session. Panics when Docker cannot be asked, so no
/// count or emptiness check can be satisfied by an error line.
pub fn containers_of(session_id: &str) -> Vec<String> {
    let output = std::process::Command::new("docker")
        .args([
            "ps",
            "-aq",
            "--filter",
            &format!("label=dev.ultraplan.session={session_id}"),
        ])
        .output();
    match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect(),
        Ok(out) => panic!("docker ps failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => panic!("cannot run docker ps: {e}"),
    }
}
