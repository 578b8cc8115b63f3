//! Server replicas on one PostgreSQL under polling sessions (`bench/replica_polls.sh`):
//! `serve --no-local-runner` replicas on the database `ULTRAPLAN_BENCH_DATABASE_URL` names,
//! sharing a blob store, with the sessions spread over them. Each session is polled every 3 s
//! through its replica; first all are idle, then ACTIVE % get a message every interval,
//! written through another replica than the one that polls them (so each one reaches its
//! poller through `NOTIFY`). Each replica's CPU is read from `/proc/<pid>/stat` over the
//! polling window: CPU per poll, and per 1,000 polling sessions.

use ultraplan_tests::harness::{ServerProcess, demo_repo};

use super::{POLL_EVERY, cpu_seconds, follow};

/// What one polling window cost the replicas.
struct Window<'a> {
    replicas: usize,
    sessions: usize,
    active: usize,
    seconds: u64,
    /// CPU seconds each replica used over the window.
    cpu: &'a [f64],
    /// CPU seconds of the PostgreSQL server's processes over the window.
    postgres_cpu: f64,
    /// CPU seconds per second all replicas use with nobody polling (timers, sweeps).
    background: f64,
}

/// Run the bench; 1 when a posted message never reached its poller, else 0.
pub async fn bench(replicas: usize, sessions: usize, seconds: u64, active_pct: u64) -> u8 {
    let database = std::env::var("ULTRAPLAN_BENCH_DATABASE_URL")
        .expect("ULTRAPLAN_BENCH_DATABASE_URL names the PostgreSQL the replicas share");
    let blobs = tempfile::tempdir().expect("blob dir");
    let blob_url = format!("file://{}", blobs.path().display());
    let env = [
        ("DATABASE_URL", database.as_str()),
        ("ULTRAPLAN_BLOB_STORE", blob_url.as_str()),
        ("ULTRAPLAN_LOCAL_RUNNER", "off"),
        ("ULTRAPLAN_RATE_LIMIT", "0"),
        ("ULTRAPLAN_READ_RATE_LIMIT", "0"),
        ("ULTRAPLAN_LOG", "warn"),
        ("ULTRAPLAN_MODEL", "offline"),
    ];
    let first = ServerProcess::start(&env).await.expect("replica 0");
    let token = first.token.clone();
    let mut servers = vec![first];
    for _ in 1..replicas {
        servers.push(
            ServerProcess::start_replica(&env, &token)
                .await
                .expect("replica"),
        );
    }
    let bundle = servers[0].upload(&demo_repo()).await.expect("upload");
    let mut ids = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let server = &servers[i % replicas];
        let id = server
            .create_session(&bundle, &format!("polled {i}"))
            .await
            .expect("create");
        ids.push(id);
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(sessions)
        .build()
        .expect("client");
    let bases: Vec<&str> = servers.iter().map(|s| s.base_url.as_str()).collect();
    let pids: Vec<u32> = servers.iter().map(|s| s.pid().expect("pid")).collect();
    let background = background(&pids).await;
    let postmaster = postmaster(&database);
    let mut verdict = 0;
    for share in [0, sessions * active_pct as usize / 100] {
        let heads = follow::heads(&http, &bases, &token, &ids).await;
        let before: Vec<f64> = pids.iter().map(|p| cpu_seconds(*p)).collect();
        let pg_before = postgres_cpu_seconds(postmaster);
        let run = follow::run(&http, (&bases, &token), &ids, heads, share, seconds).await;
        let cpu: Vec<f64> = pids
            .iter()
            .zip(&before)
            .map(|(p, b)| cpu_seconds(*p) - b)
            .collect();
        let window = Window {
            replicas,
            sessions,
            active: share,
            seconds,
            cpu: &cpu,
            postgres_cpu: postgres_cpu_seconds(postmaster) - pg_before,
            background,
        };
        verdict = verdict.max(report(&window, &run));
    }
    verdict
}

