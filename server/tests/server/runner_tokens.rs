//! Runner tokens: stored on both backends, minted and revoked by the `runner-token` command,
//! and accepted on the runner's bundle download and nowhere a user's token is, nor the other
//! way round.

use std::process::{Command, Output};
use std::sync::Arc;

use serde_json::Value;
use ultraplan_server::auth::{RunnerTokenError, create_runner_token, verify_runner};
use ultraplan_server::http::ratelimit::{RateLimit, RateLimits};
use ultraplan_server::store::{Store, StoreError, now_ms};

use crate::support::{Backend, TestServer, both, on_both_backends, tarball, test_db};

on_both_backends!(
    runner_tokens_are_added_found_listed_and_revoked,
    a_runner_name_is_taken_once,
);

async fn runner_tokens_are_added_found_listed_and_revoked(store: Arc<dyn Store>) {
    let now = now_ms();
    store
        .add_runner_token("r-b", "hash-b", now)
        .await
        .expect("add");
    store
        .add_runner_token("r-a", "hash-a", now + 1)
        .await
        .expect("add");
    let found = store.runner_by_token_hash("hash-a").await.expect("lookup");
    assert_eq!(found.as_deref(), Some("r-a"));
    assert_eq!(
        store.runner_by_token_hash("r-a").await.expect("lookup"),
        None
    );
    assert_eq!(
        store.runner_tokens().await.expect("list"),
        vec![("r-a".to_owned(), now + 1), ("r-b".to_owned(), now)]
    );
    assert!(store.revoke_runner_token("r-a").await.expect("revoke"));
    assert!(!store.revoke_runner_token("r-a").await.expect("revoke"));
    assert_eq!(
        store.runner_by_token_hash("hash-a").await.expect("lookup"),
        None
    );
    let left = store.runner_tokens().await.expect("list");
    assert_eq!(left, vec![("r-b".to_owned(), now)]);
}

async fn a_runner_name_is_taken_once(store: Arc<dyn Store>) {
    store.add_runner_token("r1", "h1", 1).await.expect("add");
    let again = store.add_runner_token("r1", "h2", 2).await;
    assert!(
        matches!(again, Err(StoreError::AlreadyExists("runner"))),
        "{again:?}"
    );
    // Nothing of the refused write stands; the first token still works.
    assert_eq!(
        store.runner_by_token_hash("h2").await.expect("lookup"),
        None
    );
    let found = store.runner_by_token_hash("h1").await.expect("lookup");
    assert_eq!(found.as_deref(), Some("r1"));
    // A user of the same name is another identity, in another table.
    store.create_user("r1").await.expect("user");
    let minted = create_runner_token(store.as_ref(), "r1").await;
    assert!(
        matches!(minted, Err(RunnerTokenError::Exists(_))),
        "{minted:?}"
    );
}

/// `GET path` with `Authorization: Bearer token` (none when `token` is empty): status,
/// Content-Type and body bytes.
async fn fetch(server: &TestServer, path: &str, token: &str) -> (u16, String, Vec<u8>) {
    let mut request = server.http.get(server.url(path));
    if !token.is_empty() {
        request = request.bearer_auth(token);
    }
    let r = request.send().await.expect("send");
    let status = r.status().as_u16();
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (
        status,
        content_type,
        r.bytes().await.expect("body").to_vec(),
    )
}

fn error_code(body: &[u8]) -> Value {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    body["error"]["code"].clone()
}

/// The tar inside `tarball(files)`, zstd'd, and its sha256.
fn zstd_tarball(files: &[(&str, &[u8])]) -> (Vec<u8>, String) {
    let (gz, _) = tarball(files);
    let mut tar = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut tar)
        .expect("gunzip");
    let bytes = zstd::encode_all(tar.as_slice(), 3).expect("zstd");
    let sha = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
    (bytes, sha)
}

