//! A server on a real port with SQLite, users, sessions and browser logins.

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::oneshot;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::session::{BaseRef, SessionContext, SessionStatus};
use ultraplan_server::store::NewSession;
use ultraplan_server::{AppState, Config};

/// A server on 127.0.0.1:<free port>, stopped on drop.
pub struct Server {
    pub base: String,
    pub state: AppState,
    /// Does not follow redirects, keeps no cookies.
    pub http: reqwest::Client,
    _dir: TempDir,
    shutdown: Option<oneshot::Sender<()>>,
}

/// A user and their API token.
pub struct User {
    pub id: String,
    pub token: String,
}

impl Server {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// The same server on a fresh PostgreSQL database (needs ULTRAPLAN_TEST_POSTGRES_URL, which
    /// scripts/test sets).
    pub async fn start_postgres() -> Self {
        let admin = std::env::var("ULTRAPLAN_TEST_POSTGRES_URL")
            .expect("ULTRAPLAN_TEST_POSTGRES_URL is not set: run the suite with scripts/test");
        let name = format!("up_{}", uuid::Uuid::new_v4().simple());
        let pool = sqlx::PgPool::connect(&admin).await.expect("connect admin");
        let create = format!("CREATE DATABASE {name}");
        sqlx::query(sqlx::AssertSqlSafe(create))
            .execute(&pool)
            .await
            .expect("create db");
        pool.close().await;
        let (base, _) = admin.rsplit_once('/').expect("url has a database");
        let url = format!("{base}/{name}");
        Self::start_with(move |c| c.database_url = ultraplan_server::config::Secret::new(url)).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut config = Config::for_data_dir(&dir.path().join("data"));
        let url = format!("sqlite://{}", dir.path().join("pages.db").display());
        config.database_url = ultraplan_server::config::Secret::new(url);
        config.bind = addr;
        config.public_url = format!("http://{addr}");
        tweak(&mut config);
        let store = ultraplan_server::open(&config).await.expect("open store");
        let state = AppState::new(config, store);
        let (tx, rx) = oneshot::channel();
        let served = state.clone();
        tokio::spawn(async move {
            let stop = async {
                let _ = rx.await;
            };
            ultraplan_server::serve(listener, served, stop)
                .await
                .expect("serve");
        });
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        Server {
            base: format!("http://{addr}"),
            state,
            http,
            _dir: dir,
            shutdown: Some(tx),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn user(&self, name: &str) -> User {
        let store = self.state.core.store.as_ref();
        let token = ultraplan_server::auth::create_user_with_token(store, name)
            .await
            .expect("user");
        let id = store
            .user_by_name(name)
            .await
            .expect("store")
            .expect("user row")
            .id;
        User { id, token }
    }

    /// A session as the client creates it (prompt and plan-mode request), without an agent.
    pub async fn session(&self, user: &User, title: &str) -> String {
        let new = NewSession {
            id: uuid::Uuid::new_v4().to_string(),
            user_id: user.id.clone(),
            title: title.to_owned(),
            bundle_id: None,
            context: SessionContext {
                base: BaseRef {
                    commit: Some("4f1c2a9e7d3b".into()),
                    branch: Some("main".into()),
                    dirty: false,
                },
                model: Some("offline".into()),
                repo: Some("webapp".into()),
                ..SessionContext::default()
            },
            status: SessionStatus::Running,
        };
        let control = serde_json::from_value(json!({"type":"control_request","request_id":"r1",
            "request":{"subtype":"set_permission_mode","mode":"plan","ultraplan":true}}))
        .expect("control");
        let events = [control, EventBody::user_text(format!("ultraplan {title}"))];
        let (row, _) = self
            .state
            .core
            .store
            .create_session(&new, &events)
            .await
            .expect("create");
        row.id
    }

    /// Append events as the agent would (through the store, waking streams).
    pub async fn agent_says(&self, session_id: &str, events: &[EventBody]) -> Vec<Event> {
        let row = self
            .state
            .core
            .store
            .session(session_id)
            .await
            .expect("store")
            .expect("session");
        self.state.core.append(&row, events).await.expect("append")
    }

    /// Every event of the session.
    pub async fn events(&self, session_id: &str) -> Vec<Event> {
        let (events, more) = self
            .state
            .core
            .store
            .list_events(session_id, 0, 100)
            .await
            .expect("events");
        assert!(!more);
        events
    }

    pub async fn status(&self, session_id: &str) -> SessionStatus {
        self.state
            .core
            .store
            .session(session_id)
            .await
            .expect("store")
            .expect("session")
            .status
    }

    /// `POST /v1/login-links` as the CLI's `open ID` calls it.
    pub async fn login_link(&self, user: &User, next: &str) -> (u16, Value) {
        let r = self
            .http
            .post(self.url("/v1/login-links"))
            .bearer_auth(&user.token)
            .json(&json!({ "next": next }))
            .send()
            .await
            .expect("send");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Log in over HTTP through a one-time link; returns the `Cookie` header value.
    pub async fn cookie(&self, user: &User) -> String {
        let (_, body) = self.login_link(user, "/").await;
        let r = self
            .http
            .get(body["url"].as_str().expect("url"))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 303);
        let set = r.headers()["set-cookie"].to_str().expect("ascii");
        set.split(';').next().expect("pair").to_owned()
    }

    /// A page as that cookie's user: status and body.
    pub async fn page(&self, cookie: &str, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(self.url(path))
            .header("cookie", cookie)
            .send()
            .await
            .expect("send");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    }

    /// Post a form as that cookie's user: status and `Location`.
    pub async fn post_form(
        &self,
        cookie: &str,
        path: &str,
        form: &[(&str, &str)],
    ) -> (u16, String) {
        let r = self
            .http
            .post(self.url(path))
            .header("cookie", cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(encode(form))
            .send()
            .await
            .expect("send");
        let location = r
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        (r.status().as_u16(), location)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// `application/x-www-form-urlencoded`.
pub fn encode(form: &[(&str, &str)]) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    char::from(b).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    form.iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The CSRF token in a rendered page.
pub fn csrf(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a form with a csrf field") + marker.len();
    html[start..].split('"').next().expect("value").to_owned()
}

/// An assistant event calling ExitPlanMode.
pub fn exit_plan_mode(id: &str, plan: &str) -> EventBody {
    EventBody::assistant(vec![ContentBlock::tool_use(
        id,
        "ExitPlanMode",
        json!({ "plan": plan }),
    )])
}

/// Tool results in the log: `(tool_use_id, text, is_error)`.
pub fn results(events: &[Event]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .flat_map(|e| {
            e.body
                .tool_results()
                .into_iter()
                .map(|(id, t, err)| (id.to_owned(), t, err))
        })
        .collect()
}