/// CPU seconds per second the replicas use together while nobody polls, over 10 s.
async fn background(pids: &[u32]) -> f64 {
    const QUIET: std::time::Duration = std::time::Duration::from_secs(10);
    let before: f64 = pids.iter().map(|p| cpu_seconds(*p)).sum();
    tokio::time::sleep(QUIET).await;
    let after: f64 = pids.iter().map(|p| cpu_seconds(*p)).sum();
    let per_second = (after - before) / QUIET.as_secs_f64();
    println!(
        "{} replicas with nobody polling: {:.1} % of one core together",
        pids.len(),
        per_second * 100.0
    );
    per_second
}

/// Print a window's figures; 1 when a posted message was not seen within one poll interval.
fn report(w: &Window, run: &follow::Run) -> u8 {
    let polls = &run.polls;
    let at = |q: f64| polls[((polls.len() - 1) as f64 * q).round() as usize];
    let total: f64 = w.cpu.iter().sum();
    let per_replica: Vec<String> = w
        .cpu
        .iter()
        .enumerate()
        .map(|(i, c)| format!("r{i} {c:.2} s"))
        .collect();
    // Cores the replicas used per 1,000 sessions each polling every 3 s: all of it, and what
    // the polls added to what the replicas use with nobody polling.
    let cores_per_1000 = total / w.seconds as f64 * 1000.0 / w.sessions as f64;
    let polling = (total - w.background * w.seconds as f64).max(0.0);
    let net_per_1000 = polling / w.seconds as f64 * 1000.0 / w.sessions as f64;
    let via = if w.replicas > 1 {
        "through another replica"
    } else {
        "through the same server"
    };
    println!(
        "{} replicas, {} sessions ({} getting a message every {POLL_EVERY:?} {via}), each \
         polled every {POLL_EVERY:?} for {} s: {} polls, p50 {:?}, p99 {:?}, max {:?}",
        w.replicas,
        w.sessions,
        w.active,
        w.seconds,
        polls.len(),
        at(0.5),
        at(0.99),
        polls[polls.len() - 1],
    );
    let per_poll = |cpu: f64| cpu * 1e6 / polls.len().max(1) as f64;
    println!(
        "  replica CPU {} (total {total:.2} s): {:.0} µs per poll; per 1,000 polling sessions \
         {:.1} % of one core = {:.2} CPU-seconds per minute; net of the replicas' background: \
         {:.0} µs per poll, {:.1} % of one core per 1,000 sessions; PostgreSQL's processes: \
         {:.2} s ({:.0} µs per poll)",
        per_replica.join(", "),
        per_poll(total),
        cores_per_1000 * 100.0,
        cores_per_1000 * 60.0,
        per_poll(polling),
        net_per_1000 * 100.0,
        w.postgres_cpu,
        per_poll(w.postgres_cpu),
    );
    if w.active > 0 {
        let lags = &run.lags;
        let lag = |q: f64| lags.get(((lags.len().max(1) - 1) as f64 * q).round() as usize);
        println!(
            "  messages: {} posted, {} seen by their pollers ({} missed); post → seen p50 {:?}, \
             p99 {:?}, max {:?}",
            run.posted,
            lags.len(),
            run.posted - lags.len(),
            lag(0.5),
            lag(0.99),
            lags.last(),
        );
    }
    u8::from(!run.all_in_time())
}

/// The PostgreSQL server listening on the URL's port: its postmaster's pid, found by the
/// `-p PORT` of its command line.
fn postmaster(url: &str) -> Option<u32> {
    let port = url.rsplit(':').next()?.split('/').next()?.to_owned();
    let dir = std::fs::read_dir("/proc").ok()?;
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let is_postgres = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "postgres");
            is_postgres
                && args
                    .windows(2)
                    .any(|w| w[0] == b"-p" && w[1] == port.as_bytes())
        })
}

/// User + system CPU seconds of a postmaster and its processes (the backends serving the
/// replicas' connections, the writers, autovacuum).
fn postgres_cpu_seconds(postmaster: Option<u32>) -> f64 {
    let Some(root) = postmaster else {
        return 0.0;
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let parent = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let children: f64 = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent(*pid) == Some(root))
        .map(cpu_seconds)
        .sum();
    cpu_seconds(root) + children
}
