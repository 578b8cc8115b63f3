//! Sessions on a fleet (docs/ARCHITECTURE.md §5.2, §5.3, §8): one front replica with no runner
//! of its own and 1, 2 or 3 runners, all real processes with bwrap sandboxes and the offline
//! planner: `serve` replicas on the same PostgreSQL, or keyless runners linked to the front.
//!
//! - claim latency: sessions created one at a time on the front and archived once planned,
//!   so a runner always has a free slot; the runners' own records (`claimed a session … waited_ms=`) give queued → claimed;
//! - throughput: a burst of sessions created at once; time until every one has its plan, with
//!   agents parked soon after (so the waiting ones free their slots).
//!
//!   bench/fleet.sh [BURST=24] [replicas|keyless|both]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;
use std::time::Instant;

use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, demo_repo, plan_call};
use ultraplan_tests::runners::{RunnerProcess, runner_token};

const SEQUENTIAL: usize = 20;

/// How the fleet's runners run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `serve` replicas on the database, each with its own runner.
    Replicas,
    /// Keyless `ultraplan-runner` processes linked to the front.
    Keyless,
}

struct Fleet {
    front: Arc<ServerProcess>,
    runners: Vec<ServerProcess>,
    links: Vec<RunnerProcess>,
    _pg: Postgres,
    _blobs: tempfile::TempDir,
}

impl Fleet {
    /// The logs that record claims: each replica's, or the front's for its linked runners.
    fn claim_logs(&self) -> Vec<String> {
        if self.links.is_empty() {
            self.runners.iter().map(ServerProcess::log).collect()
        } else {
            vec![self.front.log()]
        }
    }
}

async fn fleet(kind: Kind, runners: usize) -> Fleet {
    let pg = Postgres::launch().await.expect("postgres");
    let blobs = tempfile::tempdir().expect("blobs");
    let blob_url = format!("file://{}", blobs.path().display());
    let base = |name: String| {
        vec![
            ("DATABASE_URL".to_owned(), pg.url.clone()),
            ("ULTRAPLAN_BLOB_STORE".to_owned(), blob_url.clone()),
            ("ULTRAPLAN_RUNNER".to_owned(), "bwrap".to_owned()),
            ("ULTRAPLAN_MODEL".to_owned(), "offline".to_owned()),
            ("ULTRAPLAN_MAX_RUNNING".to_owned(), "2".to_owned()),
            ("ULTRAPLAN_PARK_AFTER_SECONDS".to_owned(), "1".to_owned()),
            ("ULTRAPLAN_RUNNER_NAME".to_owned(), name),
        ]
    };
    let mut front_env = base("front".to_owned());
    front_env.push(("ULTRAPLAN_LOCAL_RUNNER".to_owned(), "off".to_owned()));
    let refs: Vec<(&str, &str)> = front_env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let front = ServerProcess::start(&refs).await.expect("front");
    let mut started = Vec::new();
    let mut links = Vec::new();
    if kind == Kind::Keyless {
        let token = runner_token(&front, "bench").await.expect("token");
        for n in 0..runners {
            let name = format!("runner-{n}");
            let link = RunnerProcess::start(&front.base_url, &token, "bench", &name, 2)
                .await
                .expect("runner");
            links.push(link);
        }
    }
    for n in (0..runners).filter(|_| kind == Kind::Replicas) {
        let env = base(format!("runner-{n}"));
        let refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        started.push(
            ServerProcess::start_replica(&refs, &front.token)
                .await
                .expect("runner"),
        );
    }
    Fleet {
        front: Arc::new(front),
        runners: started,
        links,
        _pg: pg,
        _blobs: blobs,
    }
}

/// Create a session on the front and wait for its plan; its id.
async fn to_plan(front: &ServerProcess, bundle: &str, prompt: &str) -> String {
    let id = front.create_session(bundle, prompt).await.expect("create");
    let mut seen = Vec::new();
    front
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("plan");
    id
}

/// Until no runner holds the session (its agent stopped and its slot is free again).
async fn released(front: &ServerProcess, id: &str) {
    for _ in 0..600 {
        let resource = front.session(id).await.expect("resource");
        if resource
            .get("runner")
            .is_none_or(serde_json::Value::is_null)
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let log = front.log();
    let mentions: Vec<&str> = log.lines().filter(|l| l.contains(id)).collect();
    panic!("session {id} was never released:\n{}", mentions.join("\n"));
}

/// Every `waited_ms=` logged when a session was claimed.
fn claim_waits(logs: &[String]) -> Vec<u64> {
    let mut waits: Vec<u64> = logs
        .iter()
        .flat_map(|log| {
            log.lines()
                .filter(|l| l.contains("claimed a session"))
                .filter_map(|l| {
                    let (_, rest) = l.split_once("waited_ms=")?;
                    rest.split(|c: char| !c.is_ascii_digit())
                        .next()?
                        .parse()
                        .ok()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    waits.sort_unstable();
    waits
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let at = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[at]
}

async fn run(kind: Kind, runners: usize, burst: usize) {
    let fleet = fleet(kind, runners).await;
    let bundle = fleet.front.upload(&demo_repo()).await.expect("upload");
    for i in 0..SEQUENTIAL {
        let id = to_plan(&fleet.front, &bundle, &format!("fix the login bug {i}")).await;
        // Archived, its slot is free again: the next claim measures the claim alone.
        let (code, _) = fleet
            .front
            .post(
                &format!("/v1/sessions/{id}/archive"),
                &serde_json::json!({}),
            )
            .await
            .expect("archive");
        assert_eq!(code, 200);
        released(&fleet.front, &id).await;
    }
    let waits = claim_waits(&fleet.claim_logs());
    let started = Instant::now();
    let tasks: Vec<_> = (0..burst)
        .map(|i| {
            let front = fleet.front.clone();
            let bundle = bundle.clone();
            tokio::spawn(async move {
                to_plan(&front, &bundle, &format!("burst {i}")).await;
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("session");
    }
    let took = started.elapsed();
    let all = claim_waits(&fleet.claim_logs());
    let per_minute = burst as f64 / took.as_secs_f64() * 60.0;
    println!(
        "{} {runners} runner(s) × 2 slots: claim latency (idle fleet, {} claims) p50 {} ms, p95 {} ms; \
         burst of {burst} → every plan in {:.1} s = {per_minute:.0} sessions/min \
         (claims incl. resumes after parking: {}, max queue wait {} ms)",
        if kind == Kind::Keyless {
            "keyless"
        } else {
            "replica"
        },
        waits.len(),
        quantile(&waits, 0.5),
        quantile(&waits, 0.95),
        took.as_secs_f64(),
        all.len(),
        all.last().copied().unwrap_or(0),
    );
}

#[tokio::main]
async fn main() {
    let burst = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(24);
    let kinds = match std::env::args().nth(2).as_deref() {
        Some("replicas") => vec![Kind::Replicas],
        Some("keyless") => vec![Kind::Keyless],
        _ => vec![Kind::Replicas, Kind::Keyless],
    };
    for kind in kinds {
        for runners in [1, 2, 3] {
            run(kind, runners, burst).await;
        }
    }
}
