//! A whole cluster on this machine: one PostgreSQL, a real S3-compatible store, two server
//! replicas that run no agents behind HAProxy, and three keyless runners of capacity 2 linked
//! through the proxy. Twelve sessions launched by the real client through the proxy all reach
//! their plan on six sandboxes (parked sessions free theirs), and losing a replica to kill -9
//! loses nothing: the runners redial through the proxy and the sessions go on.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use ultraplan_tests::fake_models::{
    FAKE_ANTHROPIC_KEY, FakeAnthropic, RecordedRequest, Reply, Script,
};
use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, plan_call};
use ultraplan_tests::runners::{RunnerProcess, runner_token};
use ultraplan_tests::s3::S3Server;

use crate::faults::assert_log_whole;
use crate::poller::Terminal;

/// HAProxy in front of the replicas, in the foreground; stopped on drop. Every response
/// names the front that served it (`x-ultraplan-front: f<index>`).
pub(super) struct Proxy {
    _child: tokio::process::Child,
    pub(super) url: String,
    _dir: tempfile::TempDir,
}

fn port_of(base_url: &str) -> &str {
    base_url.rsplit(':').next().unwrap_or_default()
}

impl Proxy {
    pub(super) async fn start(fronts: &[&ServerProcess]) -> Proxy {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let servers: String = fronts
            .iter()
            .enumerate()
            .map(|(i, f)| format!("  server f{i} 127.0.0.1:{} check\n", port_of(&f.base_url)))
            .collect();
        let config = format!(
            "defaults\n  mode http\n  timeout connect 2s\n  timeout client 5m\n  timeout server 5m\n  \
             timeout tunnel 1h\n  option redispatch\n  retries 3\n\
             frontend web\n  bind 127.0.0.1:{port}\n  default_backend fronts\n  \
             http-response set-header x-ultraplan-front %[srv_name]\n\
             backend fronts\n  balance roundrobin\n  option httpchk GET /healthz\n  \
             default-server inter 300ms fall 2 rise 2\n{servers}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = tokio::process::Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("haproxy (apt install haproxy)");
        let url = format!("http://127.0.0.1:{port}");
        let proxy = Proxy {
            _child: child,
            url,
            _dir: dir,
        };
        for _ in 0..200 {
            if reqwest::get(format!("{}/healthz", proxy.url))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return proxy;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("haproxy never answered");
    }
}

/// GET through the proxy with the user's token.
async fn get(proxy: &Proxy, token: &str, path: &str) -> Value {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", proxy.url))
        .bearer_auth(token)
        .send()
        .await
        .expect("through the proxy");
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response.json().await.expect("json")
}

/// Until every session has a pending plan, through the proxy (bounded).
async fn wait_all_planned(proxy: &Proxy, token: &str, ids: &[String]) {
    for _ in 0..600 {
        let mut planned = 0;
        for id in ids {
            let plans = get(proxy, token, &format!("/v1/sessions/{id}/plans")).await;
            if plans.as_array().is_some_and(|p| !p.is_empty()) {
                planned += 1;
            }
        }
        if planned == ids.len() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("not every session reached its plan");
}

/// Plans when planning; an executing agent (it has Bash) says it is done.
fn planner() -> Script {
    Script::from_fn(|req: &RecordedRequest| {
        if req.tool_names().iter().any(|t| t == "Bash") {
            Reply::text("Implemented the plan.")
        } else {
            Reply::exit_plan_mode(
                "# Plan\n1. Check the password in `login`.\n2. Test the empty password.",
            )
        }
    })
}

/// The cluster: PostgreSQL, the S3 store, two fronts behind HAProxy with `model_env`, and
/// three runners of capacity 2 linked through the proxy.
struct Cluster {
    front1: ServerProcess,
    front2: ServerProcess,
    proxy: Proxy,
    runners: Vec<RunnerProcess>,
    _pg: Postgres,
    _s3: S3Server,
}

impl Cluster {
    async fn start(model_env: &[(&str, &str)]) -> Cluster {
        let pg = Postgres::launch().await.expect("postgres");
        let s3 = S3Server::launch("ultraplan-cluster").await.expect("s3s-fs");
        let mut env: Vec<(String, String)> = s3.server_env("cluster");
        for (key, value) in [
            ("DATABASE_URL", pg.url.as_str()),
            ("ULTRAPLAN_LOCAL_RUNNER", "off"),
            ("ULTRAPLAN_LEASE_SECONDS", "4"),
            ("ULTRAPLAN_PARK_AFTER_SECONDS", "1"),
        ]
        .iter()
        .chain(model_env)
        {
            env.push(((*key).to_owned(), (*value).to_owned()));
        }
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let front1 = ServerProcess::start(&env).await.expect("front 1");
        let front2 = ServerProcess::start_replica(&env, &front1.token)
            .await
            .expect("front 2");
        let proxy = Proxy::start(&[&front1, &front2]).await;
        let token = runner_token(&front1, "fleet").await.expect("runner token");
        let mut runners = Vec::new();
        for name in ["r1", "r2", "r3"] {
            let runner = RunnerProcess::start(&proxy.url, &token, "fleet", name, 2)
                .await
                .expect("runner");
            runners.push(runner);
        }
        Cluster {
            front1,
            front2,
            proxy,
            runners,
            _pg: pg,
            _s3: s3,
        }
    }

    /// Twelve sessions launched by the real client through the proxy, each at its plan.
    async fn twelve_planned(&self) -> Vec<String> {
        let term = Terminal::new(&self.proxy.url, &self.front1.token);
        let ids: Vec<String> = (0..12).map(|_| term.launch()).collect();
        wait_all_planned(&self.proxy, &self.front1.token, &ids).await;
        for id in &ids {
            let events = assert_log_whole(&self.front2, id).await;
            assert!(
                events.iter().any(|e| plan_call(e).is_some()),
                "{id} planned"
            );
        }
        ids
    }
}

#[tokio::test]
async fn twelve_sessions_plan_on_the_offline_planner_through_a_proxy_on_three_runners() {
    let cluster = Cluster::start(&[("ULTRAPLAN_MODEL", "offline")]).await;
    cluster.twelve_planned().await;
}

#[tokio::test]
async fn twelve_sessions_through_a_proxy_on_three_runners_survive_losing_a_replica() {
    let fake = FakeAnthropic::start(planner()).await;
    let fake_url = fake.base_url();
    let cluster = Cluster::start(&[
        ("ULTRAPLAN_MODEL", "anthropic:claude-test-1"),
        ("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY),
        ("ANTHROPIC_BASE_URL", fake_url.as_str()),
    ])
    .await;
    let ids = cluster.twelve_planned().await;
    let Cluster {
        mut front1,
        front2,
        proxy,
        runners,
        ..
    } = cluster;

    front1.kill9().await.expect("kill -9 a replica");
    // The runners linked to it redial through the proxy; a decision posted through the proxy
    // is answered by whichever runner takes the session.
    let id = &ids[0];
    let plans = get(&proxy, &front1.token, &format!("/v1/sessions/{id}/plans")).await;
    let tool_use_id = plans[0]["tool_use_id"]
        .as_str()
        .expect("tool_use_id")
        .to_owned();
    let decided = reqwest::Client::new()
        .post(format!(
            "{}/v1/sessions/{id}/plans/{tool_use_id}/decision",
            proxy.url
        ))
        .bearer_auth(&front1.token)
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .expect("decide through the proxy");
    assert_eq!(decided.status(), 200);
    let mut seen = Vec::new();
    let executed = front2
        .wait_for(id, &mut seen, |e| {
            matches!(&e.body, ultraplan_protocol::EventBody::Result(r) if r.result.as_deref().is_some_and(|t| t.starts_with("Remote execution finished")))
        })
        .await;
    if let Err(error) = executed {
        let runners: Vec<String> = runners.iter().map(RunnerProcess::log).collect();
        panic!(
            "no runner executed the approved plan after the replica died: {error}\n\
             front 1:\n{}\nrunners:\n{}",
            front1.log(),
            runners.join("\n----\n")
        );
    }
    for id in &ids {
        let events = assert_log_whole(&front2, id).await;
        assert!(
            events.iter().any(|e| plan_call(e).is_some()),
            "{id} planned"
        );
    }
    let session = get(&proxy, &front1.token, &format!("/v1/sessions/{id}")).await;
    assert_eq!(session["execution"]["state"], "finished", "{session}");
}
