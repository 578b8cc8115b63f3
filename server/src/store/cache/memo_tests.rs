//! The cache maps: a row comes back until its session is written; a read that raced a write
//! never puts an old row back; tokens expire.

use std::time::{Duration, Instant};

use ultraplan_protocol::session::{SessionContext, SessionStatus};

use super::*;
use crate::store::{AgentState, SessionRow, TokenRow};

pub(in crate::store::cache) fn row(id: &str, last_event_id: i64) -> SessionRow {
    SessionRow {
        id: id.to_owned(),
        user_id: "u".to_owned(),
        title: "t".to_owned(),
        bundle_id: None,
        status: SessionStatus::Running,
        context: SessionContext::default(),
        usage: Default::default(),
        last_event_id,
        plan_revisions: 0,
        created_at: 0,
        updated_at: 0,
        last_activity_at: 0,
        archived_at: None,
        has_pending_plan: false,
        agent_state: AgentState::Running,
        activity: Default::default(),
        execution: None,
        runner: None,
        requeued_at: None,
    }
}

fn token(id: &str) -> TokenRow {
    TokenRow {
        token_id: id.to_owned(),
        user_id: "u".to_owned(),
        user_name: "ada".to_owned(),
        salt: "s".to_owned(),
        hash: "h".to_owned(),
    }
}

#[test]
fn rows_stay_until_their_session_is_written() {
    let sessions = Sessions::default();
    let ticket = sessions.ticket();
    sessions.fill(ticket, &row("a", 3));
    sessions.fill(ticket, &row("b", 7));
    assert_eq!(sessions.get("a").map(|r| r.last_event_id), Some(3));
    sessions.invalidate("a");
    assert_eq!(sessions.get("a"), None);
    assert_eq!(sessions.get("b").map(|r| r.last_event_id), Some(7));
}

#[test]
fn a_read_that_raced_a_write_is_not_remembered() {
    // (what happens between taking the ticket and filling, row filled, kept)
    type Between = fn(&Sessions);
    let cases: [(&str, Between, bool); 3] = [
        ("nothing", |_| {}, true),
        ("a write to the same session", |s| s.invalidate("a"), false),
        ("a write to another session", |s| s.invalidate("z"), false),
    ];
    for (between, write, kept) in cases {
        let sessions = Sessions::default();
        let ticket = sessions.ticket();
        write(&sessions);
        sessions.fill(ticket, &row("a", 1));
        assert_eq!(sessions.get("a").is_some(), kept, "{between}");
    }
}

#[test]
fn the_session_map_is_bounded() {
    let sessions = Sessions::default();
    for i in 0..MAX_SESSIONS + 10 {
        sessions.fill(sessions.ticket(), &row(&i.to_string(), 0));
    }
    assert!(sessions.count() <= MAX_SESSIONS, "{}", sessions.count());
    assert!(sessions.count() > 0);
}

#[test]
fn tokens_expire_after_their_ttl() {
    let tokens = Tokens::default();
    let read_at = Instant::now();
    tokens.fill(&token("t1"), read_at);
    let cases = [
        (Duration::ZERO, true),
        (TOKEN_TTL - Duration::from_millis(1), true),
        (TOKEN_TTL, false),
        (TOKEN_TTL * 10, false),
    ];
    for (later, known) in cases {
        assert_eq!(
            tokens.get("t1", read_at + later).is_some(),
            known,
            "{later:?} after the read"
        );
    }
    assert_eq!(tokens.get("other", read_at), None);
}

#[test]
fn a_full_token_map_drops_expired_rows_first() {
    let tokens = Tokens::default();
    let old = Instant::now();
    let fresh = old + TOKEN_TTL * 2;
    tokens.fill(&token("old"), old);
    for i in 0..MAX_TOKENS {
        tokens.fill(&token(&format!("f{i}")), fresh);
    }
    assert_eq!(tokens.get("old", old), None);
    let newest = format!("f{}", MAX_TOKENS - 1);
    assert!(tokens.get(&newest, fresh).is_some());
}

#[test]
fn plans_are_kept_with_their_row_and_go_with_it() {
    let sessions = Sessions::default();
    let ticket = sessions.ticket();
    sessions.fill_plans(ticket, "a", &[]);
    assert_eq!(sessions.plans("a"), None, "no row, so no plans");
    sessions.fill(ticket, &row("a", 1));
    sessions.fill_plans(ticket, "a", &[]);
    assert_eq!(sessions.plans("a"), Some(Vec::new()));
    sessions.fill(ticket, &row("a", 1));
    assert_eq!(
        sessions.plans("a"),
        Some(Vec::new()),
        "a refill of the row keeps them"
    );
    let stale = sessions.ticket();
    sessions.invalidate("a");
    sessions.fill(sessions.ticket(), &row("a", 2));
    sessions.fill_plans(stale, "a", &[]);
    assert_eq!(
        sessions.plans("a"),
        None,
        "plans read before a write are not kept"
    );
}
