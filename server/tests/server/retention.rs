//! Retention on both backends: unused bundles and spent logins are deleted, used and fresh
//! bundles stay, and a session being created never ends up with a deleted bundle.

use std::sync::Arc;

use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::session::{SessionContext, SessionStatus};
use ultraplan_server::store::{Admission, BundleRow, NewSession, Store, StoreError, now_ms};

/// Like `on_both_backends!`, but each test also gets its database's URL, to age rows and plant
/// logins straight in the database (the store has no way to, by design).
macro_rules! with_url {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, db) = crate::support::store(crate::support::Backend::Sqlite).await;
                    super::$name(store, &db.url).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, db) =
                        crate::support::store(crate::support::Backend::Postgres).await;
                    super::$name(store, &db.url).await;
                }
            )*
        }
    };
}

with_url!(
    unused_old_bundles_go_and_used_or_fresh_ones_stay,
    sessions_and_collection_never_cross,
    quota_counts_what_a_user_holds,
    spent_logins_are_deleted_and_live_ones_stay,
);

const HOUR_MS: i64 = 3_600_000;

enum Arg<'a> {
    I(i64),
    S(&'a str),
}

/// Run one statement straight on the database at `url` (to age rows or plant logins).
async fn sql(url: &str, query: &'static str, args: &[Arg<'_>]) {
    macro_rules! run {
        ($pool:expr) => {{
            let pool = $pool.await.expect("connect");
            let mut q = sqlx::query(query);
            for arg in args {
                q = match arg {
                    Arg::I(i) => q.bind(*i),
                    Arg::S(s) => q.bind(*s),
                };
            }
            q.execute(&pool).await.expect(query);
            pool.close().await;
        }};
    }
    if url.starts_with("sqlite:") {
        run!(sqlx::SqlitePool::connect(url))
    } else {
        run!(sqlx::PgPool::connect(url))
    }
}

/// The ids left in a table with an `id` column.
async fn ids(url: &str, query: &'static str) -> Vec<String> {
    let rows: Vec<(String,)> = if url.starts_with("sqlite:") {
        let pool = sqlx::SqlitePool::connect(url).await.expect("connect");
        sqlx::query_as(query).fetch_all(&pool).await
    } else {
        let pool = sqlx::PgPool::connect(url).await.expect("connect");
        sqlx::query_as(query).fetch_all(&pool).await
    }
    .expect("select");
    rows.into_iter().map(|(id,)| id).collect()
}

fn bundle(c: char) -> BundleRow {
    BundleRow {
        sha256: c.to_string().repeat(64),
        files: 1,
        bytes: 100,
        unpacked_bytes: 300,
        created_at: now_ms(),
    }
}

async fn age(url: &str, sha: &str, user: &str) {
    sql(
        url,
        "UPDATE bundle_owners SET created_at = $1 WHERE sha256 = $2 AND user_id = $3",
        &[Arg::I(1_000), Arg::S(sha), Arg::S(user)],
    )
    .await;
}

async fn session_with(
    store: &Arc<dyn Store>,
    user: &str,
    sha: &str,
) -> Result<ultraplan_server::store::SessionRow, StoreError> {
    let new = NewSession {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: user.to_owned(),
        title: "t".to_owned(),
        bundle_id: Some(sha.to_owned()),
        context: SessionContext::default(),
        status: SessionStatus::Idle,
    };
    store
        .create_session(&new, &[EventBody::user_text("go")])
        .await
        .map(|(row, _)| row)
}

async fn unused_old_bundles_go_and_used_or_fresh_ones_stay(store: Arc<dyn Store>, url: &str) {
    let a = store.create_user("a").await.expect("a").id;
    let b = store.create_user("b").await.expect("b").id;
    let (old, used, fresh, shared, archived) = (
        bundle('1'),
        bundle('2'),
        bundle('3'),
        bundle('4'),
        bundle('5'),
    );
    for row in [&old, &used, &fresh, &shared, &archived] {
        store.put_bundle(&a, row).await.expect("put");
    }
    store.put_bundle(&b, &shared).await.expect("put b");
    session_with(&store, &a, &used.sha256)
        .await
        .expect("session");
    let gone = session_with(&store, &a, &archived.sha256).await.expect("s");
    assert!(store.archive_session(&gone.id).await.expect("archive"));
    for row in [&old, &used, &shared, &archived] {
        age(url, &row.sha256, &a).await;
    }
    let now = now_ms();
    let never = |_: &str| false;
    let collected = store
        .collect_garbage(now, 24 * HOUR_MS, &never)
        .await
        .expect("collect");
    assert_eq!(collected.holdings, 2, "{collected:?}");
    assert_eq!(collected.bundles, vec![old.sha256.clone()]);
    assert!(!store.bundle_known(&old.sha256).await.expect("known"));
    for (row, user, held) in [
        (&old, &a, false),
        (&used, &a, true),
        (&archived, &a, true),
        (&fresh, &a, true),
        (&shared, &a, false),
        (&shared, &b, true),
    ] {
        let owned = store.owned_bundle(user, &row.sha256).await.expect("owned");
        assert_eq!(owned.is_some(), held, "{} of {user}", &row.sha256[..1]);
    }
    assert!(store.bundle_known(&shared.sha256).await.expect("known"));

    // A bundle an upload is busy with stays until it is not.
    let busy = bundle('6');
    store.put_bundle(&a, &busy).await.expect("put");
    age(url, &busy.sha256, &a).await;
    let is_busy = |sha: &str| sha == busy.sha256;
    let collected = store
        .collect_garbage(now, 24 * HOUR_MS, &is_busy)
        .await
        .expect("collect");
    assert!(collected.bundles.is_empty(), "{collected:?}");
    assert!(store.bundle_known(&busy.sha256).await.expect("known"));
    let collected = store
        .collect_garbage(now, 24 * HOUR_MS, &never)
        .await
        .expect("collect");
    assert_eq!(collected.bundles, vec![busy.sha256.clone()]);
    // Once held no more, a bundle cannot start a session.
    assert!(matches!(
        session_with(&store, &a, &old.sha256).await,
        Err(StoreError::NotFound("bundle"))
    ));
}

