//! Leases on both backends: claims in queue order, never shared between claimers, fenced by
//! their epoch, released and requeued.

use std::collections::HashSet;
use std::sync::Arc;

use ultraplan_protocol::api::Decision;
use ultraplan_protocol::events::EventBody;
use ultraplan_server::plans::decision_result;
use ultraplan_server::store::{
    AgentState, AppendEffects, Author, Lease, SessionRow, Store, StoreError, now_ms,
};

use crate::store_suite::new_session;
use crate::support::{exit_plan_mode, on_both_backends};

on_both_backends!(
    claims_follow_the_queue_and_happen_once,
    concurrent_claimers_never_share_a_session,
    a_lapsed_lease_is_taken_over_and_its_writes_are_fenced,
    released_sessions_wait_again_only_when_requeued,
    a_runner_restarting_requeues_only_its_own_sessions,
    runners_are_handed_only_what_users_wrote,
    archived_and_finished_sessions_are_never_claimed,
);

const LEASE_MS: i64 = 30_000;

/// A new session, queued for a runner at `at`.
async fn queued(store: &Arc<dyn Store>, user_id: &str, at: i64) -> SessionRow {
    let row = new_session(store, user_id).await;
    assert!(store.queue_session(&row.id, at).await.expect("queue"));
    row
}

fn effects(author: Author, fence: Option<&Lease>) -> AppendEffects {
    AppendEffects {
        author,
        fence: fence.cloned(),
        ..AppendEffects::default()
    }
}

async fn claims_follow_the_queue_and_happen_once(store: Arc<dyn Store>) {
    let u = store.create_user("u").await.expect("user");
    let now = now_ms();
    let second = queued(&store, &u.id, now - 1_000).await;
    let first = queued(&store, &u.id, now - 2_000).await;
    assert_eq!(store.sessions_waiting(now).await.expect("count"), 2);

    let a = store
        .claim_session("a", now, LEASE_MS)
        .await
        .expect("claim");
    let a = a.expect("the oldest session is claimed");
    assert_eq!(a.lease.session_id, first.id, "queue order");
    assert_eq!((a.lease.epoch, a.resumed, a.took_over), (1, false, false));
    assert_eq!(a.waited_ms, 2_000);
    assert_eq!(a.session.runner.as_deref(), Some("a"));
    let b = store
        .claim_session("b", now, LEASE_MS)
        .await
        .expect("claim");
    assert_eq!(b.expect("the next one").lease.session_id, second.id);
    assert!(
        store
            .claim_session("c", now, LEASE_MS)
            .await
            .expect("claim")
            .is_none()
    );
    assert_eq!(store.sessions_waiting(now).await.expect("count"), 0);
}

async fn concurrent_claimers_never_share_a_session(store: Arc<dyn Store>) {
    let u = store.create_user("u").await.expect("user");
    let now = now_ms();
    let mut ids = HashSet::new();
    for i in 0..24 {
        ids.insert(queued(&store, &u.id, now - 1_000 + i).await.id);
    }
    let claimers = (0..6).map(|n| {
        let store = store.clone();
        tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(claim) = store
                .claim_session(&format!("runner-{n}"), now, LEASE_MS)
                .await
                .expect("claim")
            {
                got.push(claim.lease.session_id);
                tokio::task::yield_now().await;
            }
            got
        })
    });
    let mut claimed = Vec::new();
    for claimer in claimers.collect::<Vec<_>>() {
        claimed.extend(claimer.await.expect("claimer"));
    }
    let distinct: HashSet<_> = claimed.iter().cloned().collect();
    assert_eq!(
        claimed.len(),
        24,
        "every session claimed exactly once: {claimed:?}"
    );
    assert_eq!(distinct, ids);
}

async fn a_lapsed_lease_is_taken_over_and_its_writes_are_fenced(store: Arc<dyn Store>) {
    let u = store.create_user("u").await.expect("user");
    let now = now_ms();
    let s = queued(&store, &u.id, now).await;
    let old = store
        .claim_session("a", now, 1_000)
        .await
        .expect("claim")
        .expect("a");
    store
        .set_agent_state(&s.id, AgentState::Running)
        .await
        .expect("running");
    let note = [EventBody::user_text("from a")];
    store
        .append_events(&s.id, &note, &effects(Author::Runner, Some(&old.lease)))
        .await
        .expect("the holder writes");

    // Still held: nobody else gets it.
    assert!(
        store
            .claim_session("b", now + 999, LEASE_MS)
            .await
            .expect("claim")
            .is_none()
    );
    // Lapsed: another runner takes it over with a newer epoch, and it resumes.
    let new = store
        .claim_session("b", now + 1_001, LEASE_MS)
        .await
        .expect("claim")
        .expect("taken over");
    assert_eq!(new.lease.epoch, old.lease.epoch + 1);
    assert!(new.resumed && new.took_over);
    assert_eq!(new.session.requeued_at, Some(now + 1_001));

    // The old holder can neither write, nor renew, nor release.
    let late = store
        .append_events(&s.id, &note, &effects(Author::Runner, Some(&old.lease)))
        .await;
    assert!(
        matches!(late, Err(StoreError::Fenced { epoch: 1, .. })),
        "{late:?}"
    );
    assert!(
        !store
            .renew_lease(&old.lease, now + 60_000)
            .await
            .expect("renew")
    );
    assert!(
        !store
            .release_lease(&old.lease, true)
            .await
            .expect("release")
    );
    let row = store.session(&s.id).await.expect("read").expect("row");
    assert_eq!(row.last_event_id, 2, "the refused append wrote nothing");
    assert_eq!(row.runner.as_deref(), Some("b"));
    // The new holder writes and renews.
    store
        .append_events(&s.id, &note, &effects(Author::Runner, Some(&new.lease)))
        .await
        .expect("the new holder writes");
    assert!(
        store
            .renew_lease(&new.lease, now + 60_000)
            .await
            .expect("renew")
    );
}

