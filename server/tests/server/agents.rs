//! Sessions with real agents: the static agent binary in a bubblewrap sandbox, driven by a
//! scripted model backend, observed only through the HTTP API and the event log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use ultraplan_protocol::constants::TELEPORT_REPLY;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::model::{ModelError, ModelRequest, ModelResponse, StopReason, Usage};
use ultraplan_server::orchestrator::{
    Completion, ModelBackend, Orchestrator, OrchestratorSettings,
};
use ultraplan_server::runner::{Runner, Sandbox};

use crate::support::{Backend, TestServer};

type Script = dyn Fn(&ModelRequest, usize) -> ModelResponse + Send + Sync;

/// A model backend that answers from a script and records what it was asked.
pub struct ScriptedModels {
    script: Box<Script>,
    pub requests: Mutex<Vec<ModelRequest>>,
    /// Hold the first answer this long (a slow provider).
    first_delay: Duration,
}

#[async_trait]
impl ModelBackend for ScriptedModels {
    async fn complete(
        &self,
        _model: &str,
        request: ModelRequest,
    ) -> Result<Completion, ModelError> {
        let n = {
            let mut requests = self.requests.lock().expect("lock");
            requests.push(request.clone());
            requests.len()
        };
        if n == 1 {
            tokio::time::sleep(self.first_delay).await;
        }
        Ok(Completion {
            response: (self.script)(&request, n),
            attempts: 1,
        })
    }
}

fn turn(content: Vec<ContentBlock>, stop: StopReason) -> ModelResponse {
    ModelResponse {
        id: "msg".into(),
        model: "scripted".into(),
        content,
        stop_reason: Some(stop),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        },
    }
}

/// The last tool_result text the agent sent, if the last message carries one.
fn last_result(request: &ModelRequest) -> Option<(String, bool)> {
    let last = request.messages.last()?;
    last.content.iter().rev().find_map(|b| match b {
        ContentBlock::ToolResult {
            content, is_error, ..
        } => Some((content.text(), is_error.unwrap_or(false))),
        _ => None,
    })
}

/// Explore, plan, and revise on rejection; keeps trying to work after a teleport (which the
/// harness must not allow).
pub(crate) fn planner() -> ScriptedModels {
    ScriptedModels {
        script: Box::new(|request, n| {
            let revision = request
                .messages
                .iter()
                .flat_map(|m| &m.content)
                .filter(
                    |b| matches!(b, ContentBlock::ToolUse { name, .. } if name == "ExitPlanMode"),
                )
                .count();
            match (n, last_result(request)) {
                (1, _) => turn(
                    vec![ContentBlock::tool_use(
                        "g1",
                        "Grep",
                        json!({"pattern": "login"}),
                    )],
                    StopReason::ToolUse,
                ),
                (_, Some((text, true))) if text.starts_with("__ULTRAPLAN") => turn(
                    vec![ContentBlock::text("I will keep editing files!")],
                    StopReason::EndTurn,
                ),
                _ => turn(
                    vec![ContentBlock::tool_use(
                        format!("plan{}", revision + 1),
                        "ExitPlanMode",
                        json!({"plan": format!("# Plan v{}\n1. Fix login in src/auth.rs", revision + 1)}),
                    )],
                    StopReason::ToolUse,
                ),
            }
        }),
        requests: Mutex::new(Vec::new()),
        first_delay: Duration::ZERO,
    }
}

/// The sandbox these tests run agents in: bubblewrap with the static agent from
/// ULTRAPLAN_AGENT_BIN (scripts/test builds it).
pub(crate) fn agent_binary() -> std::path::PathBuf {
    std::env::var_os("ULTRAPLAN_AGENT_BIN")
        .map(std::path::PathBuf::from)
        .expect("ULTRAPLAN_AGENT_BIN is not set: run the suite with scripts/test")
}

pub async fn agent_server(models: Arc<ScriptedModels>) -> (TestServer, Orchestrator) {
    agent_server_with(models, |_| {}).await
}

