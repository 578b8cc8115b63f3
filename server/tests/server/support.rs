//! Test support: databases for both backends, an in-process server on a real port, bundles.

use std::io::Write;
use std::sync::Arc;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use tokio::sync::oneshot;
use ultraplan_protocol::events::EventBody;
use ultraplan_server::store::Store;
use ultraplan_server::{AppState, Config};

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A fresh database and the data dir it lives beside.
pub struct TestDb {
    pub url: String,
    pub dir: TempDir,
}

/// A brand-new empty database on the backend. PostgreSQL needs ULTRAPLAN_TEST_POSTGRES_URL
/// (scripts/test starts a throwaway server and sets it).
pub async fn test_db(backend: Backend) -> TestDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = match backend {
        Backend::Sqlite => format!("sqlite://{}", dir.path().join("test.db").display()),
        Backend::Postgres => {
            let admin = std::env::var("ULTRAPLAN_TEST_POSTGRES_URL").expect(
                "ULTRAPLAN_TEST_POSTGRES_URL is not set: run the suite with scripts/test, which \
                 starts a throwaway PostgreSQL",
            );
            let name = format!("ut_{}", uuid::Uuid::new_v4().simple());
            let pool = sqlx::PgPool::connect(&admin).await.expect("connect admin");
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&pool)
                .await
                .expect("create database");
            pool.close().await;
            let (base, _) = admin.rsplit_once('/').expect("url has a database");
            format!("{base}/{name}")
        }
    };
    TestDb { url, dir }
}

/// A migrated store on a fresh database.
pub async fn store(backend: Backend) -> (Arc<dyn Store>, TestDb) {
    let db = test_db(backend).await;
    let store = ultraplan_server::store::connect(&db.url)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    (store, db)
}

/// A server on 127.0.0.1:<free port>, stopped on drop.
pub struct TestServer {
    pub base: String,
    pub state: AppState,
    pub http: reqwest::Client,
    /// Keeps the database and data dir alive for the server's lifetime.
    _db: TestDb,
    shutdown: Option<oneshot::Sender<()>>,
}

