//! One store suite, run against SQLite and PostgreSQL alike.

use std::sync::Arc;

use serde_json::json;
use ultraplan_protocol::api::{Decision, PlanStatus};
use ultraplan_protocol::events::Event;
use ultraplan_protocol::events::{AssistantEvent, EventBody};
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::session::{SessionContext, SessionStatus};
use ultraplan_server::plans::{append_effects, decision_result};
use ultraplan_server::store::{
    AgentState, AppendEffects, BundleRow, DecideOutcome, FlagRow, ModelCall, NewPlan, NewSession,
    SessionRow, Store, StoreError,
};

use crate::support::{exit_plan_mode, on_both_backends};

on_both_backends!(
    users_and_tokens,
    bundles_are_owned_per_user,
    sessions_are_scoped_to_their_owner,
    event_ids_increase_and_page,
    concurrent_appends_never_collide,
    polls_answered_from_memory_match_the_log,
    exit_plan_mode_creates_plan_revisions,
    the_store_applies_the_effects_it_is_given,
    decisions_are_atomic_and_idempotent,
    concurrent_decisions_have_one_winner,
    archive_is_once,
    flags_upsert,
    telemetry_counts,
    migrations_are_idempotent,
    agent_state_drives_recovery,
    model_calls_add_up_usage,
    patches_are_stored_byte_for_byte,
);

/// Append with the session rules applied, as the server does.
async fn append(
    store: &Arc<dyn Store>,
    session_id: &str,
    events: &[EventBody],
) -> Result<Vec<Event>, StoreError> {
    store
        .append_events(session_id, events, &append_effects(events))
        .await
}

/// Decide with the tool_result built from the proposed plan, as the server does.
async fn decide(
    store: &Arc<dyn Store>,
    session_id: &str,
    tool_use_id: &str,
    decision: &Decision,
) -> Result<DecideOutcome, StoreError> {
    let proposed = store.plan(session_id, tool_use_id).await?;
    let proposed = proposed.map(|p| p.plan).unwrap_or_default();
    let result = decision_result(tool_use_id, decision, &proposed);
    store
        .decide_plan(session_id, tool_use_id, decision, &result)
        .await
}

pub(crate) async fn new_session(store: &Arc<dyn Store>, user_id: &str) -> SessionRow {
    let new = NewSession {
        id: uuid::Uuid::new_v4().to_string(),
        user_id: user_id.to_owned(),
        title: "fix auth".to_owned(),
        bundle_id: None,
        context: SessionContext::default(),
        status: SessionStatus::Idle,
    };
    let (row, events) = store
        .create_session(&new, &[EventBody::user_text("fix auth")])
        .await
        .expect("create");
    assert_eq!(events.len(), 1);
    row
}

async fn users_and_tokens(store: Arc<dyn Store>) {
    let user = store.create_user("ada").await.expect("user");
    assert!(matches!(
        store.create_user("ada").await,
        Err(StoreError::AlreadyExists("user"))
    ));
    store
        .add_token(&user.id, "t1", "salt", "hash")
        .await
        .expect("token");
    let token = store.token("t1").await.expect("lookup").expect("found");
    assert_eq!(
        (token.user_id.as_str(), token.user_name.as_str()),
        (user.id.as_str(), "ada")
    );
    assert_eq!(token.hash, "hash");
    assert!(store.token("nope").await.expect("lookup").is_none());
    assert_eq!(
        store
            .user_by_name("ada")
            .await
            .expect("by name")
            .map(|u| u.id),
        Some(user.id)
    );
}

async fn bundles_are_owned_per_user(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let b = store.create_user("b").await.expect("b");
    let bundle = BundleRow {
        sha256: "f".repeat(64),
        files: 3,
        bytes: 100,
        unpacked_bytes: 300,
        created_at: 1,
    };
    store.put_bundle(&a.id, &bundle).await.expect("put");
    store
        .put_bundle(&a.id, &bundle)
        .await
        .expect("put again is fine");
    assert_eq!(
        store.owned_bundle(&a.id, &bundle.sha256).await.expect("a"),
        Some(bundle.clone())
    );
    assert_eq!(
        store.owned_bundle(&b.id, &bundle.sha256).await.expect("b"),
        None
    );
    store
        .put_bundle(&b.id, &bundle)
        .await
        .expect("b uploads too");
    assert!(
        store
            .owned_bundle(&b.id, &bundle.sha256)
            .await
            .expect("b")
            .is_some()
    );
}

