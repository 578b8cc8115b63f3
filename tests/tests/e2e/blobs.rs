//! The blob store on a real S3-compatible server (s3s-fs, started by the test): uploads land
//! in the bucket, a server with no local copy unpacks the bundle from it, a second replica on
//! the same PostgreSQL and bucket knows the bundle, and bytes changed in the bucket are
//! refused.

use std::path::Path;

use ultraplan_tests::faults::Postgres;
use ultraplan_tests::harness::{ServerProcess, demo_repo, plan_call, tarball};
use ultraplan_tests::s3::{S3Server, files_under};

/// Bytes of `n` hex characters that gzip cannot shrink much.
fn noise(n: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut out = String::with_capacity(n + 64);
    let mut block = Sha256::digest(b"blob-e2e");
    while out.len() < n {
        out.push_str(&hex::encode(block));
        block = Sha256::digest(block);
    }
    out.truncate(n);
    out
}

fn env_of<'a>(
    pairs: &'a [(String, String)],
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut env: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    env.extend_from_slice(extra);
    env.extend_from_slice(&[
        ("ULTRAPLAN_RUNNER", "bwrap"),
        ("ULTRAPLAN_MODEL", "offline"),
    ]);
    env
}

async fn head(server: &ServerProcess, sha: &str) -> u16 {
    reqwest::Client::new()
        .head(format!("{}/v1/bundles/{sha}", server.base_url))
        .bearer_auth(&server.token)
        .send()
        .await
        .expect("HEAD")
        .status()
        .as_u16()
}

/// Upload the files through the HTTP API; returns (archive bytes, sha).
async fn upload(server: &ServerProcess, files: &[(&str, &str)]) -> (Vec<u8>, String) {
    let (bytes, sha) = tarball(files).expect("tarball");
    let got = server.upload(files).await.expect("upload");
    assert_eq!(got, sha);
    (bytes, sha)
}

/// Create a session over the bundle and wait for its plan; returns the session id.
async fn plan_over(server: &ServerProcess, sha: &str) -> String {
    let id = server
        .create_session(sha, "Fix the login bug")
        .await
        .expect("create");
    let mut seen = Vec::new();
    server
        .wait_for(&id, &mut seen, |e| plan_call(e).is_some())
        .await
        .expect("a plan");
    id
}

fn remove_local_copy(data_dir: &Path, sha: &str) {
    let bundles = data_dir.join("bundles");
    std::fs::remove_dir_all(bundles.join(sha)).expect("remove the tree");
    std::fs::remove_file(bundles.join(format!("{sha}.tar.gz"))).expect("remove the archive");
}

#[tokio::test]
async fn bundles_live_in_s3_and_any_replica_unpacks_them_from_there() {
    let s3 = S3Server::launch("ultraplan-e2e").await.expect("s3s-fs");
    let pg = Postgres::launch().await.expect("throwaway postgres");
    let s3_env = s3.server_env("team/one");
    let env = env_of(&s3_env, &[("DATABASE_URL", &pg.url)]);
    let first = ServerProcess::start(&env).await.expect("first replica");
    let started = first.log().lines().any(|l| {
        l.contains("blob store")
            && l.contains("\"s3\"")
            && l.contains("s3://ultraplan-e2e/team/one")
    });
    assert!(
        started,
        "the start-up log names the blob store's kind:\n{}",
        first.log()
    );

    // Over 5 MiB of incompressible data: the archive goes up in more than one part.
    let big = noise(7 * 1024 * 1024);
    let mut files = demo_repo();
    files.push(("assets/big.txt", big.as_str()));
    let (bytes, sha) = upload(&first, &files).await;
    assert!(bytes.len() > 5 * 1024 * 1024, "{} bytes", bytes.len());
    let object = s3.object_path(&format!("team/one/bundles/{sha}.tar.gz"));
    let stored = std::fs::read(&object).unwrap_or_else(|e| {
        panic!(
            "the archive is not in the bucket at {} ({e}); bucket holds {:?}",
            object.display(),
            files_under(&s3.bucket_dir())
        )
    });
    assert!(stored == bytes, "the bucket holds the uploaded bytes");
    let ops = s3.operations();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    assert_eq!(count("CreateMultipartUpload"), 1, "{ops:?}");
    assert!(count("UploadPart") >= 2, "more than one part: {ops:?}");
    assert_eq!(count("CompleteMultipartUpload"), 1, "{ops:?}");
    assert_eq!(count("GetObject"), 0, "{ops:?}");
    assert_eq!(head(&first, &sha).await, 200);

    // The local copy is only a cache: without it a session still plans, from the blob.
    remove_local_copy(&first.data_dir, &sha);
    plan_over(&first, &sha).await;
    assert!(
        first
            .data_dir
            .join("bundles")
            .join(&sha)
            .join("assets/big.txt")
            .is_file(),
        "the tree was unpacked again from the bucket"
    );
    let gets = s3.operations().iter().filter(|o| *o == "GetObject").count();
    assert_eq!(gets, 1, "read from the bucket once: {:?}", s3.operations());

    // A second replica (own data dir, same PostgreSQL and bucket) never saw the upload.
    let second = ServerProcess::start_replica(&env, &first.token)
        .await
        .expect("second replica");
    assert!(!second.data_dir.join("bundles").join(&sha).exists());
    assert_eq!(head(&second, &sha).await, 200, "the bucket answers for it");
    let (_, other) = tarball(&[("only/here.txt", "not uploaded\n")]).expect("tarball");
    assert_eq!(head(&second, &other).await, 404);
    // Neither replica has a copy now: whichever runs the session unpacks it from the bucket.
    remove_local_copy(&first.data_dir, &sha);
    plan_over(&second, &sha).await;
    let unpacked: Vec<_> = [&first, &second]
        .iter()
        .filter(|s| {
            s.data_dir
                .join("bundles")
                .join(&sha)
                .join("src/auth.rs")
                .is_file()
        })
        .map(|s| s.base_url.clone())
        .collect();
    assert_eq!(unpacked.len(), 1, "one replica unpacked it: {unpacked:?}");
    let gets = s3.operations().iter().filter(|o| *o == "GetObject").count();
    assert_eq!(gets, 2, "read from the bucket again: {:?}", s3.operations());
}