async fn sessions_and_collection_never_cross(store: Arc<dyn Store>, url: &str) {
    let a = store.create_user("a").await.expect("a").id;
    for round in 0..12_u32 {
        let row = BundleRow {
            sha256: format!("{round:064x}"),
            ..bundle('0')
        };
        store.put_bundle(&a, &row).await.expect("put");
        age(url, &row.sha256, &a).await;
        let never = |_: &str| false;
        let (created, collected) = tokio::join!(
            session_with(&store, &a, &row.sha256),
            store.collect_garbage(now_ms(), HOUR_MS, &never)
        );
        let collected = collected.expect("collect");
        let held = store.owned_bundle(&a, &row.sha256).await.expect("owned");
        match created {
            Ok(session) => {
                assert!(held.is_some(), "round {round}: a session lost its bundle");
                assert!(collected.bundles.is_empty(), "round {round}");
                assert_eq!(session.bundle_id.as_deref(), Some(row.sha256.as_str()));
            }
            Err(StoreError::NotFound("bundle")) => {
                assert!(held.is_none(), "round {round}");
                assert_eq!(collected.bundles, vec![row.sha256.clone()], "round {round}");
            }
            Err(other) => panic!("round {round}: {other}"),
        }
    }
}

async fn quota_counts_what_a_user_holds(store: Arc<dyn Store>, _url: &str) {
    let a = store.create_user("a").await.expect("a").id;
    let b = store.create_user("b").await.expect("b").id;
    assert_eq!(store.bundle_bytes_used(&a).await.expect("used"), 0);
    let first = bundle('a');
    let second = bundle('b');
    let admitted = store
        .put_bundle_within_quota(&a, &first, 1000)
        .await
        .expect("put");
    assert_eq!(admitted, Admission::Admitted);
    assert_eq!(store.bundle_bytes_used(&a).await.expect("used"), 400);
    assert_eq!(
        store
            .put_bundle_within_quota(&a, &second, 700)
            .await
            .expect("put"),
        Admission::OverQuota {
            used: 400,
            needed: 400
        }
    );
    assert!(
        !store.bundle_known(&second.sha256).await.expect("known"),
        "a refused bundle is not recorded"
    );
    assert_eq!(
        store
            .put_bundle_within_quota(&a, &first, 1)
            .await
            .expect("put"),
        Admission::Admitted,
        "holding it already costs nothing"
    );
    assert_eq!(
        store
            .put_bundle_within_quota(&a, &second, 0)
            .await
            .expect("put"),
        Admission::Admitted,
        "0 is no limit"
    );
    assert_eq!(store.bundle_bytes_used(&a).await.expect("used"), 800);
    assert_eq!(store.bundle_bytes_used(&b).await.expect("used"), 0);
}

async fn spent_logins_are_deleted_and_live_ones_stay(store: Arc<dyn Store>, url: &str) {
    let a = store.create_user("a").await.expect("a").id;
    let now = now_ms();
    let links = [
        ("expired", now - HOUR_MS, None),
        ("used", now + HOUR_MS, Some(now - 1000)),
        ("valid", now + HOUR_MS, None),
    ];
    for (id, expires, used) in links {
        sql(
            url,
            "INSERT INTO web_login_links (id, user_id, hash, next_path, created_at, expires_at) \
             VALUES ($1, $2, 'h', '/', $3, $4)",
            &[
                Arg::S(id),
                Arg::S(&a),
                Arg::I(now - 2 * HOUR_MS),
                Arg::I(expires),
            ],
        )
        .await;
        if let Some(at) = used {
            sql(
                url,
                "UPDATE web_login_links SET used_at = $1 WHERE id = $2",
                &[Arg::I(at), Arg::S(id)],
            )
            .await;
        }
    }
    for (id, expires) in [("old", now - 1), ("live", now + HOUR_MS)] {
        sql(
            url,
            "INSERT INTO web_sessions (id, user_id, hash, csrf, created_at, expires_at) \
             VALUES ($1, $2, 'h', 'c', $3, $4)",
            &[
                Arg::S(id),
                Arg::S(&a),
                Arg::I(now - HOUR_MS),
                Arg::I(expires),
            ],
        )
        .await;
    }
    let never = |_: &str| false;
    let collected = store
        .collect_garbage(now, HOUR_MS, &never)
        .await
        .expect("collect");
    assert_eq!((collected.links, collected.web_sessions), (2, 1));
    assert_eq!(
        ids(url, "SELECT id FROM web_login_links ORDER BY id").await,
        ["valid"]
    );
    assert_eq!(
        ids(url, "SELECT id FROM web_sessions ORDER BY id").await,
        ["live"]
    );
}
