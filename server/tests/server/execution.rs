//! Remote execution with real agents in bubblewrap: approval starts an executing agent in a
//! writable copy, its edits become the patch, and the patch is served and reported whether
//! the agent finishes or is stopped.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::Notify;
use ultraplan_protocol::events::{ContentBlock, Event, EventBody};
use ultraplan_protocol::model::{ModelError, ModelRequest, ModelResponse, StopReason, Usage};
use ultraplan_server::orchestrator::{Completion, ModelBackend, Orchestrator};

use crate::agents::{agent_server_dyn, wait_for};
use crate::support::TestServer;

/// Plans once, then implements: edit + write, a command that never ends (killed at its
/// 500 ms cap), then finishes. The finishing turn waits for `gate`.
struct Implementer {
    gate: Arc<Notify>,
    requests: Mutex<Vec<ModelRequest>>,
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

fn tool(id: &str, name: &str, input: Value) -> ModelResponse {
    turn(
        vec![ContentBlock::tool_use(id, name, input)],
        StopReason::ToolUse,
    )
}

/// Assistant turns of the execution so far (tool_use ids starting with `x`).
fn execution_turns(request: &ModelRequest) -> usize {
    request
        .messages
        .iter()
        .filter(|m| {
            m.content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse { id, .. } if id.starts_with('x')))
        })
        .count()
}

#[async_trait]
impl ModelBackend for Implementer {
    async fn complete(
        &self,
        _model: &str,
        request: ModelRequest,
    ) -> Result<Completion, ModelError> {
        self.requests.lock().expect("lock").push(request.clone());
        let executing = request.tools.iter().any(|t| t.name == "Bash");
        let verifier = executing && !request.tools.iter().any(|t| t.name == "Write");
        let response = if verifier {
            turn(
                vec![ContentBlock::text("Checked src/auth.rs.\nVERDICT: PASS")],
                StopReason::EndTurn,
            )
        } else if !executing {
            tool(
                "plan1",
                "ExitPlanMode",
                json!({"plan": "1. Make login return true\n2. Add NOTES.md"}),
            )
        } else {
            match execution_turns(&request) {
                0 => turn(
                    vec![
                        ContentBlock::tool_use(
                            "x1",
                            "Edit",
                            json!({"file_path": "src/auth.rs",
                                   "old_string": "pub fn login() {}",
                                   "new_string": "pub fn login() -> bool {\n    true\n}"}),
                        ),
                        ContentBlock::tool_use(
                            "x2",
                            "Write",
                            json!({"file_path": "NOTES.md", "content": "login returns true\n"}),
                        ),
                    ],
                    StopReason::ToolUse,
                ),
                1 => tool(
                    "x3",
                    "Bash",
                    json!({"command": "echo started; sleep 1000", "timeout": 500}),
                ),
                _ => {
                    self.gate.notified().await;
                    turn(
                        vec![ContentBlock::text("Done: login returns true.")],
                        StopReason::EndTurn,
                    )
                }
            }
        };
        Ok(Completion {
            response,
            attempts: 1,
        })
    }
}

async fn start() -> (TestServer, Orchestrator, Arc<Implementer>) {
    let models = Arc::new(Implementer {
        gate: Arc::new(Notify::new()),
        requests: Mutex::new(Vec::new()),
    });
    let (server, orchestrator) = agent_server_dyn(models.clone(), |_| {}).await;
    (server, orchestrator, models)
}

/// A session whose plan was approved, once its execution reached the gated final turn.
async fn approved(server: &TestServer, models: &Implementer, token: &str) -> String {
    let session = server.session(token, "make login succeed").await;
    let id = session["id"].as_str().expect("id").to_owned();
    wait_for(server, token, &id, |e| {
        !e.body.exit_plan_mode_calls().is_empty()
    })
    .await;
    let (code, body) = server
        .post(
            &format!("/v1/sessions/{id}/plans/plan1/decision"),
            token,
            &json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    wait_for(server, token, &id, |e| tool_result_of(e, "x3").is_some()).await;
    let waiting = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while models.requests.lock().expect("lock").len() < 4 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        waiting.is_ok(),
        "the final execution turn was never asked for"
    );
    id
}

fn tool_result_of(event: &Event, id: &str) -> Option<(String, bool)> {
    event
        .body
        .tool_results()
        .into_iter()
        .find(|(tool, _, _)| *tool == id)
        .map(|(_, text, is_error)| (text, is_error))
}

async fn patch_result(server: &TestServer, token: &str, id: &str) -> Vec<Event> {
    wait_for(
        server,
        token,
        id,
        |e| matches!(&e.body, EventBody::Result(r) if r.patch.is_some()),
    )
    .await
}

