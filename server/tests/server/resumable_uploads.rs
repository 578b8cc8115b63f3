//! Resumable bundle uploads over HTTP: a cut connection keeps what arrived, the upload goes
//! on from there, and the finished archive passes every check a `PUT` makes. Uploads in
//! progress are their owner's alone.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Backend, TestServer, head, tarball};

/// Incompressible bytes, so the archive is as large as its content.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// `HEAD /v1/bundles/{sha}/upload`: the status and `(Upload-Offset, Upload-Length)`.
async fn held(server: &TestServer, token: &str, sha: &str) -> (u16, Option<(u64, u64)>) {
    let r = server
        .http
        .head(server.url(&format!("/v1/bundles/{sha}/upload")))
        .bearer_auth(token)
        .send()
        .await
        .expect("send");
    let number = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let found = number("upload-offset").zip(number("upload-length"));
    (r.status().as_u16(), found)
}

/// `PATCH /v1/bundles/{sha}/upload` with `body` from `offset` of `length`.
async fn patch(
    server: &TestServer,
    token: &str,
    sha: &str,
    (offset, length): (u64, u64),
    body: reqwest::Body,
) -> Result<(u16, Option<u64>, Value), reqwest::Error> {
    let r = server
        .http
        .patch(server.url(&format!("/v1/bundles/{sha}/upload")))
        .bearer_auth(token)
        .header("content-type", "application/gzip")
        .header("upload-offset", offset)
        .header("upload-length", length)
        .body(body)
        .send()
        .await?;
    let status = r.status().as_u16();
    let offset = r
        .headers()
        .get("upload-offset")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    Ok((status, offset, r.json().await.unwrap_or(Value::Null)))
}

/// A body that sends `bytes` a piece at a time and then fails, as a cut connection does.
fn cut_after(bytes: Vec<u8>) -> reqwest::Body {
    use futures_util::StreamExt;
    let pieces: Vec<Result<Vec<u8>, std::io::Error>> = bytes
        .chunks(16 * 1024)
        .map(|piece| Ok(piece.to_vec()))
        .chain([Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "cut",
        ))])
        .collect();
    let paced = futures_util::stream::iter(pieces).then(|piece| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        piece
    });
    reqwest::Body::wrap_stream(paced)
}

/// What the server holds once the cut request was handled.
async fn settled_offset(server: &TestServer, token: &str, sha: &str) -> u64 {
    let mut last = None;
    for _ in 0..100 {
        let (_, found) = held(server, token, sha).await;
        if found.is_some() && found == last {
            return found.map_or(0, |(offset, _)| offset);
        }
        last = found;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the upload's offset never settled: {last:?}");
}

#[tokio::test]
async fn a_cut_upload_goes_on_from_what_the_server_kept() {
    let server = TestServer::start(Backend::Sqlite).await;
    let token = server.user("a").await;
    let big = noise(512 * 1024);
    let (bytes, sha) = tarball(&[("README.md", b"# demo\n"), ("data.bin", &big)]);
    let length = bytes.len() as u64;
    assert_eq!(held(&server, &token, &sha).await, (404, None));

    let half = bytes.len() / 2;
    let cut = patch(
        &server,
        &token,
        &sha,
        (0, length),
        cut_after(bytes[..half].to_vec()),
    )
    .await;
    assert!(cut.is_err(), "the client saw its body fail: {cut:?}");
    let kept = settled_offset(&server, &token, &sha).await;
    assert!(
        kept > 0 && kept <= half as u64,
        "kept {kept} of {half} sent"
    );
    assert_eq!(
        held(&server, &token, &sha).await,
        (200, Some((kept, length)))
    );

    // From anywhere else than what the server holds: refused, and told where to go on.
    let (status, offset, body) = patch(&server, &token, &sha, (0, length), bytes.clone().into())
        .await
        .expect("send");
    assert_eq!((status, offset), (409, Some(kept)), "{body}");
    assert_eq!(body["error"]["code"], "upload_offset_mismatch");
    // Another length is another upload: refused while this one is held.
    let (status, _, body) = patch(&server, &token, &sha, (kept, length + 1), Vec::new().into())
        .await
        .expect("send");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("upload_conflict"))
    );

    let rest = bytes[usize::try_from(kept).unwrap()..].to_vec();
    let (status, _, body) = patch(&server, &token, &sha, (kept, length), rest.into())
        .await
        .expect("send");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["bundle_id"], sha.as_str());
    assert_eq!(body["bytes"], length);
    assert_eq!(head(&server, &token, &sha).await, 200);
    assert_eq!(
        held(&server, &token, &sha).await,
        (404, None),
        "nothing left in progress"
    );
    let tree = server.state.core.config.bundles_dir().join(&sha);
    assert_eq!(std::fs::read(tree.join("data.bin")).expect("unpacked"), big);
}

