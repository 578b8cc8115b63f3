//! An environment's setup in the real sandboxes: through the egress proxy to an allowed
//! upstream on 127.0.0.1 and not to another port, the secret visible to setup and masked in
//! its output, `/env` kept as the snapshot and reused, and failing and hanging setups
//! reported with their exit status or time limit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use ultraplan_runner::egress::NetworkPolicy;
use ultraplan_runner::environment::{
    EnvironmentCache, Environments, PrepareError, Prepared, SetupEnd, SetupRun,
};
use ultraplan_runner::sandbox::{DockerRunner, Sandbox, SandboxKind, SandboxLimits, select};

const SECRET: &str = "sekrit-4c1f9a";
const KEY: &str = "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd";

fn agent_binary() -> PathBuf {
    let path = std::env::var_os("ULTRAPLAN_AGENT_BIN")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .expect("ULTRAPLAN_AGENT_BIN: run with scripts/test or set it to the static agent");
    assert!(path.is_file(), "{}", path.display());
    path
}

/// An HTTP server on 127.0.0.1 answering every request with `body`.
async fn upstream(body: &'static str) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            });
        }
    });
    port
}

async fn sandbox(kind: SandboxKind, agent: &Path) -> Sandbox {
    match kind {
        SandboxKind::Docker => Sandbox::Docker(
            DockerRunner::prepare(agent, &format!("env-{}", std::process::id()))
                .await
                .expect("docker (CI starts dockerd; locally `source scripts/ensure-dockerd`)"),
        ),
        kind => select(kind, agent, "env").await.expect("bwrap"),
    }
}

fn run(workspace: &Path, commands: &[String], network: &[String], timeout: Duration) -> SetupRun {
    SetupRun {
        session_id: format!("env-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
        workspace: workspace.to_path_buf(),
        tree: PathBuf::new(),
        commands: commands.to_vec(),
        secrets: BTreeMap::from([("SETUP_TOKEN".to_owned(), SECRET.to_owned())]),
        network: NetworkPolicy::parse(network).expect("policy"),
        timeout,
        agent_binary: agent_binary(),
        limits: SandboxLimits::default(),
        log_filter: "warn".to_owned(),
        base_image: None,
    }
}

async fn build(
    environments: &Environments,
    sandbox: &Sandbox,
    key: &str,
    run: SetupRun,
) -> (Result<Prepared, PrepareError>, Vec<String>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let built = environments.build(sandbox, key, run, tx).await;
    let mut lines = Vec::new();
    while let Ok(line) = rx.try_recv() {
        lines.push(line);
    }
    (built, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_reaches_only_its_allow_list_and_its_snapshot_is_reused_under_bwrap_and_docker() {
    let agent = agent_binary();
    let allowed = upstream("hello from the allowed upstream").await;
    let refused = upstream("should never be seen").await;
    for kind in [SandboxKind::Bwrap, SandboxKind::Docker] {
        let sandbox = sandbox(kind, &agent).await;
        let workspace = tempfile::tempdir().expect("workspace");
        std::fs::write(workspace.path().join("README.md"), "# x\n").expect("write");
        let cache_dir = tempfile::tempdir().expect("cache");
        let environments = Environments::new(EnvironmentCache::new(
            cache_dir.path().to_path_buf(),
            Duration::from_secs(3600),
        ));
        let fetch = |port: u16| {
            format!(
                "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/').read().decode())\""
            )
        };
        let commands = vec![
            fetch(allowed),
            format!("{} || echo refused as expected", fetch(refused)),
            "echo \"token: $SETUP_TOKEN\"; echo kept > \"$HOME/marker\"".to_owned(),
            "touch /workspace/setup-wrote 2>/dev/null && echo WORKSPACE_WRITTEN || echo WORKSPACE_READ_ONLY".to_owned(),
        ];
        let network = vec![format!("127.0.0.1:{allowed}")];
        let setup = run(
            workspace.path(),
            &commands,
            &network,
            Duration::from_secs(120),
        );
        let (built, lines) = build(&environments, &sandbox, KEY, setup).await;
        let text = lines.join("\n");
        let Ok(Prepared::Built(lease, report)) = built else {
            panic!("{kind:?}: setup did not build: {built:?}\n{text}");
        };
        assert_eq!(report.end, SetupEnd::Succeeded, "{kind:?}");
        assert!(
            text.contains("hello from the allowed upstream"),
            "{kind:?}: {text}"
        );
        assert!(text.contains("refused as expected"), "{kind:?}: {text}");
        assert!(!text.contains("should never be seen"), "{kind:?}: {text}");
        assert!(text.contains("token: ***"), "{kind:?}: {text}");
        assert!(!text.contains(SECRET), "{kind:?}: the secret was printed");
        assert!(text.contains("WORKSPACE_READ_ONLY"), "{kind:?}: {text}");
        let blocked: Vec<(String, u16)> = report
            .blocked
            .iter()
            .map(|b| (b.host.clone(), b.port))
            .collect();
        assert_eq!(blocked, vec![("127.0.0.1".to_owned(), refused)], "{kind:?}");
        assert_eq!(
            std::fs::read_to_string(lease.tree.join("home/marker")).expect("marker"),
            "kept\n",
            "{kind:?}: what setup wrote under /env is the snapshot"
        );
        assert!(
            lease.tree.join("venv/bin/python3").exists(),
            "{kind:?}: the venv"
        );
        assert!(!workspace.path().join("setup-wrote").exists());
        drop(lease);
        let reused = environments.lookup(KEY).expect("reused");
        assert!(reused.tree.join("home/marker").is_file());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_and_hanging_setups_leave_no_snapshot() {
    let agent = agent_binary();
    let sandbox = sandbox(SandboxKind::Bwrap, &agent).await;
    let workspace = tempfile::tempdir().expect("workspace");
    let cache_dir = tempfile::tempdir().expect("cache");
    let environments = Environments::new(EnvironmentCache::new(
        cache_dir.path().to_path_buf(),
        Duration::from_secs(3600),
    ));
    // (commands, time limit, how it must end, a line its tail holds)
    type Case<'a> = (&'a [&'a str], Duration, fn(&SetupEnd) -> bool, &'a str);
    let cases: [Case; 2] = [
        (
            &["echo one", "echo about to fail; exit 4", "echo never"],
            Duration::from_secs(60),
            |end| {
                matches!(
                    end,
                    SetupEnd::Failed {
                        exit_code: Some(4),
                        ..
                    }
                )
            },
            "about to fail",
        ),
        (
            &["echo waiting; sleep 600"],
            Duration::from_secs(2),
            |end| *end == SetupEnd::TimedOut,
            "waiting",
        ),
    ];
    for (commands, timeout, ended, last) in cases {
        let commands: Vec<String> = commands.iter().map(|c| (*c).to_owned()).collect();
        let setup = run(workspace.path(), &commands, &[], timeout);
        let (built, _) = build(&environments, &sandbox, KEY, setup).await;
        let Err(PrepareError::Setup(report)) = built else {
            panic!("{commands:?}: {built:?}");
        };
        assert!(ended(&report.end), "{commands:?}: {:?}", report.end);
        assert!(
            report.tail.iter().any(|l| l.contains(last)),
            "{:?}",
            report.tail
        );
        assert!(
            !report.tail.iter().any(|l| l == "never"),
            "{:?}",
            report.tail
        );
        assert!(
            environments.lookup(KEY).is_none(),
            "no snapshot of a failed setup"
        );
    }
    let staging = cache_dir.path().join(".staging");
    let left = std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "failed builds are removed");
}