both!(
    runners_download_bundles_users_uploaded,
    |backend| async move {
        let server = TestServer::start(backend).await;
        let store = server.state.core.store.clone();
        let user = server.user("ada").await;
        let runner = create_runner_token(store.as_ref(), "runner-1")
            .await
            .expect("runner token");

        let (gz, gz_sha) = tarball(&[("README.md", b"# demo\n"), ("src/a.rs", b"fn a() {}\n")]);
        let (status, body) = server.put_bundle(&user, &gz_sha, gz.clone()).await;
        assert_eq!(status, 200, "{body}");
        let (zst, zst_sha) = zstd_tarball(&[("src/b.rs", b"fn b() {}\n")]);
        let r = server
            .http
            .put(server.url(&format!("/v1/bundles/{zst_sha}")))
            .bearer_auth(&user)
            .header("content-type", "application/zstd")
            .body(zst.clone())
            .send()
            .await
            .expect("send");
        assert_eq!(r.status().as_u16(), 200);

        for (sha, bytes, media) in [
            (&gz_sha, &gz, "application/gzip"),
            (&zst_sha, &zst, "application/zstd"),
        ] {
            let path = format!("/v1/runner/bundles/{sha}");
            let (status, content_type, got) = fetch(&server, &path, &runner).await;
            assert_eq!((status, content_type.as_str()), (200, media));
            assert!(got == *bytes, "the bytes differ from the upload");
            // A user's token, or none, is no runner's.
            let (status, _, body) = fetch(&server, &path, &user).await;
            assert_eq!((status, error_code(&body)), (401, "unauthorized".into()));
            let (status, _, _) = fetch(&server, &path, "").await;
            assert_eq!(status, 401);
        }

        // A runner token is no user's.
        let (status, _, body) = fetch(&server, "/v1/sessions", &runner).await;
        assert_eq!((status, error_code(&body)), (401, "unauthorized".into()));
        let (status, _) = server.get("/v1/sessions", &user).await;
        assert_eq!(status, 200);

        let bad = [
            "not-a-sha".to_owned(),
            gz_sha.to_uppercase(),
            gz_sha[1..].to_owned(),
        ];
        for id in bad {
            let path = format!("/v1/runner/bundles/{id}");
            let (status, _, body) = fetch(&server, &path, &runner).await;
            assert_eq!(
                (status, error_code(&body)),
                (400, "invalid_sha256".into()),
                "{id}"
            );
        }
        let unknown = format!("/v1/runner/bundles/{}", "0".repeat(64));
        let (status, _, body) = fetch(&server, &unknown, &runner).await;
        assert_eq!((status, error_code(&body)), (404, "not_found".into()));

        assert!(store.revoke_runner_token("runner-1").await.expect("revoke"));
        let path = format!("/v1/runner/bundles/{gz_sha}");
        let (status, _, body) = fetch(&server, &path, &runner).await;
        assert_eq!((status, error_code(&body)), (401, "unauthorized".into()));
    }
);

/// Runner requests are limited on the runner's own read bucket, never on the client address's
/// anonymous one (which here allows a single request).
#[tokio::test]
async fn runners_are_rate_limited_per_runner_not_per_address() {
    const BURST: u32 = 5;
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.rate_limits = RateLimits {
            reads: RateLimit {
                per_second: 1,
                burst: BURST,
            },
            anonymous: RateLimit {
                per_second: 1,
                burst: 1,
            },
            ..RateLimits::default()
        };
    })
    .await;
    let store = server.state.core.store.as_ref();
    let first = create_runner_token(store, "r1").await.expect("token");
    let second = create_runner_token(store, "r2").await.expect("token");
    let path = format!("/v1/runner/bundles/{}", "0".repeat(64));
    let start = std::time::Instant::now();
    let (mut passed, mut limited) = (0_u64, 0_u64);
    for _ in 0..20 {
        match fetch(&server, &path, &first).await {
            (404, _, _) => passed += 1,
            (429, _, body) => {
                assert_eq!(error_code(&body), "rate_limited");
                limited += 1;
            }
            (other, _, body) => panic!("unexpected {other}: {}", String::from_utf8_lossy(&body)),
        }
    }
    // The whole burst went through, though the address's anonymous bucket holds one request;
    // and no more than the burst plus one a second for the time the loop took.
    assert!(passed >= u64::from(BURST), "passed {passed}");
    let allowed = u64::from(BURST) + start.elapsed().as_secs() + 1;
    assert!(
        passed <= allowed && passed + limited == 20,
        "passed {passed}"
    );
    // Another runner from the same address has a bucket of its own.
    let (status, _, _) = fetch(&server, &path, &second).await;
    assert_eq!(status, 404);
}