async fn sessions_are_scoped_to_their_owner(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let b = store.create_user("b").await.expect("b");
    let s = new_session(&store, &a.id).await;
    assert!(
        store
            .session_for_user(&a.id, &s.id)
            .await
            .expect("a")
            .is_some()
    );
    assert!(
        store
            .session_for_user(&b.id, &s.id)
            .await
            .expect("b")
            .is_none()
    );
    assert_eq!(store.list_sessions(&a.id, 10).await.expect("list").len(), 1);
    assert!(
        store
            .list_sessions(&b.id, 10)
            .await
            .expect("list")
            .is_empty()
    );
    assert_eq!(s.status, SessionStatus::Idle);
    assert_eq!(s.last_event_id, 1);
}

async fn event_ids_increase_and_page(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    let batch: Vec<EventBody> = (0..9)
        .map(|i| EventBody::user_text(format!("m{i}")))
        .collect();
    let stored = append(&store, &s.id, &batch).await.expect("append");
    let ids: Vec<i64> = stored.iter().map(|e| e.id).collect();
    assert_eq!(ids, (2..=10).collect::<Vec<_>>());
    let (page, more) = store.list_events(&s.id, 0, 4).await.expect("page");
    assert_eq!(
        page.iter().map(|e| e.id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert!(more);
    let (page, more) = store.list_events(&s.id, 8, 4).await.expect("page");
    assert_eq!(page.iter().map(|e| e.id).collect::<Vec<_>>(), vec![9, 10]);
    assert!(!more);
    assert_eq!(page[1].body, EventBody::user_text("m8"));
    assert!(page[1].created_at.ends_with('Z'));
    let (page, _) = store.list_events(&s.id, 10, 4).await.expect("page");
    assert!(page.is_empty());
    assert!(matches!(
        append(&store, "missing", &batch).await,
        Err(StoreError::NotFound("session"))
    ));
}

async fn concurrent_appends_never_collide(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    let mut tasks = Vec::new();
    for writer in 0..8 {
        let store = store.clone();
        let id = s.id.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                let events = [
                    EventBody::user_text(format!("w{writer}-{i}-a")),
                    EventBody::user_text(format!("w{writer}-{i}-b")),
                ];
                let stored = append(&store, &id, &events).await.expect("append");
                assert_eq!(stored[1].id, stored[0].id + 1, "a batch is contiguous");
            }
        }));
    }
    for task in tasks {
        task.await.expect("writer");
    }
    let mut all = Vec::new();
    let mut after = 0;
    loop {
        let (page, more) = store.list_events(&s.id, after, 100).await.expect("page");
        after = page.last().map_or(after, |e| e.id);
        all.extend(page);
        if !more {
            break;
        }
    }
    let ids: Vec<i64> = all.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=161).collect::<Vec<_>>(), "no gaps, no duplicates");
}

/// Events of every kind, with numbers and text that must come back exactly.
fn varied_batch(round: usize, size: usize) -> Vec<EventBody> {
    (0..size)
        .map(|i| match (round + i) % 3 {
            0 => EventBody::user_text(format!("r{round} é {i}")),
            1 => EventBody::assistant(vec![ultraplan_protocol::events::ContentBlock::tool_use(
                format!("t{round}-{i}"),
                "Grep",
                json!({"pattern": "fn\\s+main", "n": 1.5e300, "x": [1, -2.25, null]}),
            )]),
            _ => EventBody::tool_result(&format!("t{round}-{i}"), "src/main.rs:1", false),
        })
        .collect()
}

/// What a poller is given, as JSON: `list_events` right after reading the session's row, the
/// way the poll handler calls it.
async fn poll(store: &Arc<dyn Store>, id: &str, after: i64) -> (serde_json::Value, i64) {
    store.session(id).await.expect("row");
    let (page, more) = store.list_events(id, after, 1000).await.expect("page");
    assert!(!more);
    let last = page.last().map_or(after, |e| e.id);
    (serde_json::to_value(&page).expect("json"), last)
}

