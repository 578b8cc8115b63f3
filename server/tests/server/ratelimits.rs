//! Rate limits keyed on who is asking: no spelling of `Authorization` buys a new bucket, and
//! tokens that do not verify are limited per client address.

use std::time::Instant;

use serde_json::Value;
use ultraplan_server::http::ratelimit::{RateLimit, RateLimits};

use crate::support::{Backend, TestServer};

fn low(per_second: u32, burst: u32) -> RateLimit {
    RateLimit { per_second, burst }
}

async fn get_with(server: &TestServer, authorization: &str) -> (u16, Option<String>, Value) {
    let r = server
        .http
        .get(server.url("/v1/sessions"))
        .header("authorization", authorization)
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn four_hundred_requests_in_varied_bearer_spellings_share_one_bucket() {
    const BURST: u32 = 20;
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.rate_limits = RateLimits {
            reads: low(1, BURST),
            ..RateLimits::default()
        };
    })
    .await;
    let token = server.user("a").await;
    let spellings = [
        format!("Bearer {token}"),
        format!("bearer {token}"),
        format!("BEARER {token}"),
        format!("bEaReR   {token}"),
        format!("Bearer\t{token}"),
        format!("Bearer \t {token}  "),
        format!("  Bearer {token}"),
        format!("BeArEr\t\t{token}\t"),
    ];
    let start = Instant::now();
    let (mut passed, mut limited) = (0_u64, 0_u64);
    for i in 0..400 {
        let (status, retry, body) = get_with(&server, &spellings[i % spellings.len()]).await;
        match status {
            200 => passed += 1,
            429 => {
                assert_eq!(body["error"]["code"], "rate_limited");
                assert!(retry.is_some(), "429 without Retry-After");
                limited += 1;
            }
            other => panic!("request {i}: unexpected {other} {body}"),
        }
    }
    // The burst plus one a second for the time the loop took, and no more.
    let allowed = u64::from(BURST) + start.elapsed().as_secs() + 1;
    assert!(
        passed <= allowed,
        "{passed} of 400 passed; at most {allowed} may"
    );
    assert_eq!(passed + limited, 400);
    // Another user has a bucket of their own.
    let other = server.user("b").await;
    assert_eq!(get_with(&server, &format!("Bearer {other}")).await.0, 200);
}

#[tokio::test]
async fn unknown_tokens_are_limited_per_client_address() {
    const BURST: u32 = 5;
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.rate_limits = RateLimits {
            anonymous: low(1, BURST),
            ..RateLimits::default()
        };
    })
    .await;
    let start = Instant::now();
    let mut statuses = Vec::new();
    for i in 0..40 {
        let authorization = match i % 4 {
            0 => format!("Bearer up_{i:016x}_{:064x}", i * 7),
            1 => "Bearer not-a-token".to_owned(),
            2 => "Basic YWxpY2U6cGFzcw==".to_owned(),
            _ => format!("bearer   up_{:016x}_ab", i + 1000),
        };
        let (status, retry, body) = get_with(&server, &authorization).await;
        if status == 429 {
            assert_eq!(body["error"]["code"], "rate_limited");
            assert!(retry.is_some());
        } else {
            assert_eq!(status, 401, "{body}");
        }
        statuses.push(status);
    }
    let unauthorized = statuses.iter().filter(|s| **s == 401).count() as u64;
    let allowed = u64::from(BURST) + start.elapsed().as_secs() + 1;
    assert!(unauthorized <= allowed, "{statuses:?}");
    assert!(statuses[..BURST as usize].iter().all(|s| *s == 401));
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    // A real user from the same address is not held back by the strangers' bucket, and
    // requests without credentials (health checks) are not limited.
    let token = server.user("a").await;
    assert_eq!(get_with(&server, &format!("Bearer {token}")).await.0, 200);
    let health = server
        .http
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("send");
    assert_eq!(health.status().as_u16(), 200);
}