pub async fn agent_server_with(
    models: Arc<ScriptedModels>,
    tweak: impl FnOnce(&mut OrchestratorSettings),
) -> (TestServer, Orchestrator) {
    agent_server_dyn(models, tweak).await
}

/// A server whose agents run in bubblewrap and ask `models`.
pub async fn agent_server_dyn(
    models: Arc<dyn ModelBackend>,
    tweak: impl FnOnce(&mut OrchestratorSettings),
) -> (TestServer, Orchestrator) {
    let runner = ultraplan_server::runner::select(
        ultraplan_runner::sandbox::SandboxKind::Bwrap,
        &agent_binary(),
        "agents-test",
    )
    .await
    .expect("bubblewrap must work here (.ci/run installs it)");
    assert!(matches!(runner, Sandbox::Bwrap));
    let runner = Runner::Local(runner);
    let mut settings = OrchestratorSettings::new(agent_binary());
    settings.max_running = 4;
    tweak(&mut settings);
    let slot = Arc::new(Mutex::new(None));
    let keep = slot.clone();
    let server = TestServer::start_full(
        Backend::Sqlite,
        |_| {},
        move |state| {
            let orchestrator = Orchestrator::new(state.core.clone(), runner, models, settings);
            *keep.lock().expect("lock") = Some(orchestrator.clone());
            state.with_orchestrator(orchestrator)
        },
    )
    .await;
    let orchestrator = slot.lock().expect("lock").take().expect("built");
    (server, orchestrator)
}

/// Long-poll the log until `pred` holds for some event; returns every event so far.
pub async fn wait_for(
    server: &TestServer,
    token: &str,
    id: &str,
    pred: impl Fn(&Event) -> bool,
) -> Vec<Event> {
    let mut all: Vec<Event> = Vec::new();
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let after = all.last().map_or(0, |e| e.id);
            let (status, page) = server
                .get(
                    &format!("/v1/sessions/{id}/events?after_id={after}&wait=10"),
                    token,
                )
                .await;
            assert_eq!(status, 200);
            let page: ultraplan_protocol::api::EventsPage =
                serde_json::from_value(page).expect("page");
            let hit = page.data.iter().any(&pred);
            all.extend(page.data);
            if hit {
                return;
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "condition never met; events: {all:#?}");
    all
}

pub(crate) fn is_plan(id: &str) -> impl Fn(&Event) -> bool + '_ {
    move |e| {
        e.body
            .exit_plan_mode_calls()
            .iter()
            .any(|(call, _)| *call == id)
    }
}

pub(crate) async fn status(server: &TestServer, token: &str, id: &str) -> Value {
    server.get(&format!("/v1/sessions/{id}"), token).await.1
}

