//! The session API over real HTTP: auth, scoping, creation, validation, eligibility, metrics,
//! archive and the OpenAPI document.

use serde_json::{Value, json};

use crate::support::{Backend, TestServer, both, create_body};

both!(user_b_gets_404_on_everything_of_a, |backend| async move {
    let server = TestServer::start(backend).await;
    let a = server.user("a").await;
    let b = server.user("b").await;
    let session = server.session(&a, "fix auth").await;
    let id = session["id"].as_str().expect("id");
    server
        .agent_says(id, &[crate::support::exit_plan_mode("p1", "# Plan")])
        .await;
    let gets = [
        format!("/v1/sessions/{id}"),
        format!("/v1/sessions/{id}/events"),
        format!("/v1/sessions/{id}/plans"),
    ];
    for path in &gets {
        assert_eq!(server.get(path, &a).await.0, 200, "{path}");
        let (status, body) = server.get(path, &b).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(body["error"]["code"], "not_found");
    }
    let posts = [
        (
            format!("/v1/sessions/{id}/events"),
            json!({"events":[{"type":"user","message":{"content":"hi"}}]}),
        ),
        (
            format!("/v1/sessions/{id}/plans/p1/decision"),
            json!({"decision":"approve"}),
        ),
        (format!("/v1/sessions/{id}/archive"), json!({})),
    ];
    for (path, body) in &posts {
        assert_eq!(server.post(path, &b, body).await.0, 404, "{path}");
    }
    let (_, listed) = server.get("/v1/sessions", &b).await;
    assert_eq!(listed["data"], json!([]));
    // A's session is untouched by B's attempts.
    let (_, plans) = server.get(&format!("/v1/sessions/{id}/plans"), &a).await;
    assert_eq!(plans[0]["status"], "pending");
});

#[tokio::test]
async fn auth_is_required_and_errors_are_json() {
    let server = TestServer::start(Backend::Sqlite).await;
    server.user("a").await;
    let cases = [
        ("/v1/sessions", None),
        ("/v1/sessions", Some("Bearer nope")),
        ("/v1/sessions", Some("Bearer up_0123456789abcdef_00")),
        ("/v1/sessions", Some("Basic dXNlcjpwYXNz")),
    ];
    for (path, header) in cases {
        let mut req = server.http.get(server.url(path));
        if let Some(h) = header {
            req = req.header("authorization", h);
        }
        let resp = req.send().await.expect("send");
        assert_eq!(resp.status().as_u16(), 401, "{header:?}");
        assert_eq!(resp.headers()["www-authenticate"], "Bearer");
        let body: Value = resp.json().await.expect("json");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
}

#[tokio::test]
async fn create_session_returns_the_resource_and_first_events() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let session = server.session(&token, "please plan the auth fix").await;
    let id = session["id"].as_str().expect("id");
    assert_eq!(session["type"], "session");
    assert_eq!(session["title"], "please plan the auth fix");
    assert_eq!(session["session_status"], "idle");
    assert_eq!(session["url"], format!("{}/sessions/{id}", server.base));
    assert_eq!(session["session_context"]["base"]["commit"], "abc123");
    assert_eq!(session["session_context"]["prompt_variant"], "simple_plan");
    assert_eq!(session["session_context"]["model"], "offline");
    assert_eq!(session["usage"]["input_tokens"], 0);
    assert_eq!(session["last_event_id"], 2);
    assert!(session["created_at"].as_str().expect("ts").ends_with('Z'));
    let (status, page) = server
        .get(&format!("/v1/sessions/{id}/events"), &token)
        .await;
    assert_eq!(status, 200);
    assert_eq!(page["first_id"], 1);
    assert_eq!(page["last_id"], 2);
    assert_eq!(page["has_more"], false);
    assert_eq!(page["data"][0]["type"], "control_request");
    assert_eq!(page["data"][0]["request"]["mode"], "plan");
    assert_eq!(page["data"][0]["session_id"], id);
    assert_eq!(page["data"][1]["type"], "user");
    assert_eq!(
        page["data"][1]["message"]["content"],
        "please plan the auth fix"
    );
    let (_, listed) = server.get("/v1/sessions", &token).await;
    assert_eq!(listed["data"][0]["id"], id);
    assert_eq!(listed["has_more"], false);
}