/// The events after `after` as the database holds them (the remembered row forgotten first).
async fn logged(store: &Arc<dyn Store>, id: &str, after: i64) -> serde_json::Value {
    store.forget(id);
    let (page, _) = store.list_events(id, after, 1000).await.expect("page");
    serde_json::to_value(&page).expect("json")
}

/// Polls after appends are answered from memory (the row brought up to date, the events from
/// the tail): what they give is what the database holds.
async fn polls_answered_from_memory_match_the_log(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    let mut after = 0;
    for round in 0..12 {
        // Remembered, as after the poller's last poll.
        store.session(&s.id).await.expect("row");
        append(&store, &s.id, &varied_batch(round, 1 + round % 4))
            .await
            .expect("append");
        // The row remembered through the append is the row the database holds.
        let remembered = store.session(&s.id).await.expect("row");
        store.forget(&s.id);
        let stored = store.session(&s.id).await.expect("row");
        assert_eq!(remembered, stored, "round {round}");
        let (page, last) = poll(&store, &s.id, after).await;
        assert_eq!(page, logged(&store, &s.id, after).await, "round {round}");
        // A poller behind by more than one append gets the same as the log, too.
        let (page, _) = poll(&store, &s.id, after.saturating_sub(3)).await;
        assert_eq!(page, logged(&store, &s.id, after.saturating_sub(3)).await);
        after = last;
    }
    // Appends racing polls: the poller sees every event once, in order, as logged.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (store, id) = (store.clone(), s.id.clone());
            tokio::spawn(async move {
                for round in 0..15 {
                    append(&store, &id, &varied_batch(w + round, 2))
                        .await
                        .expect("append");
                }
            })
        })
        .collect();
    let start = after;
    let mut seen = Vec::new();
    let mut done = false;
    while !done {
        done = writers.iter().all(tokio::task::JoinHandle::is_finished);
        let (page, last) = poll(&store, &s.id, after).await;
        seen.extend(page.as_array().expect("array").iter().cloned());
        after = last;
        tokio::task::yield_now().await;
    }
    let ids: Vec<i64> = seen.iter().map(|e| e["id"].as_i64().expect("id")).collect();
    assert_eq!(ids, ((start + 1)..=(start + 120)).collect::<Vec<_>>());
    let remembered = store.session(&s.id).await.expect("row");
    assert_eq!(
        serde_json::Value::Array(seen),
        logged(&store, &s.id, start).await
    );
    assert_eq!(remembered, store.session(&s.id).await.expect("row"));
}

async fn exit_plan_mode_creates_plan_revisions(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    let mut subagent = exit_plan_mode("sub", "not a main plan");
    if let EventBody::Assistant(AssistantEvent {
        parent_tool_use_id, ..
    }) = &mut subagent
    {
        *parent_tool_use_id = Some("task-1".to_owned());
    }
    append(&store, &s.id, &[subagent]).await.expect("append");
    assert!(store.list_plans(&s.id).await.expect("plans").is_empty());
    let stored = append(&store, &s.id, &[exit_plan_mode("p1", "# Plan one")])
        .await
        .expect("append");
    let plans = store.list_plans(&s.id).await.expect("plans");
    assert_eq!(plans.len(), 1);
    assert_eq!(
        (plans[0].revision, plans[0].status),
        (1, PlanStatus::Pending)
    );
    assert_eq!(
        (plans[0].plan.as_str(), plans[0].event_id),
        ("# Plan one", stored[0].id)
    );
    let row = store.session(&s.id).await.expect("get").expect("found");
    assert_eq!(row.status, SessionStatus::RequiresAction);
    assert!(row.has_pending_plan);
    assert_eq!(row.plan_revisions, 1);
    // The same call delivered twice is still one plan.
    append(&store, &s.id, &[exit_plan_mode("p1", "# Plan one")])
        .await
        .expect("append");
    assert_eq!(store.list_plans(&s.id).await.expect("plans").len(), 1);
}

