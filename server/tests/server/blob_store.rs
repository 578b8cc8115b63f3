//! The blob store on its default backend (the data dir's `blobs/`) over real HTTP: an upload
//! puts the archive there, HEAD answers from it, and retention deletes a deleted bundle's blob
//! and blobs no bundle row knows.

use ultraplan_server::blobs::bundle_key;
use ultraplan_server::store::now_ms;

use crate::support::{Backend, TestServer, both, create_body, head, tarball};

fn blob_path(server: &TestServer, sha: &str) -> std::path::PathBuf {
    server
        .state
        .core
        .config
        .data_dir
        .join("blobs")
        .join(bundle_key(sha))
}

both!(
    uploads_land_in_the_blob_store_and_head_asks_it,
    |backend: Backend| async move {
        let server = TestServer::start(backend).await;
        let a = server.user("a").await;
        let (bytes, sha) = tarball(&[("README.md", b"# blobs\n")]);
        let (status, body) = server.put_bundle(&a, &sha, bytes.clone()).await;
        assert_eq!(status, 200, "{body}");
        let stored = std::fs::read(blob_path(&server, &sha)).expect("the blob");
        assert!(stored == bytes, "the blob holds the upload's bytes");
        assert_eq!(head(&server, &a, &sha).await, 200);

        // The local copy alone does not count: with the blob gone, HEAD asks for the upload,
        // and uploading again puts the blob back.
        std::fs::remove_file(blob_path(&server, &sha)).expect("remove the blob");
        assert_eq!(head(&server, &a, &sha).await, 404);
        let (status, body) = server.put_bundle(&a, &sha, bytes).await;
        assert_eq!(status, 200, "{body}");
        assert!(blob_path(&server, &sha).is_file());
        assert_eq!(head(&server, &a, &sha).await, 200);
    }
);

both!(
    retention_deletes_the_blobs_of_deleted_bundles_and_orphans,
    |backend: Backend| async move {
        let server = TestServer::start(backend).await;
        let a = server.user("a").await;
        let (unused, unused_sha) = tarball(&[("unused.txt", b"nobody uses me\n")]);
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
        // A blob no row knows (a crash between the blob upload and the row, another database).
        let orphan = "f".repeat(64);
        std::fs::write(blob_path(&server, &orphan), b"orphan").expect("orphan blob");

        let swept = ultraplan_server::retention::sweep(&server.state.core, now_ms())
            .await
            .expect("sweep");
        assert_eq!(swept.orphan_blobs, 0, "within the grace period: {swept:?}");
        assert!(blob_path(&server, &orphan).is_file());

        let grace = server.state.core.config.retention.bundle_grace;
        let later = now_ms() + i64::try_from(grace.as_millis()).expect("ms") + 60_000;
        let swept = ultraplan_server::retention::sweep(&server.state.core, later)
            .await
            .expect("sweep");
        assert_eq!((swept.bundles, swept.orphan_blobs), (1, 1), "{swept:?}");
        assert!(
            !blob_path(&server, &unused_sha).exists(),
            "deleted with its bundle"
        );
        assert!(!blob_path(&server, &orphan).exists(), "the orphan went");
        assert!(
            blob_path(&server, &used_sha).is_file(),
            "a session's bundle stays"
        );
        assert_eq!(head(&server, &a, &used_sha).await, 200);
    }
);