/// Run `ultraplan-server` with the given database; stdout, stderr and success.
fn server_cli(data_dir: &std::path::Path, database_url: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ultraplan-server"));
    command
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("DATABASE_URL")
        .env("ULTRAPLAN_LOG", "warn");
    if let Some(url) = database_url {
        command.env("DATABASE_URL", url);
    }
    command.output().expect("run ultraplan-server")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

both!(
    the_runner_token_command_adds_lists_and_revokes,
    |backend| async move {
        let db = test_db(backend).await;
        let data_dir = db.dir.path().join("data");
        // SQLite: the data dir's default database; PostgreSQL: DATABASE_URL.
        let (url, database_url) = match backend {
            Backend::Sqlite => (ultraplan_server::config::sqlite_url(&data_dir), None),
            Backend::Postgres => (db.url.clone(), Some(db.url.as_str())),
        };
        let cli = |args: &[&str]| server_cli(&data_dir, database_url, args);

        let added = cli(&["runner-token", "add", "build-1"]);
        assert!(added.status.success(), "{}", text(&added.stderr));
        let token = text(&added.stdout).trim().to_owned();
        assert!(
            token.starts_with("urt_") && !token.contains('\n'),
            "{token:?}"
        );
        assert!(
            text(&added.stderr).contains("shown once"),
            "{}",
            text(&added.stderr)
        );

        let store = ultraplan_server::store::connect(&url)
            .await
            .expect("connect");
        let runner = verify_runner(store.as_ref(), &token).await.expect("verify");
        assert_eq!(runner.map(|r| r.name).as_deref(), Some("build-1"));

        let again = cli(&["runner-token", "add", "build-1"]);
        assert!(!again.status.success() && again.stdout.is_empty());
        assert!(
            text(&again.stderr).contains("exists already"),
            "{}",
            text(&again.stderr)
        );
        let invalid = cli(&["runner-token", "add", "no/slashes"]);
        assert!(!invalid.status.success() && invalid.stdout.is_empty());
        assert!(
            text(&invalid.stderr).contains("invalid runner name"),
            "{}",
            text(&invalid.stderr)
        );
        assert!(cli(&["runner-token", "add", "build-0"]).status.success());

        let listed = cli(&["runner-token", "list"]);
        assert!(listed.status.success(), "{}", text(&listed.stderr));
        let listed = text(&listed.stdout);
        let lines: Vec<&str> = listed.lines().collect();
        assert_eq!(lines.len(), 3, "{listed}");
        assert!(
            lines[0].starts_with("RUNNER") && lines[0].contains("CREATED"),
            "{listed}"
        );
        let names: Vec<&str> = lines[1..]
            .iter()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(names, ["build-0", "build-1"], "{listed}");
        let year = time::OffsetDateTime::now_utc().year().to_string();
        assert!(
            lines[1..].iter().all(|l| l.contains(&format!(" {year}-"))),
            "{listed}"
        );
        assert!(!listed.contains("urt_"), "the list never shows a token");

        let revoked = cli(&["runner-token", "revoke", "build-1"]);
        assert!(revoked.status.success(), "{}", text(&revoked.stderr));
        assert_eq!(
            verify_runner(store.as_ref(), &token).await.expect("verify"),
            None
        );
        let missing = cli(&["runner-token", "revoke", "build-1"]);
        assert!(!missing.status.success());
        assert!(
            text(&missing.stderr).contains("no runner named build-1"),
            "{}",
            text(&missing.stderr)
        );
        let listed = text(&cli(&["runner-token", "list"]).stdout);
        assert!(
            !listed.contains("build-1") && listed.contains("build-0"),
            "{listed}"
        );
    }
);