#[tokio::test]
async fn approval_executes_the_plan_and_serves_its_patch() {
    let (server, orchestrator, models) = start().await;
    let token = server.user("a").await;
    let id = approved(&server, &models, &token).await;

    // Executing: the resource says so and the patch is not ready.
    let (_, session) = server.get(&format!("/v1/sessions/{id}"), &token).await;
    assert_eq!(session["execution"]["state"], "executing", "{session}");
    assert_eq!(session["session_status"], "running");
    let (code, body) = server
        .get(&format!("/v1/sessions/{id}/patch"), &token)
        .await;
    assert_eq!(
        (code, body["error"]["code"].as_str()),
        (409, Some("execution_running"))
    );

    // The command that never ends was killed at its cap and the agent went on.
    let events = wait_for(&server, &token, &id, |e| tool_result_of(e, "x3").is_some()).await;
    let (bash, _) = events
        .iter()
        .find_map(|e| tool_result_of(e, "x3"))
        .expect("bash");
    assert!(
        bash.contains("started") && bash.contains("timed out"),
        "{bash}"
    );

    models.gate.notify_one();
    let events = patch_result(&server, &token, &id).await;
    let Some(EventBody::Result(result)) = events.last().map(|e| &e.body) else {
        panic!("no result");
    };
    let summary = result.patch.clone().expect("summary");
    let files: Vec<&str> = summary.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["NOTES.md", "src/auth.rs"]);
    let text = result.result.clone().unwrap_or_default();
    assert!(
        text.starts_with("Remote execution finished: 2 files changed"),
        "{text}"
    );
    assert!(text.contains(&format!("ultraplan pull {id}")), "{text}");
    assert!(events.iter().any(|e| matches!(&e.body,
        EventBody::System(s) if s.subtype == "execution_started")));

    let (_, session) = server.get(&format!("/v1/sessions/{id}"), &token).await;
    assert_eq!(session["execution"]["state"], "finished", "{session}");
    let workspace = server
        .state
        .core
        .config
        .data_dir
        .join("workspaces")
        .join(&id);
    assert!(
        !workspace.exists(),
        "the copy is dropped once its patch is stored"
    );
    assert_eq!(
        session["execution"]["patch"]["files"][1]["path"],
        "src/auth.rs"
    );

    let (code, raw) = server
        .get_raw(&format!("/v1/sessions/{id}/patch"), &token)
        .await;
    assert_eq!(code, 200);
    let diff = String::from_utf8(raw).expect("utf-8");
    assert!(
        diff.contains("diff --git a/src/auth.rs b/src/auth.rs"),
        "{diff}"
    );
    assert!(diff.contains("+pub fn login() -> bool {"), "{diff}");
    assert!(diff.contains("new file mode 100644"), "{diff}");
    let (code, json) = server
        .get_json_accept(&format!("/v1/sessions/{id}/patch"), &token)
        .await;
    assert_eq!(code, 200);
    assert_eq!(json["files"].as_array().map(Vec::len), Some(2));
    assert_eq!(json["diff"].as_str(), Some(diff.as_str()));

    // Another user's patch is not found; a plan-only session has none.
    let other = server.user("b").await;
    let (code, _) = server
        .get(&format!("/v1/sessions/{id}/patch"), &other)
        .await;
    assert_eq!(code, 404);
    let _ = orchestrator;
}

#[tokio::test]
async fn archiving_mid_execution_keeps_the_work_done_so_far() {
    let (server, orchestrator, models) = start().await;
    let token = server.user("a").await;
    let id = approved(&server, &models, &token).await;
    let (code, _) = server
        .post(&format!("/v1/sessions/{id}/archive"), &token, &json!({}))
        .await;
    assert_eq!(code, 200);
    assert!(!orchestrator.is_live(&id));
    let events = patch_result(&server, &token, &id).await;
    let result = events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::Result(r) if r.patch.is_some() => Some(r.clone()),
            _ => None,
        })
        .expect("patch result");
    let text = result.result.unwrap_or_default();
    assert!(
        text.starts_with("Remote execution stopped early (the session was archived)"),
        "{text}"
    );
    let (code, raw) = server
        .get_raw(&format!("/v1/sessions/{id}/patch"), &token)
        .await;
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&raw).contains("NOTES.md"));
}