async fn decisions_are_atomic_and_idempotent(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    append(&store, &s.id, &[exit_plan_mode("p1", "# Plan")])
        .await
        .expect("append");
    let reject = Decision::Reject {
        feedback: "add tests".into(),
        comment_ids: Vec::new(),
    };
    let DecideOutcome::Decided { plan, event } =
        decide(&store, &s.id, "p1", &reject).await.expect("decide")
    else {
        panic!("first decision must decide");
    };
    assert_eq!(plan.status, PlanStatus::Rejected);
    assert_eq!(plan.decision_event_id, Some(event.id));
    assert_eq!(
        event.body.tool_results(),
        vec![("p1", "add tests".to_owned(), true)]
    );
    let row = store.session(&s.id).await.expect("get").expect("found");
    assert_eq!(row.status, SessionStatus::Idle);
    assert!(!row.has_pending_plan);
    assert!(matches!(
        decide(&store, &s.id, "p1", &reject).await.expect("again"),
        DecideOutcome::AlreadyStands(_)
    ));
    assert!(matches!(
        decide(&store, &s.id, "p1", &Decision::Approve { plan: None })
            .await
            .expect("other"),
        DecideOutcome::Conflict(_)
    ));
    assert!(matches!(
        decide(&store, &s.id, "nope", &reject)
            .await
            .expect("unknown"),
        DecideOutcome::UnknownPlan
    ));
    append(&store, &s.id, &[exit_plan_mode("p2", "# Plan v2")])
        .await
        .expect("append");
    let edited = Decision::Approve {
        plan: Some("# Plan v2, edited".into()),
    };
    let DecideOutcome::Decided { plan, event } =
        decide(&store, &s.id, "p2", &edited).await.expect("decide")
    else {
        panic!("decides");
    };
    assert_eq!((plan.revision, plan.status), (2, PlanStatus::Approved));
    let (_, text, is_error) = event.body.tool_results().remove(0);
    assert!(!is_error);
    assert!(
        text.contains("## Approved Plan (edited by user):\n# Plan v2, edited"),
        "{text}"
    );
    let (events, _) = store.list_events(&s.id, 0, 100).await.expect("events");
    let results = events
        .iter()
        .filter(|e| !e.body.tool_results().is_empty())
        .count();
    assert_eq!(results, 2, "one tool_result per decision, none for repeats");
}

async fn concurrent_decisions_have_one_winner(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    append(&store, &s.id, &[exit_plan_mode("p1", "# Plan")])
        .await
        .expect("append");
    let decisions = [
        Decision::Approve { plan: None },
        Decision::Teleport {},
        Decision::Reject {
            feedback: "x".into(),
            comment_ids: Vec::new(),
        },
    ];
    let mut tasks = Vec::new();
    for i in 0..12 {
        let store = store.clone();
        let id = s.id.clone();
        let decision = decisions[i % 3].clone();
        tasks.push(tokio::spawn(async move {
            decide(&store, &id, "p1", &decision).await.expect("decide")
        }));
    }
    let mut decided = 0;
    for task in tasks {
        match task.await.expect("task") {
            DecideOutcome::Decided { .. } => decided += 1,
            DecideOutcome::AlreadyStands(_) | DecideOutcome::Conflict(_) => {}
            DecideOutcome::UnknownPlan => panic!("the plan exists"),
        }
    }
    assert_eq!(decided, 1);
    let (events, _) = store.list_events(&s.id, 0, 100).await.expect("events");
    let results = events
        .iter()
        .filter(|e| !e.body.tool_results().is_empty())
        .count();
    assert_eq!(results, 1);
}

async fn archive_is_once(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    assert!(store.archive_session(&s.id).await.expect("archive"));
    assert!(!store.archive_session(&s.id).await.expect("again"));
    store
        .set_status(&s.id, SessionStatus::Running)
        .await
        .expect("set");
    let row = store.session(&s.id).await.expect("get").expect("found");
    assert_eq!(row.status, SessionStatus::Archived, "archived is final");
    assert!(row.archived_at.is_some());
    let (events, _) = store.list_events(&s.id, 0, 10).await.expect("events");
    assert_eq!(events.len(), 1, "events stay readable");
}