#[tokio::test]
async fn bad_create_requests_get_reasons() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let bundle = server.upload_repo(&token).await;
    let mut variant = create_body(&bundle, "x");
    variant["session_context"]["prompt_variant"] = json!("fancy_plan");
    let mut no_prompt = create_body(&bundle, "x");
    no_prompt["events"] = json!([no_prompt["events"][0].clone()]);
    let cases = [
        (create_body(&"0".repeat(64), "x"), 404, "not_found"),
        (create_body("not-a-sha", "x"), 400, "invalid_bundle_id"),
        (variant, 400, "invalid_prompt_variant"),
        (no_prompt, 400, "invalid_event"),
        (json!({"title": "x"}), 400, "invalid_request"),
    ];
    for (body, status, code) in cases {
        let (got, resp) = server.post("/v1/sessions", &token, &body).await;
        assert_eq!(
            (got, resp["error"]["code"].as_str()),
            (status, Some(code)),
            "{body}"
        );
        assert!(!resp["error"]["message"].as_str().unwrap_or("").is_empty());
    }
    let resp = server
        .http
        .post(server.url("/v1/sessions"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{\"title\": \"trunc")
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status().as_u16(), 400);
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["error"]["code"], "invalid_json");
    let huge = "x".repeat(3 * 1024 * 1024);
    let (status, body) = server
        .post("/v1/sessions", &token, &create_body(&bundle, &huge))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("too_large"))
    );
    let failed = server
        .state
        .core
        .store
        .count_telemetry("create_failed")
        .await
        .expect("count");
    assert_eq!(failed, 7, "each refused create is counted");
    let (_, listed) = server.get("/v1/sessions", &token).await;
    assert_eq!(listed["data"], json!([]), "nothing half-created");
}

#[tokio::test]
async fn eligibility_explains_every_reason() {
    let server = TestServer::start(Backend::Sqlite).await;
    let resp = server
        .http
        .get(server.url("/v1/eligibility"))
        .send()
        .await
        .expect("send");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["eligible"], false);
    assert_eq!(body["reasons"][0]["code"], "not_logged_in");
    let token = server.user("a").await;
    let (status, body) = server.get("/v1/eligibility", &token).await;
    assert_eq!(status, 200);
    assert_eq!(body["flags"]["prompt_variant"], "simple_plan");
    assert_eq!(body["flags"]["timeout_seconds"], 1800);
    assert_eq!(body["flags"]["model"], "offline");
    let codes: Vec<&str> = body["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .filter_map(|r| r["code"].as_str())
        .collect();
    assert_eq!(
        codes,
        vec!["no_runner"],
        "no agent runs yet, and the API says so"
    );
    assert_eq!(body["eligible"], false);

    let user = server
        .state
        .core
        .store
        .user_by_name("a")
        .await
        .expect("db")
        .expect("user");
    let blocked = ultraplan_server::store::FlagRow {
        name: "ultraplan_enabled".into(),
        user_id: Some(user.id.clone()),
        value: "false".into(),
        rollout_pct: None,
        updated_at: 0,
    };
    server
        .state
        .core
        .store
        .set_flag(&blocked)
        .await
        .expect("flag");
    let variant = ultraplan_server::store::FlagRow {
        name: "prompt_variant".into(),
        user_id: None,
        value: "visual_plan".into(),
        rollout_pct: None,
        updated_at: 0,
    };
    server
        .state
        .core
        .store
        .set_flag(&variant)
        .await
        .expect("flag");
    let (_, body) = server.get("/v1/eligibility", &token).await;
    assert_eq!(body["reasons"][0]["code"], "policy_blocked");
    assert_eq!(body["flags"]["prompt_variant"], "visual_plan");
    let bundle = server.upload_repo(&token).await;
    let (status, body) = server
        .post("/v1/sessions", &token, &create_body(&bundle, "x"))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden"))
    );
}

