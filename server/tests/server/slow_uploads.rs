//! Slow clients cannot exhaust the server: upload slots per user and overall, body deadlines
//! and a minimum rate, and a header timeout, over real TCP against a real server.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use ultraplan_server::http::ratelimit::{BodyDeadline, UploadSlots};

use crate::slow_client::{
    IsolatedServer, Outcome, SERVER_THREADS, process_threads, threads_named, trickle, upload_head,
};
use crate::support::tarball;

/// Wait (generously) until `what` holds.
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn put(server: &IsolatedServer, token: &str, sha: &str, bytes: Vec<u8>) -> (u16, Value) {
    let r = reqwest::Client::new()
        .put(server.url(&format!("/v1/bundles/{sha}")))
        .bearer_auth(token)
        .header("content-type", "application/gzip")
        .body(bytes)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn staging_is_empty(server: &IsolatedServer) -> bool {
    let staging = server.state.core.config.bundles_dir().join(".staging");
    std::fs::read_dir(staging).map_or(true, |mut d| d.next().is_none())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_hundred_slow_uploads_from_one_user_leave_room_for_another() {
    const ATTACKERS: usize = 300;
    const GLOBAL: usize = 8;
    let server = IsolatedServer::start(&["mallory", "alice"], |c| {
        c.request_limits.uploads = UploadSlots {
            per_user: 4,
            global: GLOBAL,
            wait: Duration::from_secs(5),
        };
        // Long enough that the admitted slow uploads are still running when alice is done.
        c.request_limits.body = BodyDeadline {
            total: Duration::from_secs(600),
            min_bytes_per_second: 1000,
            grace: Duration::from_secs(300),
        };
    });
    let (mallory, alice) = (server.tokens[0].clone(), server.tokens[1].clone());
    let sha = "ab".repeat(32);
    let started = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|_| {
            let head = upload_head(&sha, &mallory, 1_000_000);
            let (started, answered) = (Arc::clone(&started), Arc::clone(&answered));
            let addr = server.addr;
            tokio::spawn(async move {
                let every = Duration::from_millis(500);
                let outcome = trickle(addr, head, every, Duration::from_secs(300), started).await;
                answered.fetch_add(1, Ordering::SeqCst);
                outcome
            })
        })
        .collect();

    let gate = Arc::clone(&server.state.rate_limiters.uploads);
    let sampling = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        tokio::spawn(async move {
            let (mut server_max, mut process_max) = (0, 0);
            while sampling.load(Ordering::SeqCst) == 0 {
                server_max = server_max.max(threads_named(SERVER_THREADS));
                process_max = process_max.max(process_threads());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            (server_max, process_max)
        })
    };
    until("every attacker to send its headers", || {
        started.load(Ordering::SeqCst) == ATTACKERS
    })
    .await;
    until("mallory's four uploads to run", || gate.running() == 4).await;

    // Alice's small upload goes through while mallory's are all still connected.
    let (bytes, alice_sha) = tarball(&[("README.md", b"# alice\n")]);
    let (status, body) = put(&server, &alice, &alice_sha, bytes).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["bundle_id"], alice_sha.as_str());
    assert_eq!(
        gate.running(),
        4,
        "mallory's admitted uploads are still running"
    );

    sampling.store(1, Ordering::SeqCst);
    let (server_max, process_max) = sampler.await.expect("sampler");
    eprintln!(
        "during {ATTACKERS} slow uploads: server runtime threads max {server_max} \
         (2 workers + blocking pool), whole test process max {process_max}"
    );
    assert!(
        server_max <= 2 + GLOBAL + 8,
        "server threads {server_max} exceed workers + upload slots + margin"
    );

    // Everyone past mallory's four was refused at once with 429 and Retry-After (past the
    // write bucket's burst, by the rate limit itself); the four are still trickling.
    until("the refused attackers to be answered", || {
        answered.load(Ordering::SeqCst) >= ATTACKERS - 4
    })
    .await;
    let mut refused = 0;
    for attacker in attackers {
        if !attacker.is_finished() {
            attacker.abort();
            continue;
        }
        if let Outcome::Answered(429, text) = attacker.await.expect("join") {
            assert!(
                text.contains("too_many_uploads") || text.contains("rate_limited"),
                "{text}"
            );
            assert!(
                text.to_ascii_lowercase().contains("retry-after: "),
                "{text}"
            );
            refused += 1;
        }
    }
    assert_eq!(refused, ATTACKERS - 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_bound_answers_503_and_slow_uploads_are_cut_off_with_408() {
    let server = IsolatedServer::start(&["a", "b", "c"], |c| {
        c.request_limits.uploads = UploadSlots {
            per_user: 2,
            global: 3,
            wait: Duration::from_secs(1),
        };
        c.request_limits.body = BodyDeadline {
            total: Duration::from_secs(600),
            min_bytes_per_second: 1000,
            grace: Duration::from_secs(3),
        };
    });
    let sha = "cd".repeat(32);
    let started = Arc::new(AtomicUsize::new(0));
    let slow: Vec<_> = [0, 0, 1]
        .into_iter()
        .map(|user| {
            let head = upload_head(&sha, &server.tokens[user], 1_000_000);
            tokio::spawn(trickle(
                server.addr,
                head,
                Duration::from_millis(200),
                Duration::from_secs(120),
                Arc::clone(&started),
            ))
        })
        .collect();
    let gate = Arc::clone(&server.state.rate_limiters.uploads);
    until("three slow uploads to hold every slot", || {
        gate.running() == 3
    })
    .await;

    let (bytes, c_sha) = tarball(&[("a.txt", b"c's file\n")]);
    let r = reqwest::Client::new()
        .put(server.url(&format!("/v1/bundles/{c_sha}")))
        .bearer_auth(&server.tokens[2])
        .header("content-type", "application/gzip")
        .body(bytes.clone())
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["error"]["code"], "uploads_busy");

    // The slow ones fall below the minimum rate after the grace period: 408, nothing kept.
    for upload in slow {
        match upload.await.expect("join") {
            Outcome::Answered(408, text) => {
                assert!(text.contains("upload_too_slow"), "{text}")
            }
            other => panic!("expected 408, got {other:?}"),
        }
    }
    until("the slots to be free", || gate.running() == 0).await;
    assert!(staging_is_empty(&server), "an upload left staging files");
    assert!(!ultraplan_bundle::bundle_exists(
        &server.state.core.config.bundles_dir(),
        &sha
    ));
    let (status, body) = put(&server, &server.tokens[2], &c_sha, bytes).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_and_headers_have_deadlines() {
    let server = IsolatedServer::start(&["a"], |c| {
        c.request_limits.header_timeout = Duration::from_secs(2);
        c.request_limits.body = BodyDeadline {
            total: Duration::from_secs(3),
            min_bytes_per_second: 0,
            grace: Duration::from_secs(1),
        };
    });
    let token = server.tokens[0].clone();
    let started = Arc::new(AtomicUsize::new(0));
    let every = Duration::from_millis(200);
    let give_up = Duration::from_secs(120);

    // A JSON body that never finishes.
    let json = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: 5000"
    );
    let upload = upload_head(&"ef".repeat(32), &token, 5000);
    for head in [json, upload] {
        match trickle(server.addr, head, every, give_up, Arc::clone(&started)).await {
            Outcome::Answered(408, text) => assert!(text.contains("body_deadline"), "{text}"),
            other => panic!("expected 408, got {other:?}"),
        }
    }
    assert!(staging_is_empty(&server));

    // Headers that never finish: the connection is closed without an answer.
    let partial = "GET /healthz HTTP/1.1\r\nHost: test\r\nX-Slow: 1".to_owned();
    let outcome = trickle_headers(server.addr, &partial, give_up).await;
    assert_eq!(outcome, Outcome::Closed);

    // Quick clients are not bothered.
    let r = reqwest::get(server.url("/healthz")).await.expect("healthz");
    assert_eq!(r.status().as_u16(), 200);
}

/// Send part of a request head, then one more header byte every half second.
async fn trickle_headers(addr: std::net::SocketAddr, head: &str, give_up: Duration) -> Outcome {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.write_all(head.as_bytes()).await.expect("write");
    let deadline = tokio::time::Instant::now() + give_up;
    let mut buf = [0_u8; 1024];
    loop {
        tokio::select! {
            read = stream.read(&mut buf) => return match read {
                Ok(0) | Err(_) => Outcome::Closed,
                Ok(n) => Outcome::Answered(0, String::from_utf8_lossy(&buf[..n]).into_owned()),
            },
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                let _ = stream.write_all(b"1").await;
            }
            () = tokio::time::sleep_until(deadline) => return Outcome::Open,
        }
    }
}