async fn flags_upsert(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let mut row = FlagRow {
        name: "prompt_variant".into(),
        user_id: None,
        value: "visual_plan".into(),
        rollout_pct: Some(30),
        updated_at: 1,
    };
    store.set_flag(&row).await.expect("set");
    row.value = "simple_plan".into();
    row.rollout_pct = None;
    store.set_flag(&row).await.expect("update");
    let user_row = FlagRow {
        user_id: Some(a.id.clone()),
        value: "three_subagents_with_critique".into(),
        ..row.clone()
    };
    store.set_flag(&user_row).await.expect("user");
    let flags = store.list_flags().await.expect("list");
    assert_eq!(flags.len(), 2);
    assert!(flags.contains(&row));
    assert!(flags.contains(&user_row));
}

async fn telemetry_counts(store: Arc<dyn Store>) {
    store
        .record_telemetry("launched", &json!({}), None, None)
        .await
        .expect("record");
    store
        .record_telemetry(
            "create_failed",
            &json!({"reason":"x"}),
            Some("u"),
            Some("s"),
        )
        .await
        .expect("record");
    store
        .record_telemetry("launched", &json!({}), None, None)
        .await
        .expect("record");
    assert_eq!(store.count_telemetry("launched").await.expect("count"), 2);
    assert_eq!(store.count_telemetry("approved").await.expect("count"), 0);
}

async fn migrations_are_idempotent(store: Arc<dyn Store>) {
    store.migrate().await.expect("second run is a no-op");
    store.create_user("after").await.expect("still works");
}

async fn agent_state_drives_recovery(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let running = new_session(&store, &a.id).await;
    let queued = new_session(&store, &a.id).await;
    let finished = new_session(&store, &a.id).await;
    let archived = new_session(&store, &a.id).await;
    assert_eq!(running.agent_state, AgentState::None);
    for (s, state) in [
        (&running, AgentState::Running),
        (&queued, AgentState::Queued),
        (&finished, AgentState::Finished),
        (&archived, AgentState::Running),
    ] {
        store.set_agent_state(&s.id, state).await.expect("set");
    }
    store.archive_session(&archived.id).await.expect("archive");
    let mut ids: Vec<String> = store
        .sessions_to_recover()
        .await
        .expect("recover")
        .into_iter()
        .map(|r| r.id)
        .collect();
    ids.sort();
    let mut want = vec![running.id.clone(), queued.id.clone()];
    want.sort();
    assert_eq!(
        ids, want,
        "queued and running sessions, not finished or archived ones"
    );
    let row = store
        .session(&queued.id)
        .await
        .expect("get")
        .expect("found");
    assert_eq!(row.agent_state, AgentState::Queued);
}

async fn model_calls_add_up_usage(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("a");
    let s = new_session(&store, &a.id).await;
    let usage = Usage {
        input_tokens: 100,
        output_tokens: 20,
        cache_read_input_tokens: 900,
        cache_creation_input_tokens: 50,
    };
    let call = ModelCall {
        session_id: s.id.clone(),
        model: "anthropic:x".into(),
        usage,
        attempts: 4,
        error: None,
    };
    assert_eq!(store.record_model_call(&call).await.expect("record"), usage);
    let total = store.record_model_call(&call).await.expect("record");
    assert_eq!(total.input_tokens, 200);
    assert_eq!(total.cache_read_input_tokens, 1800);
    let row = store.session(&s.id).await.expect("get").expect("found");
    assert_eq!(row.usage, total);
    let missing = ModelCall {
        session_id: "nope".into(),
        ..call
    };
    assert!(matches!(
        store.record_model_call(&missing).await,
        Err(StoreError::NotFound("session"))
    ));
}