#[tokio::test]
async fn a_bundle_changed_in_the_bucket_is_refused_when_unpacked() {
    let s3 = S3Server::launch("ultraplan-tamper").await.expect("s3s-fs");
    let s3_env = s3.server_env("");
    let server = ServerProcess::start(&env_of(&s3_env, &[]))
        .await
        .expect("server");
    let (_, sha) = upload(&server, &demo_repo()).await;
    let object = s3.object_path(&format!("bundles/{sha}.tar.gz"));
    let (other, _) =
        tarball(&[("src/auth.rs", "pub fn login() -> bool { true }\n")]).expect("tarball");
    std::fs::write(&object, &other).expect("change the object in the bucket");
    remove_local_copy(&server.data_dir, &sha);

    let id = server
        .create_session(&sha, "Fix the login bug")
        .await
        .expect("create");
    let mut seen = Vec::new();
    let refusal = server
        .wait_for(&id, &mut seen, |e| {
            serde_json::to_string(e).is_ok_and(|t| t.contains("is damaged"))
        })
        .await
        .expect("a refusal that says why");
    let text = serde_json::to_string(&refusal).expect("json");
    assert!(text.contains("sha256 mismatch"), "{text}");
    assert!(text.contains(&sha), "{text}");
    assert!(
        !seen.iter().any(|e| plan_call(e).is_some()),
        "no plan over bad bytes"
    );
    assert!(
        !server.data_dir.join("bundles").join(&sha).exists(),
        "nothing of the refused archive is left"
    );
    assert!(server.log().contains("damaged"), "{}", server.log());
}

#[tokio::test]
async fn an_unreachable_bucket_gets_503_and_the_upload_works_once_it_is_back() {
    let mut s3 = S3Server::launch("ultraplan-outage").await.expect("s3s-fs");
    let s3_env = s3.server_env("p");
    let server = ServerProcess::start(&env_of(&s3_env, &[]))
        .await
        .expect("server");
    s3.stop().await.expect("stop s3s-fs");

    let files = [("README.md", "# outage\n")];
    let (bytes, sha) = tarball(&files).expect("tarball");
    let put = reqwest::Client::new()
        .put(format!("{}/v1/bundles/{sha}", server.base_url))
        .bearer_auth(&server.token)
        .header("content-type", "application/gzip")
        .body(bytes.clone())
        .send()
        .await
        .expect("an answer");
    assert_eq!(put.status().as_u16(), 503);
    assert!(put.headers().contains_key("retry-after"));
    let body: serde_json::Value = put.json().await.expect("json");
    assert_eq!(body["error"]["code"], "blob_store_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.contains("127.0.0.1"), "no internals: {message}");
    assert_eq!(head(&server, &sha).await, 503, "HEAD cannot tell either");

    s3.restart().await.expect("restart s3s-fs");
    assert_eq!(
        head(&server, &sha).await,
        404,
        "held, but not in the bucket"
    );
    upload(&server, &files).await;
    assert_eq!(head(&server, &sha).await, 200);
    let stored = std::fs::read(s3.object_path(&format!("p/bundles/{sha}.tar.gz"))).expect("blob");
    assert!(stored == bytes);
}