pub(crate) async fn wait_gone(orchestrator: &Orchestrator, id: &str) {
    let gone = tokio::time::timeout(Duration::from_secs(30), async {
        while orchestrator.is_live(id) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "agent still running");
}

#[tokio::test]
async fn reject_revise_then_teleport_in_bwrap() {
    let models = Arc::new(planner());
    let (server, orchestrator) = agent_server(models.clone()).await;
    let token = server.user("a").await;
    let session = server.session(&token, "fix the login bug").await;
    let id = session["id"].as_str().expect("id").to_owned();

    let events = wait_for(&server, &token, &id, is_plan("plan1")).await;
    assert!(
        events.iter().any(|e| e
            .body
            .tool_results()
            .iter()
            .any(|(tid, text, _)| *tid == "g1" && text.contains("src/auth.rs"))),
        "the Grep ran inside the bundle: {events:#?}"
    );
    assert_eq!(
        status(&server, &token, &id).await["session_status"],
        "requires_action"
    );

    let (code, _) = server
        .post(
            &format!("/v1/sessions/{id}/plans/plan1/decision"),
            &token,
            &json!({"decision":"reject","feedback":"add a test"}),
        )
        .await;
    assert_eq!(code, 200);
    wait_for(&server, &token, &id, is_plan("plan2")).await;
    let asked = models.requests.lock().expect("lock").clone();
    let feedback_seen = asked
        .iter()
        .any(|r| last_result(r) == Some(("add a test".into(), true)));
    assert!(
        feedback_seen,
        "the model saw the feedback as an is_error tool_result"
    );

    let (code, _) = server
        .post(
            &format!("/v1/sessions/{id}/plans/plan2/decision"),
            &token,
            &json!({"decision":"teleport"}),
        )
        .await;
    assert_eq!(code, 200);
    let events = wait_for(&server, &token, &id, |e| {
        matches!(&e.body, EventBody::Result(_))
    })
    .await;
    let replies: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Assistant(a) => Some(
                a.message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::Text { text, .. } => Some(text.clone()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(replies.last().map(String::as_str), Some(TELEPORT_REPLY));
    assert!(
        !replies.iter().any(|t| t.contains("keep editing")),
        "{replies:?}"
    );
    wait_gone(&orchestrator, &id).await;
    let ids: Vec<i64> = events.iter().map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[1] > w[0]), "ids strictly increase");
}

#[tokio::test]
async fn without_execution_approval_ends_the_plan_phase_and_archive_stops_agents() {
    let models = Arc::new(planner());
    let (server, orchestrator) = agent_server_with(models, |s| s.execute = false).await;
    let token = server.user("a").await;
    let first = server.session(&token, "fix the login bug").await;
    let id = first["id"].as_str().expect("id").to_owned();
    wait_for(&server, &token, &id, is_plan("plan1")).await;
    let (code, _) = server
        .post(
            &format!("/v1/sessions/{id}/plans/plan1/decision"),
            &token,
            &json!({"decision":"approve"}),
        )
        .await;
    assert_eq!(code, 200);
    let events = wait_for(&server, &token, &id, |e| {
        matches!(&e.body, EventBody::Result(_))
    })
    .await;
    let Some(EventBody::Result(result)) = events.last().map(|e| &e.body) else {
        panic!("no result: {events:#?}");
    };
    assert!(
        result
            .result
            .as_deref()
            .unwrap_or("")
            .contains("execution is not enabled"),
        "{result:?}"
    );
    wait_gone(&orchestrator, &id).await;
    assert_eq!(status(&server, &token, &id).await["session_status"], "idle");

    let second = server.session(&token, "another").await;
    let id2 = second["id"].as_str().expect("id").to_owned();
    wait_for(&server, &token, &id2, is_plan("plan1")).await;
    assert!(orchestrator.is_live(&id2));
    let (code, body) = server
        .post(&format!("/v1/sessions/{id2}/archive"), &token, &json!({}))
        .await;
    assert_eq!(
        (code, body["session_status"].as_str()),
        (200, Some("archived"))
    );
    assert!(
        !orchestrator.is_live(&id2),
        "archive returns once the agent is gone"
    );
}

#[tokio::test]
async fn a_silent_agent_is_marked_stalled_until_it_speaks_again() {
    let models = Arc::new(ScriptedModels {
        first_delay: Duration::from_secs(2),
        ..planner()
    });
    let (server, _orchestrator) = agent_server_with(models, |s| {
        s.stall_after = Duration::from_millis(300);
    })
    .await;
    let token = server.user("a").await;
    let session = server.session(&token, "fix the login bug").await;
    let id = session["id"].as_str().expect("id").to_owned();
    let stalled = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if status(&server, &token, &id).await["stalled"] == true {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        stalled.is_ok(),
        "a session silent past the threshold shows as stalled"
    );
    let resource = status(&server, &token, &id).await;
    assert_eq!(
        resource["session_status"], "running",
        "stalled is not a status change"
    );
    wait_for(&server, &token, &id, is_plan("plan1")).await;
    assert_eq!(status(&server, &token, &id).await["stalled"], false);
}
