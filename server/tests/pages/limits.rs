//! Page forms and login attempts are rate limited: a logged-in user's posts per user, login
//! forms and links per client address.

use ultraplan_server::http::ratelimit::{RateLimit, RateLimits};

use crate::support::{Server, csrf, encode};

fn low(per_second: u32, burst: u32) -> RateLimit {
    RateLimit { per_second, burst }
}

#[tokio::test]
async fn a_cookie_users_page_posts_are_limited_past_the_burst() {
    const BURST: u32 = 4;
    let server = Server::start_with(|c| {
        c.rate_limits = RateLimits {
            writes: low(1, BURST),
            ..RateLimits::default()
        };
    })
    .await;
    let alice = server.user("alice").await;
    let id = server.session(&alice, "Fix auth").await;
    let cookie = server.cookie(&alice).await;
    let (_, html) = server.page(&cookie, &format!("/sessions/{id}")).await;
    let token = csrf(&html);
    let stop = format!("/sessions/{id}/stop");
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(
            server
                .post_form(&cookie, &stop, &[("csrf", &token)])
                .await
                .0,
        );
    }
    // The first posts go through (stopped, then already stopped), the rest are refused
    // until the bucket refills.
    assert_eq!(statuses[0], 303, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| *s == 303 || *s == 429),
        "{statuses:?}"
    );
    assert!(statuses.contains(&429), "{statuses:?}");
    let r = server
        .http
        .post(server.url(&stop))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&[("csrf", &token)]))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 429);
    assert!(r.headers().contains_key("retry-after"));
    assert_eq!(
        r.headers()["content-security-policy"],
        ultraplan_server::http::pages::CSP
    );
    let body = r.text().await.expect("body");
    assert!(body.contains("Too many requests"), "{body}");

    // Another user is not held back.
    let bob = server.user("bob").await;
    let bob_session = server.session(&bob, "Other").await;
    let bob_cookie = server.cookie(&bob).await;
    let (_, html) = server
        .page(&bob_cookie, &format!("/sessions/{bob_session}"))
        .await;
    let bob_stop = format!("/sessions/{bob_session}/stop");
    let (status, _) = server
        .post_form(&bob_cookie, &bob_stop, &[("csrf", &csrf(&html))])
        .await;
    assert_eq!(status, 303);
}

#[tokio::test]
async fn login_attempts_are_limited_per_client_address() {
    const BURST: u32 = 6;
    let server = Server::start_with(|c| {
        c.rate_limits = RateLimits {
            anonymous: low(1, BURST),
            ..RateLimits::default()
        };
    })
    .await;
    let mut statuses = Vec::new();
    for i in 0..15 {
        let r = if i % 2 == 0 {
            let bad = format!("{}/login/{:032x}.{:064x}", server.base, i, i);
            server.http.get(bad).send().await.expect("send")
        } else {
            server
                .http
                .post(server.url("/login"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(encode(&[("csrf", "x"), ("token", "up_00_11")]))
                .send()
                .await
                .expect("send")
        };
        if r.status().as_u16() == 429 {
            assert!(r.headers().contains_key("retry-after"));
        }
        statuses.push(r.status().as_u16());
    }
    assert!(
        statuses[..BURST as usize]
            .iter()
            .all(|s| *s == 410 || *s == 403),
        "{statuses:?}"
    );
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    assert!(
        statuses.iter().filter(|s| **s == 429).count() >= 5,
        "{statuses:?}"
    );
}