#[tokio::test]
async fn metrics_count_launches() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    server.session(&token, "one").await;
    server.session(&token, "two").await;
    let text = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("send")
        .text()
        .await
        .expect("text");
    assert!(text.contains("ultraplan_launched_total 2"), "{text}");
    assert_eq!(
        server
            .state
            .core
            .store
            .count_telemetry("launched")
            .await
            .expect("n"),
        2
    );
    let health: Value = server
        .http
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(health["status"], "ok");
}

#[tokio::test]
async fn archive_is_final_and_reported_twice_as_409() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let session = server.session(&token, "x").await;
    let id = session["id"].as_str().expect("id");
    let path = format!("/v1/sessions/{id}/archive");
    let (status, body) = server.post(&path, &token, &json!({})).await;
    assert_eq!(
        (status, body["session_status"].as_str()),
        (200, Some("archived"))
    );
    assert_eq!(body["phase"], "ended");
    let (status, body) = server.post(&path, &token, &json!({})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("already_archived"))
    );
    let (status, _) = server
        .post(
            &format!("/v1/sessions/{id}/events"),
            &token,
            &json!({"events":[{"type":"user","message":{"content":"late"}}]}),
        )
        .await;
    assert_eq!(status, 409);
    let (_, page) = server
        .get(&format!("/v1/sessions/{id}/events"), &token)
        .await;
    let last = page["data"]
        .as_array()
        .expect("data")
        .last()
        .cloned()
        .expect("event");
    assert_eq!(
        (last["type"].as_str(), last["subtype"].as_str()),
        (Some("system"), Some("archived"))
    );
}

#[tokio::test]
async fn openapi_document_matches_the_code() {
    let server = TestServer::start(Backend::Sqlite).await;
    let resp = server
        .http
        .get(server.url("/v1/openapi.json"))
        .send()
        .await
        .expect("send");
    let doc: Value = resp.json().await.expect("json");
    let paths = doc["paths"].as_object().expect("paths");
    for path in [
        "/v1/eligibility",
        "/v1/bundles/{sha256}",
        "/v1/sessions",
        "/v1/sessions/{id}",
        "/v1/sessions/{id}/events",
        "/v1/sessions/{id}/plans/{tool_use_id}/decision",
        "/v1/sessions/{id}/archive",
        "/v1/openapi.json",
        "/healthz",
        "/metrics",
    ] {
        assert!(paths.contains_key(path), "{path} missing from the spec");
    }
    insta::assert_json_snapshot!("openapi", doc, {".info.version" => "[version]"});
}

#[tokio::test]
async fn each_token_is_rate_limited_on_its_own() {
    use ultraplan_server::http::ratelimit::{RateLimit, RateLimits};
    let server = TestServer::start_with(Backend::Sqlite, |config| {
        config.rate_limits = RateLimits {
            writes: RateLimit {
                per_second: 1,
                burst: 3,
            },
            reads: RateLimit {
                per_second: 1,
                burst: 5,
            },
            ..RateLimits::default()
        };
    })
    .await;
    let a = server.user("a").await;
    let b = server.user("b").await;
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(server.get("/v1/sessions", &a).await.0);
    }
    assert_eq!(&statuses[..5], [200; 5]);
    assert!(statuses[5..].iter().all(|s| *s == 429), "{statuses:?}");
    let r = server
        .http
        .get(server.url("/v1/sessions"))
        .bearer_auth(&a)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status().as_u16(), 429);
    let retry: u64 = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .expect("retry-after");
    assert!((1..=2).contains(&retry), "{retry}");
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["error"]["code"], "rate_limited");
    // Writes have their own bucket: b's three login links pass, the fourth is refused.
    let mut posts = Vec::new();
    for _ in 0..4 {
        posts.push(server.post("/v1/login-links", &b, &json!({})).await.0);
    }
    assert_eq!(posts, [201, 201, 201, 429]);
    // b may still read; requests without a token are not limited here.
    assert_eq!(server.get("/v1/sessions", &b).await.0, 200);
    let health = server
        .http
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("send");
    assert_eq!(health.status().as_u16(), 200);
}