async fn released_sessions_wait_again_only_when_requeued(store: Arc<dyn Store>) {
    let u = store.create_user("u").await.expect("user");
    let now = now_ms();
    let s = queued(&store, &u.id, now).await;
    let claim = store
        .claim_session("a", now, LEASE_MS)
        .await
        .expect("claim")
        .expect("a");
    store
        .set_agent_state(&s.id, AgentState::Finished)
        .await
        .expect("finished");
    assert!(
        store
            .release_lease(&claim.lease, false)
            .await
            .expect("release")
    );
    assert!(
        store
            .claim_session("b", now, LEASE_MS)
            .await
            .expect("claim")
            .is_none()
    );
    let row = store.session(&s.id).await.expect("read").expect("row");
    assert_eq!(row.runner, None);

    // A decision on the finished session queues it again; the next claim is a new epoch.
    assert!(store.queue_session(&s.id, now + 5).await.expect("queue"));
    let again = store
        .claim_session("b", now + 10, LEASE_MS)
        .await
        .expect("claim");
    let again = again.expect("queued again");
    assert_eq!((again.lease.epoch, again.waited_ms), (2, 5));
    // Handing a session back (drain) puts it at the end of the queue for anyone.
    assert!(
        store
            .release_lease(&again.lease, true)
            .await
            .expect("hand back")
    );
    let third = store
        .claim_session("c", now_ms(), LEASE_MS)
        .await
        .expect("claim");
    assert_eq!(third.expect("handed back").lease.epoch, 3);
}

async fn a_runner_restarting_requeues_only_its_own_sessions(store: Arc<dyn Store>) {
    let u = store.create_user("u").await.expect("user");
    let now = now_ms();
    let mine = queued(&store, &u.id, now - 2).await;
    let theirs = queued(&store, &u.id, now - 1).await;
    store
        .claim_session("a", now, LEASE_MS)
        .await
        .expect("claim")
        .expect("mine");
    store
        .claim_session("b", now, LEASE_MS)
        .await
        .expect("claim")
        .expect("theirs");
    assert_eq!(
        store
            .release_leases_of(Some("a"), now)
            .await
            .expect("release"),
        1
    );
    let row = store.session(&mine.id).await.expect("read").expect("row");
    assert_eq!((row.runner, row.requeued_at), (None, Some(now)));
    let row = store.session(&theirs.id).await.expect("read").expect("row");
    assert_eq!(row.runner.as_deref(), Some("b"));
    let next = store
        .claim_session("a", now, LEASE_MS)
        .await
        .expect("claim");
    assert_eq!(next.expect("mine again").lease.session_id, mine.id);
    // One process owning the database (SQLite) releases everything.
    assert_eq!(
        store.release_leases_of(None, now).await.expect("release"),
        2
    );
}

async fn runners_are_handed_only_what_users_wrote(store: Arc<dyn Store>) {
    let u = store.create_user("u").await.expect("user");
    let s = queued(&store, &u.id, now_ms()).await;
    let plan = exit_plan_mode("call-1", "# Plan");
    store
        .append_events(
            &s.id,
            std::slice::from_ref(&plan),
            &ultraplan_server::plans::append_effects(std::slice::from_ref(&plan)),
        )
        .await
        .expect("plan");
    let message = [EventBody::user_text("also handle tokens")];
    let posted = store
        .append_events(&s.id, &message, &effects(Author::User, None))
        .await
        .expect("message");
    let decision = Decision::Approve { plan: None };
    let result = decision_result("call-1", &decision, "# Plan");
    store
        .decide_plan(&s.id, "call-1", &decision, &result)
        .await
        .expect("decide");
    let handed = store.user_events_after(&s.id, 0).await.expect("read");
    let ids: Vec<i64> = handed.iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![posted[0].id, posted[0].id + 1]);
    assert_eq!(handed[1].body, result);
    let later = store
        .user_events_after(&s.id, posted[0].id)
        .await
        .expect("read");
    assert_eq!(later.len(), 1);
}

async fn archived_and_finished_sessions_are_never_claimed(store: Arc<dyn Store>) {
    let u = store.create_user("u").await.expect("user");
    let now = now_ms();
    let archived = queued(&store, &u.id, now).await;
    store.archive_session(&archived.id).await.expect("archive");
    let finished = queued(&store, &u.id, now).await;
    store
        .set_agent_state(&finished.id, AgentState::Finished)
        .await
        .expect("finish");
    assert!(
        store
            .claim_session("a", now, LEASE_MS)
            .await
            .expect("claim")
            .is_none()
    );
    // A session a runner holds is not queued by a late decision.
    let held = queued(&store, &u.id, now).await;
    store
        .claim_session("a", now, LEASE_MS)
        .await
        .expect("claim")
        .expect("held");
    assert!(!store.queue_session(&held.id, now + 1).await.expect("queue"));
    assert!(
        store
            .claim_session("b", now + 1, LEASE_MS)
            .await
            .expect("claim")
            .is_none()
    );
}
