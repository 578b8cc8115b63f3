//! The bundle quota and retention over real HTTP: an upload over the user's quota is refused
//! with 413 `quota_exceeded` and leaves nothing behind; a retention pass removes unused
//! bundles' files while a session's bundle stays usable.

use serde_json::Value;
use ultraplan_server::store::now_ms;

use crate::support::{Backend, TestServer, both, create_body, entries, head, tarball};

/// A bundle of one file of `n` pseudo-random (incompressible) bytes.
fn sized(name: &str, n: usize) -> (Vec<u8>, String) {
    let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ n as u64;
    let data: Vec<u8> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    tarball(&[(name, &data)])
}

/// PUT whose body sends two bytes of the declared length and then stalls: only an answer
/// given before the body is read can come back.
async fn put_stalled(server: &TestServer, token: &str, sha: &str, declared: usize) -> (u16, Value) {
    use futures_util::StreamExt;
    let first = futures_util::stream::once(async { Ok::<_, std::io::Error>(vec![0x1f_u8, 0x8b]) });
    let body = reqwest::Body::wrap_stream(first.chain(futures_util::stream::pending()));
    let request = server
        .http
        .put(server.url(&format!("/v1/bundles/{sha}")))
        .bearer_auth(token)
        .header("content-type", "application/gzip")
        .header("content-length", declared.to_string())
        .body(body)
        .send();
    let response = tokio::time::timeout(std::time::Duration::from_secs(120), request)
        .await
        .expect("the refusal came without the body")
        .expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn assert_quota_refusal(status: u16, body: &Value) {
    assert_eq!(status, 413, "{body}");
    assert_eq!(body["error"]["code"], "quota_exceeded", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("quota") && message.contains("ULTRAPLAN_BUNDLE_QUOTA"),
        "{message}"
    );
}

both!(
    uploads_over_the_quota_are_refused_and_leave_nothing,
    |backend: Backend| async move {
        let quota = 64 * 1024;
        let server =
            TestServer::start_with(backend, |c| c.retention.bundle_quota_bytes = quota).await;
        let a = server.user("a").await;
        let b = server.user("b").await;
        let root = server.state.core.config.bundles_dir();

        let (first, first_sha) = sized("first.txt", 20_000);
        let (status, body) = server.put_bundle(&a, &first_sha, first.clone()).await;
        assert_eq!(status, 200, "{body}");
        let (status, _) = server.put_bundle(&a, &first_sha, first.clone()).await;
        assert_eq!(status, 200, "re-uploading a bundle one holds costs nothing");

        // Declared too large for what is left: refused before the body is read.
        let (big, big_sha) = sized("big.bin", 200_000);
        let (status, body) = put_stalled(&server, &a, &big_sha, big.len()).await;
        assert_quota_refusal(status, &body);
        let (status, body) = server.put_bundle(&a, &big_sha, big).await;
        assert_quota_refusal(status, &body);
        assert!(!entries(&root).iter().any(|n| n.starts_with(&big_sha)));

        // Small enough compressed, too large once unpacked: refused after extraction, and its
        // files are gone.
        let data = vec![b'z'; 60_000];
        let (packed, packed_sha) = tarball(&[("zeros.txt", &data)]);
        assert!(packed.len() < 8 * 1024, "compresses well");
        let (status, body) = server.put_bundle(&a, &packed_sha, packed.clone()).await;
        assert_quota_refusal(status, &body);
        assert_eq!(head(&server, &a, &packed_sha).await, 404);
        assert_eq!(
            entries(&root),
            vec![first_sha.clone(), format!("{first_sha}.tar.gz")],
            "nothing of a refused upload is left"
        );

        // Another user has their own quota; the same bytes are theirs to hold.
        let (status, body) = server.put_bundle(&b, &packed_sha, packed.clone()).await;
        assert_eq!(status, 200, "{body}");
        // Stored by b, the files stay when a is refused the same bundle again.
        let (status, body) = server.put_bundle(&a, &packed_sha, packed).await;
        assert_quota_refusal(status, &body);
        assert_eq!(
            head(&server, &b, &packed_sha).await,
            200,
            "b's copy is intact"
        );
    }
);

both!(
    a_retention_pass_removes_unused_bundle_files,
    |backend: Backend| async move {
        let server = TestServer::start(backend).await;
        let a = server.user("a").await;
        let root = server.state.core.config.bundles_dir();
        let (unused, unused_sha) = sized("unused.txt", 1000);
        let (status, body) = server.put_bundle(&a, &unused_sha, unused).await;
        assert_eq!(status, 200, "{body}");
        let used_sha = server.upload_repo(&a).await;
        let (status, body) = server
            .post(
                "/v1/sessions",
                &a,
                &create_body(&used_sha, "keep my bundle"),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        // Files a crash left with no row.
        let orphan = "e".repeat(64);
        std::fs::create_dir_all(root.join(&orphan)).expect("orphan dir");
        std::fs::write(root.join(format!("{orphan}.tar.gz")), b"x").expect("orphan archive");

        // Within the grace period nothing goes.
        let swept = ultraplan_server::retention::sweep(&server.state.core, now_ms())
            .await
            .expect("sweep");
        assert_eq!(swept, ultraplan_server::retention::Swept::default());
        assert_eq!(head(&server, &a, &unused_sha).await, 200);

        let grace = server.state.core.config.retention.bundle_grace;
        let later = now_ms() + i64::try_from(grace.as_millis()).expect("ms") + 60_000;
        let swept = ultraplan_server::retention::sweep(&server.state.core, later)
            .await
            .expect("sweep");
        assert_eq!(
            (swept.holdings, swept.bundles, swept.orphans),
            (1, 1, 1),
            "{swept:?}"
        );
        assert_eq!(
            entries(&root),
            vec![used_sha.clone(), format!("{used_sha}.tar.gz")]
        );
        assert_eq!(head(&server, &a, &unused_sha).await, 404);
        assert_eq!(head(&server, &a, &used_sha).await, 200);
        let (status, body) = server
            .post("/v1/sessions", &a, &create_body(&unused_sha, "too late"))
            .await;
        assert_eq!(status, 404, "{body}");
        let (status, body) = server
            .post("/v1/sessions", &a, &create_body(&used_sha, "again"))
            .await;
        assert_eq!(status, 201, "{body}");
    }
);