#[tokio::test]
async fn sessions_without_execution_have_no_patch() {
    let (server, _orchestrator, _models) = start().await;
    let token = server.user("a").await;
    let session = server.session(&token, "just plan").await;
    let id = session["id"].as_str().expect("id");
    let (code, body) = server
        .get(&format!("/v1/sessions/{id}/patch"), &token)
        .await;
    assert_eq!(
        (code, body["error"]["code"].as_str()),
        (404, Some("no_patch"))
    );
    let (code, _) = server.get("/v1/sessions/nope/patch", &token).await;
    assert_eq!(code, 404);
}

/// A session whose execution a previous process left behind: workspace prepared and edited,
/// marked executing, and archived meanwhile (no agent will run for it again).
async fn abandoned_execution(server: &TestServer, token: &str) -> String {
    use ultraplan_protocol::patch::{Execution, ExecutionState};
    let session = server.session(token, "left behind").await;
    let id = session["id"].as_str().expect("id").to_owned();
    let state = &server.state;
    let row = state
        .core
        .store
        .session(&id)
        .await
        .expect("store")
        .expect("row");
    let bundle = state
        .core
        .config
        .bundles_dir()
        .join(row.bundle_id.as_deref().expect("bundle"));
    let workspace = ultraplan_server::execution::workspace_of(&state.core, &id);
    workspace.prepare(&bundle, None).await.expect("prepare");
    std::fs::write(workspace.tree.join("WORK.md"), "done before the crash\n").expect("write");
    let executing = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    state
        .core
        .store
        .set_execution(&id, &executing)
        .await
        .expect("mark");
    state
        .core
        .store
        .archive_session(&id)
        .await
        .expect("archive");
    id
}

#[tokio::test]
async fn executions_left_behind_are_finished_and_reported_once() {
    let (server, _orchestrator, _models) = start().await;
    let token = server.user("a").await;
    let id = abandoned_execution(&server, &token).await;
    let state = &server.state;
    let finished = ultraplan_server::execution::finish_abandoned(
        &state.core,
        |_| false,
        "the server restarted",
    )
    .await
    .expect("sweep");
    assert_eq!(finished, 1);
    let (code, raw) = server
        .get_raw(&format!("/v1/sessions/{id}/patch"), &token)
        .await;
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&raw).contains("+done before the crash"));
    let results = |events: &[Event]| {
        events
            .iter()
            .filter(|e| matches!(&e.body, EventBody::Result(r) if r.patch.is_some()))
            .count()
    };
    let events = patch_result(&server, &token, &id).await;
    assert_eq!(results(&events), 1);
    // Nothing is left to sweep, and a stored, reported patch is not reported again.
    let again = ultraplan_server::execution::finish_abandoned(&state.core, |_| false, "again")
        .await
        .expect("sweep");
    assert_eq!(again, 0);
    let row = state
        .core
        .store
        .session(&id)
        .await
        .expect("store")
        .expect("row");
    assert!(
        ultraplan_server::execution::settle_finished(&state.core, &row)
            .await
            .expect("settle")
    );
    let (_, page) = server
        .get(&format!("/v1/sessions/{id}/events"), &token)
        .await;
    let events: Vec<Event> = serde_json::from_value(page["data"].clone()).expect("events");
    assert_eq!(results(&events), 1);
}

/// A queue entry that races the runner executing the session (a busy store applies an
/// approval's queueing after the runner already finished) starts no agent on the finished
/// session: the claim sees the stored patch and gives the session up at once.
#[tokio::test]
async fn a_late_queue_entry_for_an_executed_session_starts_no_agent() {
    use ultraplan_server::store::AgentState;
    let (server, orchestrator, models) = start().await;
    let token = server.user("a").await;
    let id = approved(&server, &models, &token).await;
    models.gate.notify_one();
    patch_result(&server, &token, &id).await;
    let store = &server.state.core.store;
    let row = |store: &Arc<dyn ultraplan_server::store::Store>| {
        let store = store.clone();
        let id = id.clone();
        async move { store.session(&id).await.expect("store").expect("row") }
    };
    let settled = |r: &ultraplan_server::store::SessionRow| {
        r.agent_state == AgentState::Finished && r.runner.is_none()
    };
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while !settled(&row(store).await) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the runner never let go"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let before = row(store).await;
    let asked = models.requests.lock().expect("lock").len();

    assert!(
        orchestrator.queue(&id).await.expect("queue"),
        "queued again"
    );
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let now = row(store).await;
        if now.agent_state != AgentState::Queued && settled(&now) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the late claim did not give the session up: {:?}",
            now.agent_state
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let after = row(store).await;
    assert_eq!(
        after.last_event_id, before.last_event_id,
        "nothing was logged"
    );
    assert_eq!(after.execution, before.execution, "the patch stands");
    assert_eq!(
        models.requests.lock().expect("lock").len(),
        asked,
        "no agent asked the model"
    );
}