#[tokio::test]
async fn an_upload_in_progress_is_its_owners_alone() {
    let server = TestServer::start(Backend::Sqlite).await;
    let a = server.user("a").await;
    let b = server.user("b").await;
    let (bytes, sha) = tarball(&[("data.bin", &noise(64 * 1024))]);
    let length = bytes.len() as u64;
    let (status, offset, _) = patch(
        &server,
        &a,
        &sha,
        (0, length),
        bytes[..1000].to_vec().into(),
    )
    .await
    .expect("send");
    assert_eq!((status, offset), (204, Some(1000)));
    assert_eq!(held(&server, &b, &sha).await, (404, None));
    // B cannot finish A's upload: B's own starts at 0.
    let (status, offset, _) = patch(
        &server,
        &b,
        &sha,
        (1000, length),
        bytes[1000..].to_vec().into(),
    )
    .await
    .expect("send");
    assert_eq!((status, offset), (409, Some(0)));
    assert_eq!(head(&server, &b, &sha).await, 404);
    assert_eq!(held(&server, &a, &sha).await, (200, Some((1000, length))));
    let status = server
        .http
        .patch(server.url(&format!("/v1/bundles/{sha}/upload")))
        .bearer_auth("not-a-token")
        .header("upload-offset", 0)
        .header("upload-length", length)
        .body(bytes.clone())
        .send()
        .await
        .expect("send")
        .status()
        .as_u16();
    assert_eq!(status, 401);
}

/// A refused upload: what, its id, its range, its body, and the status and code it gets.
type Case<'a> = (&'a str, &'a str, (u64, u64), Vec<u8>, u16, &'a str);

#[tokio::test]
async fn bad_uploads_are_refused_with_a_reason_and_leave_nothing() {
    let server = TestServer::start_with(Backend::Sqlite, |c| {
        c.bundle_limits.max_archive_bytes = 256 * 1024;
    })
    .await;
    let token = server.user("a").await;
    let (bytes, sha) = tarball(&[("a.txt", b"hello\n")]);
    let length = bytes.len() as u64;
    let wrong = "0".repeat(64);
    let cases: [Case; 4] = [
        (
            "a hash that is not the bytes'",
            &wrong,
            (0, length),
            bytes.clone(),
            400,
            "hash_mismatch",
        ),
        (
            "over the server's limit",
            &sha,
            (0, 1024 * 1024),
            Vec::new(),
            413,
            "too_large",
        ),
        (
            "an offset past the length",
            &sha,
            (length + 1, length),
            Vec::new(),
            400,
            "invalid_upload_header",
        ),
        (
            "a body past the length",
            &sha,
            (0, 10),
            bytes.clone(),
            413,
            "too_large",
        ),
    ];
    for (name, id, range, body, want_status, want_code) in cases {
        let (status, _, answer) = patch(&server, &token, id, range, body.into())
            .await
            .expect("send");
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (want_status, Some(want_code)),
            "{name}: {answer}"
        );
    }
    assert_eq!(
        held(&server, &token, &wrong).await,
        (404, None),
        "a refused archive is gone"
    );
    assert!(!server.state.core.config.bundles_dir().join(&wrong).exists());
}