impl TestServer {
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, |_| {}).await
    }

    pub async fn start_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> Self {
        Self::start_full(backend, tweak, |state| state).await
    }

    /// Start with a config tweak and a final say over the state (e.g. an orchestrator).
    pub async fn start_full(
        backend: Backend,
        tweak: impl FnOnce(&mut Config),
        finish: impl FnOnce(AppState) -> AppState,
    ) -> Self {
        let db = test_db(backend).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut config = Config::for_data_dir(&db.dir.path().join("data"));
        config.database_url = ultraplan_server::config::Secret::new(db.url.clone());
        config.bind = addr;
        config.public_url = format!("http://{addr}");
        tweak(&mut config);
        let store = ultraplan_server::open(&config).await.expect("open store");
        let state = finish(AppState::new(config, store));
        let (tx, rx) = oneshot::channel();
        let served = state.clone();
        tokio::spawn(async move {
            ultraplan_server::serve(listener, served, async {
                let _ = rx.await;
            })
            .await
            .expect("serve");
        });
        TestServer {
            base: format!("http://{addr}"),
            state,
            http: reqwest::Client::new(),
            _db: db,
            shutdown: Some(tx),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Create a user; returns its API token.
    pub async fn user(&self, name: &str) -> String {
        ultraplan_server::auth::create_user_with_token(self.state.core.store.as_ref(), name)
            .await
            .expect("user")
    }

    /// Send `request` with the bearer token; the status and the JSON body (null when none).
    async fn json_of(&self, request: reqwest::RequestBuilder, token: &str) -> (u16, Value) {
        let r = request.bearer_auth(token).send().await.expect("send");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.json_of(self.http.get(self.url(path)), token).await
    }

    /// GET returning the body's bytes.
    pub async fn get_raw(&self, path: &str, token: &str) -> (u16, Vec<u8>) {
        let r = self
            .http
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("send");
        let status = r.status().as_u16();
        (
            status,
            r.bytes().await.map(|b| b.to_vec()).unwrap_or_default(),
        )
    }

    /// GET with `Accept: application/json`.
    pub async fn get_json_accept(&self, path: &str, token: &str) -> (u16, Value) {
        let request = self
            .http
            .get(self.url(path))
            .header("accept", "application/json");
        self.json_of(request, token).await
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> (u16, Value) {
        self.json_of(self.http.post(self.url(path)).json(body), token)
            .await
    }

    pub async fn put(&self, path: &str, token: &str, body: &Value) -> (u16, Value) {
        self.json_of(self.http.put(self.url(path)).json(body), token)
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> (u16, Value) {
        self.json_of(self.http.delete(self.url(path)), token).await
    }

    pub async fn put_bundle(&self, token: &str, sha: &str, bytes: Vec<u8>) -> (u16, Value) {
        let r = self
            .http
            .put(self.url(&format!("/v1/bundles/{sha}")))
            .bearer_auth(token)
            .header("content-type", "application/gzip")
            .body(bytes)
            .send()
            .await
            .expect("send");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Upload a small repository bundle; returns its id.
    pub async fn upload_repo(&self, token: &str) -> String {
        let (bytes, sha) = tarball(&[
            ("README.md", b"# demo\n"),
            ("src/auth.rs", b"pub fn login() {}\n"),
        ]);
        let (status, body) = self.put_bundle(token, &sha, bytes).await;
        assert_eq!(status, 200, "{body}");
        sha
    }

    /// Upload a bundle and create a session; returns the session resource.
    pub async fn session(&self, token: &str, prompt: &str) -> Value {
        let bundle = self.upload_repo(token).await;
        let (status, body) = self
            .post("/v1/sessions", token, &create_body(&bundle, prompt))
            .await;
        assert_eq!(status, 201, "{body}");
        body
    }

    /// Append events as the agent would (through the store, waking pollers).
    pub async fn agent_says(&self, session_id: &str, events: &[EventBody]) -> Vec<i64> {
        let row = self
            .state
            .core
            .store
            .session(session_id)
            .await
            .expect("store")
            .expect("session");
        self.state
            .core
            .append(&row, events)
            .await
            .expect("append")
            .iter()
            .map(|e| e.id)
            .collect()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The body of `POST /v1/sessions` as the client sends it.
pub fn create_body(bundle_id: &str, prompt: &str) -> Value {
    json!({
        "title": prompt,
        "bundle_id": bundle_id,
        "events": [
            {"type":"control_request","request_id":"r1",
             "request":{"subtype":"set_permission_mode","mode":"plan","ultraplan":true}},
            {"type":"user","message":{"role":"user","content":prompt}}
        ],
        "session_context": {"base": {"commit": "abc123", "branch": "main", "dirty": false}}
    })
}

/// The names in `dir`, sorted (empty when it does not exist).
pub fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `HEAD /v1/bundles/{sha}` as `token`: the status.
pub async fn head(server: &TestServer, token: &str, sha: &str) -> u16 {
    server
        .http
        .head(server.url(&format!("/v1/bundles/{sha}")))
        .bearer_auth(token)
        .send()
        .await
        .expect("send")
        .status()
        .as_u16()
}

/// A gzip'd tar of the files, and its sha256.
pub fn tarball(files: &[(&str, &[u8])]) -> (Vec<u8>, String) {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, path, *data)
            .expect("append");
    }
    let tar = builder.into_inner().expect("tar");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gzip");
    let bytes = gz.finish().expect("gzip");
    let sha = hex::encode(Sha256::digest(&bytes));
    (bytes, sha)
}

/// An assistant event calling ExitPlanMode.
pub fn exit_plan_mode(id: &str, plan: &str) -> EventBody {
    EventBody::assistant(vec![ultraplan_protocol::ContentBlock::tool_use(
        id,
        "ExitPlanMode",
        json!({ "plan": plan }),
    )])
}

/// Run an async test body against both backends: `both!(name, |backend| async move {...})`.
macro_rules! both {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                ($body)(crate::support::Backend::Sqlite).await;
            }
            #[tokio::test]
            async fn postgres() {
                ($body)(crate::support::Backend::Postgres).await;
            }
        }
    };
}
pub(crate) use both;

/// A store test for each backend: `on_both_backends!(a, b)` makes `sqlite::a`, `postgres::a`, …,
/// each calling `a(store)` with a fresh store of that backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, _db) = crate::support::store(crate::support::Backend::Sqlite).await;
                    super::$name(store).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let (store, _db) = crate::support::store(crate::support::Backend::Postgres).await;
                    super::$name(store).await;
                }
            )*
        }
    };
}
pub(crate) use on_both_backends;
