//! Two server processes on one PostgreSQL database: each answers idle polls from memory, and
//! what one appends reaches the other's pollers at once (its announcement wakes them), never
//! "nothing new" from a stale cache.

use serde_json::Value;
use tokio::sync::oneshot;
use ultraplan_protocol::events::EventBody;
use ultraplan_server::{AppState, Config};

use crate::support::{Backend, TestServer};

/// A second server over `first`'s database, following its announcements.
struct Replica {
    base: String,
    _dir: tempfile::TempDir,
    _stop: oneshot::Sender<()>,
}

impl Replica {
    async fn beside(first: &TestServer) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut config = Config::for_data_dir(&dir.path().join("data"));
        config.database_url = first.state.core.config.database_url.clone();
        config.bind = addr;
        let (store, changes) =
            ultraplan_server::store::connect_following(config.database_url.expose())
                .await
                .expect("connect");
        let state = AppState::new(config, store);
        ultraplan_server::replicas::follow(state.core.clone(), changes.expect("postgres follows"));
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(async move {
            ultraplan_server::serve(listener, state, async {
                let _ = stopped.await;
            })
            .await
            .expect("serve");
        });
        Replica {
            base: format!("http://{addr}"),
            _dir: dir,
            _stop: stop,
        }
    }

    async fn get(&self, path: &str, token: &str) -> Value {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("request");
        assert_eq!(response.status().as_u16(), 200);
        response.json().await.expect("json")
    }
}

fn ids(page: &Value) -> Vec<i64> {
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|e| e["id"].as_i64().expect("id"))
        .collect()
}

#[tokio::test]
async fn an_append_on_one_replica_wakes_a_long_poll_on_the_other() {
    let first = TestServer::start(Backend::Postgres).await;
    let token = first.user("ada").await;
    let session = first.session(&token, "ultraplan fix the login bug").await;
    let id = session["id"].as_str().expect("id");
    let second = Replica::beside(&first).await;

    // The second replica learns the session and its head, and then remembers them.
    let head = second
        .get(&format!("/v1/sessions/{id}/events?include=session"), &token)
        .await;
    let last = *ids(&head).last().expect("first events");
    let idle = second
        .get(&format!("/v1/sessions/{id}/events?after_id={last}"), &token)
        .await;
    assert_eq!(ids(&idle), Vec::<i64>::new());

    // A long poll on the second waits; the first appends; the poll returns the new event
    // (without the announcement it would sit out its whole wait and return nothing).
    let path = format!("/v1/sessions/{id}/events?after_id={last}&wait=30&include=session");
    let poll = tokio::spawn({
        let token = token.clone();
        async move { second.get(&path, &token).await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let appended = first
        .agent_says(id, &[EventBody::user_text("a note from the first replica")])
        .await;
    let page = poll.await.expect("poll");
    assert_eq!(ids(&page), appended, "{page}");
    assert_eq!(
        page["session"]["last_event_id"].as_i64(),
        appended.last().copied()
    );
}