async fn patches_are_stored_byte_for_byte(store: Arc<dyn Store>) {
    use ultraplan_protocol::patch::{
        Execution, ExecutionState, FileChange, PatchFile, PatchSummary,
    };
    let user = store.create_user("p").await.expect("user");
    let session = new_session(&store, &user.id).await;
    assert_eq!(session.execution, None);
    assert!(store.patch(&session.id).await.expect("patch").is_none());
    // The approval marks an execution the session does not record yet.
    let fresh = new_session(&store, &user.id).await;
    assert!(store.mark_executing(&fresh.id).await.expect("mark"));
    assert!(!store.mark_executing(&fresh.id).await.expect("mark again"));
    let row = store.session(&fresh.id).await.expect("get").expect("row");
    assert_eq!(
        row.execution.map(|e| e.state),
        Some(ExecutionState::Executing)
    );
    let executing = Execution {
        state: ExecutionState::Executing,
        patch: None,
    };
    store
        .set_execution(&session.id, &executing)
        .await
        .expect("set");
    let row = store.session(&session.id).await.expect("get").expect("row");
    assert_eq!(row.execution, Some(executing));

    // Not UTF-8, NUL bytes included: stored and returned exactly.
    let diff: Vec<u8> = b"diff --git a/x b/x\n\xff\x00\xfe tail\n".to_vec();
    let summary = PatchSummary {
        files: vec![PatchFile {
            path: "x".into(),
            change: FileChange::Modified,
            additions: 1,
            deletions: 0,
            binary: false,
        }],
        additions: 1,
        deletions: 0,
        bytes: diff.len() as u64,
        base_commit: Some("abc".into()),
        left_out: Vec::new(),
        // The verifier's verdict is stored with the summary.
        verdict: Some(Box::new(ultraplan_protocol::verdict::Verdict {
            verdict: ultraplan_protocol::verdict::VerdictOutcome::Fail,
            evidence: "test_x fails".into(),
        })),
    };
    store
        .save_patch(&session.id, &diff, &summary)
        .await
        .expect("save");
    // Saving again replaces it.
    store
        .save_patch(&session.id, &diff, &summary)
        .await
        .expect("save again");
    // A late approval's mark never overwrites what a runner recorded: the patch stays.
    assert!(!store.mark_executing(&session.id).await.expect("mark"));
    let stored = store.patch(&session.id).await.expect("patch").expect("row");
    assert_eq!(stored.diff, diff);
    assert_eq!(stored.summary, summary);
    let row = store.session(&session.id).await.expect("get").expect("row");
    assert_eq!(
        row.execution,
        Some(Execution {
            state: ExecutionState::Finished,
            patch: Some(summary),
        })
    );
}

async fn the_store_applies_the_effects_it_is_given(store: Arc<dyn Store>) {
    let a = store.create_user("a").await.expect("user");
    let s = new_session(&store, &a.id).await;
    let batch = [EventBody::user_text("one"), EventBody::user_text("two")];
    // A plan naming an event outside the batch: refused, and nothing is written.
    let stray = AppendEffects {
        plans: vec![NewPlan {
            event: 2,
            tool_use_id: "p0".to_owned(),
            plan: "# Stray".to_owned(),
            addressed_comment_ids: None,
        }],
        requires_action: true,
        ..AppendEffects::default()
    };
    assert!(matches!(
        store.append_events(&s.id, &batch, &stray).await,
        Err(StoreError::Corrupt(_))
    ));
    let row = store.session(&s.id).await.expect("read").expect("row");
    assert_eq!((row.last_event_id, row.status), (1, SessionStatus::Idle));
    // Whatever the events say, the store writes the effects it is handed, in one go.
    let effects = AppendEffects {
        plans: vec![NewPlan {
            event: 1,
            tool_use_id: "p1".to_owned(),
            plan: "# Given".to_owned(),
            addressed_comment_ids: Some(vec!["cmt_a".to_owned()]),
        }],
        requires_action: true,
        ..AppendEffects::default()
    };
    let stored = store
        .append_events(&s.id, &batch, &effects)
        .await
        .expect("append");
    let plan = store.plan(&s.id, "p1").await.expect("plan").expect("row");
    assert_eq!(
        (plan.event_id, plan.plan.as_str(), plan.revision),
        (stored[1].id, "# Given", 1)
    );
    assert_eq!(plan.addressed_comment_ids, Some(vec!["cmt_a".to_owned()]));
    let row = store.session(&s.id).await.expect("read").expect("row");
    assert_eq!(row.status, SessionStatus::RequiresAction);
    assert!(row.has_pending_plan);
    // No effects: the events alone, even an ExitPlanMode call.
    store
        .append_events(
            &s.id,
            &[exit_plan_mode("p2", "# Ignored")],
            &AppendEffects::default(),
        )
        .await
        .expect("append");
    assert!(store.plan(&s.id, "p2").await.expect("plan").is_none());
}