#[tokio::test]
async fn a_patch_stored_but_not_reported_is_reported_after_a_restart() {
    use ultraplan_protocol::patch::{FileChange, PatchFile, PatchSummary};
    let (server, _orchestrator, _models) = start().await;
    let token = server.user("a").await;
    let session = server.session(&token, "crash after the patch").await;
    let id = session["id"].as_str().expect("id").to_owned();
    let summary = PatchSummary {
        files: vec![PatchFile {
            path: "a.txt".into(),
            change: FileChange::Added,
            additions: 1,
            deletions: 0,
            binary: false,
        }],
        additions: 1,
        deletions: 0,
        bytes: 10,
        base_commit: None,
        left_out: Vec::new(),
        verdict: None,
    };
    let state = &server.state;
    state
        .core
        .store
        .save_patch(&id, b"diff --git", &summary)
        .await
        .expect("save");
    let row = state
        .core
        .store
        .session(&id)
        .await
        .expect("store")
        .expect("row");
    assert!(
        ultraplan_server::execution::settle_finished(&state.core, &row)
            .await
            .expect("settle")
    );
    let events = patch_result(&server, &token, &id).await;
    let Some(EventBody::Result(result)) = events.last().map(|e| &e.body) else {
        panic!("no result");
    };
    assert_eq!(result.patch.as_ref(), Some(&summary));
    assert!(
        result
            .result
            .as_deref()
            .unwrap_or("")
            .starts_with("Remote execution stopped early (the server restarted)")
    );
}

/// Symlinks an execution agent leaves that escape the repository never reach the stored
/// patch: the patch bytes lack them, the summary and the `result` list them with a reason.
#[tokio::test]
async fn escaping_symlinks_never_reach_the_stored_patch() {
    use ultraplan_protocol::patch::LeftOutReason;
    let server = TestServer::start(crate::support::Backend::Sqlite).await;
    let token = server.user("a").await;
    let session = server.session(&token, "link things").await;
    let id = session["id"].as_str().expect("id").to_owned();
    let state = &server.state;
    let row = state
        .core
        .store
        .session(&id)
        .await
        .expect("store")
        .expect("row");
    let bundle = ultraplan_bundle::bundle_dir(
        &state.core.config.bundles_dir(),
        row.bundle_id.as_deref().expect("bundle"),
    );
    let workspace = ultraplan_server::execution::workspace_of(&state.core, &id);
    workspace.prepare(&bundle, None).await.expect("prepare");
    let tree = &workspace.tree;
    for (target, path) in [
        ("/etc/shadow", "leak"),
        ("../.git", "docs/assets"),
        ("../../outside", "x"),
        ("README.md", "readme-link"),
    ] {
        if let Some(parent) = tree.join(path).parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::os::unix::fs::symlink(target, tree.join(path)).expect("symlink");
    }
    std::fs::write(
        tree.join("src/auth.rs"),
        "pub fn login() -> bool { true }\n",
    )
    .expect("edit");
    ultraplan_server::execution::finish(
        &state.core,
        &row,
        ultraplan_server::execution::Ending::Finished,
    )
    .await
    .expect("finish");

    let stored = ultraplan_server::execution::load_patch(&state.core, &id)
        .await
        .expect("store")
        .expect("patch");
    let diff = String::from_utf8_lossy(&stored.diff);
    for refused in ["leak", "/etc/shadow", "docs/assets", "../.git", "outside"] {
        assert!(
            !diff.contains(refused),
            "{refused} in the stored patch:\n{diff}"
        );
    }
    assert!(
        diff.contains("readme-link") && diff.contains("src/auth.rs"),
        "{diff}"
    );
    let listed: Vec<(&str, LeftOutReason)> = stored
        .summary
        .left_out
        .iter()
        .map(|l| (l.path.as_str(), l.reason))
        .collect();
    assert_eq!(
        listed,
        [
            ("docs/assets", LeftOutReason::SymlinkIntoGit),
            ("leak", LeftOutReason::SymlinkAbsolute),
            ("x", LeftOutReason::SymlinkEscapes),
        ]
    );
    let events = patch_result(&server, &token, &id).await;
    let Some(EventBody::Result(result)) = events.last().map(|e| &e.body) else {
        panic!("no result");
    };
    let text = result.result.as_deref().unwrap_or_default();
    assert!(
        text.contains("Refused symlinks") && text.contains("-  x -> ../../outside"),
        "{text}"
    );
    assert_eq!(result.patch.as_ref(), Some(&stored.summary));
}
