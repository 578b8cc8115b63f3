//! The warm-up decisions: when a warm-up pays, how children are grouped, how long entries live.

use super::warm_up::*;

fn shared(members: usize, new_tokens: usize, cached_tokens: usize) -> Shared {
    Shared {
        members,
        new_tokens,
        cached_tokens,
    }
}

#[test]
fn warming_pays_when_siblings_would_write_the_same_prefix() {
    let cases = [
        // (members, new, cached, warm?, why)
        (0, 5_000, 0, false, "nobody starts"),
        (1, 5_000, 0, false, "a single child: nothing changes"),
        (1, 0, 0, false, "a single child with nothing new"),
        (2, 1_200, 0, true, "two explorers with a cold prefix"),
        (3, 1_200, 0, true, "three explorers with a cold prefix"),
        (3, 0, 1_200, false, "the prefix is already cached"),
        (
            2,
            150,
            3_300,
            false,
            "two forks: the caller already wrote most of it",
        ),
        (
            3,
            150,
            3_500,
            false,
            "three forks with a short forking message",
        ),
        (
            4,
            600,
            3_300,
            true,
            "four forks after a long forking message",
        ),
        (2, 0, 0, false, "an empty prefix"),
        (
            usize::MAX,
            usize::MAX,
            usize::MAX,
            false,
            "saturates instead of overflowing",
        ),
    ];
    for (members, new, cached, want, why) in cases {
        assert_eq!(
            worth_warming(shared(members, new, cached)),
            want,
            "{why}: {members} members, {new} new, {cached} cached"
        );
    }
}

#[test]
fn children_are_grouped_by_equal_prefix_in_start_order() {
    let cases: [(&[&str], Vec<Vec<usize>>); 5] = [
        (&[], vec![]),
        (&["explore"], vec![vec![0]]),
        (&["explore", "explore", "explore"], vec![vec![0, 1, 2]]),
        (
            &["explore", "critique", "explore"],
            vec![vec![0, 2], vec![1]],
        ),
        (
            &["a", "b", "c", "b", "a"],
            vec![vec![0, 4], vec![1, 3], vec![2]],
        ),
    ];
    for (keys, want) in cases {
        assert_eq!(groups(keys), want, "{keys:?}");
    }
}

#[test]
fn entries_live_five_minutes_from_their_last_use() {
    let cases = [
        (0, 0, true),
        (1_000, 1_000 + CACHE_TTL_MS - 1, true),
        (1_000, 1_000 + CACHE_TTL_MS, false),
        (5_000, 1_000, true),
    ];
    for (at, now, want) in cases {
        assert_eq!(alive(at, now), want, "written at {at}, now {now}");
    }
}

fn names(list: &str) -> Vec<String> {
    list.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn the_shared_tools_breakpoint_serves_the_most_tool_reads() {
    let offered = "Glob Grep Read TodoWrite Ask Exit Task";
    let cases: [(&[&str], Option<usize>, &str); 8] = [
        (&[], None, "no subagent types"),
        (&["Glob Grep Read"], Some(3), "one type reads three"),
        (
            &[
                "Glob Grep Read",
                "Glob Grep Read",
                "Glob Grep Read TodoWrite",
            ],
            Some(3),
            "three types read three; four for one is worth less",
        ),
        (
            &[
                "Glob",
                "Glob Grep Read TodoWrite",
                "Glob Grep Read TodoWrite",
            ],
            Some(4),
            "two types read four",
        ),
        (&["Grep Read"], None, "not the caller's first tools"),
        (
            &["Glob Grep Read TodoWrite Ask Exit Task"],
            None,
            "all: the last-tool mark serves",
        ),
        (&[""], None, "a type with no tools"),
        (&["Glob Read"], None, "a gap in the caller's order"),
    ];
    for (kinds, want, why) in cases {
        let kinds: Vec<Vec<String>> = kinds.iter().map(|k| names(k)).collect();
        assert_eq!(shared_tools(&names(offered), &kinds), want, "{why}");
    }
}

#[test]
fn the_shared_tools_breakpoint_only_takes_a_spare_slot() {
    use crate::conversation::user_text;
    use crate::tools::{glob, grep, read};
    use ultraplan_protocol::events::CacheControl;

    let prefix = crate::prompts::prefix(
        vec![glob::definition(), grep::definition(), read::definition()],
        vec![],
    );
    let marked = |text: &str| {
        let mut message = user_text(text);
        crate::context::normalize::mark_cache(&mut message);
        message
    };
    let cases = [
        (
            vec![marked("first")],
            true,
            "first request: three breakpoints",
        ),
        (vec![marked("first"), marked("last")], false, "four already"),
        (vec![user_text("first")], true, "two breakpoints"),
    ];
    for (messages, want, why) in cases {
        let mut request = prefix.request(messages, 100);
        assert_eq!(mark_tool(&mut request, 0), want, "{why}");
        let mark = request.tools[0].cache_control.clone();
        assert_eq!(mark, want.then(CacheControl::ephemeral), "{why}");
    }
    let mut request = prefix.request(vec![user_text("x")], 100);
    let last = request.tools.len() - 1;
    assert!(!mark_tool(&mut request, last), "already marked");
    assert!(!mark_tool(&mut request, 99), "no such tool");
}

// The warm-up through the state machine.

use serde_json::{Value, json};
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::model::{ModelError, ModelErrorKind, ModelRequest, StopReason};

use super::test_harness::*;
use super::*;
use crate::conversation::text_of;

fn task(id: &str, kind: Option<&str>) -> ContentBlock {
    let mut input = json!({"description": format!("task {id}"), "prompt": format!("P-{id}")});
    if let Some(kind) = kind {
        input["subagent_type"] = Value::from(kind);
    }
    tool(id, "Task", input)
}

fn say(text: &str) -> Result<ModelResponse, ModelError> {
    reply(vec![ContentBlock::text(text)], StopReason::EndTurn)
}

fn is_warm_up(request: &ModelRequest) -> bool {
    request.max_tokens == 1
}

/// Requests by id.
type Requests = Vec<(String, ModelRequest)>;

/// The requests in `effects`: (warm-ups, children's requests).
fn split(effects: &[Effect]) -> (Requests, Requests) {
    requests(effects)
        .into_iter()
        .partition(|(_, r)| is_warm_up(r))
}

fn last_text(request: &ModelRequest) -> String {
    request.messages.last().map(text_of).unwrap_or_default()
}

/// Begins, and answers the first request with these Task calls.
fn fan_out(agent: &mut Agent, calls: Vec<ContentBlock>) -> Vec<Effect> {
    let begin = agent.handle(Input::Begin);
    model(
        agent,
        &request_id(&begin),
        reply(calls, StopReason::ToolUse),
    )
}

#[test]
fn only_children_sharing_a_cold_prefix_wait_for_a_warm_up() {
    let cases: [(&str, &[Option<&str>], usize, usize); 6] = [
        ("one explorer", &[Some("explore")], 0, 1),
        ("two explorers", &[Some("explore"), Some("explore")], 1, 0),
        (
            "an explorer and a critic",
            &[Some("explore"), Some("critique")],
            0,
            2,
        ),
        (
            "two of each: critics start from the caller's written prefix",
            &[
                Some("explore"),
                Some("critique"),
                Some("explore"),
                Some("critique"),
            ],
            1,
            2,
        ),
        (
            "two explorers and a critic",
            &[Some("explore"), Some("critique"), Some("explore")],
            1,
            1,
        ),
        (
            "two forks: the caller wrote their prefix",
            &[None, None],
            0,
            2,
        ),
    ];
    for (why, kinds, want_warm_ups, want_started) in cases {
        let mut agent = team_agent(4, vec![]);
        let calls = kinds.iter().enumerate();
        let calls = calls
            .map(|(i, kind)| task(&format!("t{i}"), *kind))
            .collect();
        let effects = fan_out(&mut agent, calls);
        let (warm_ups, started) = split(&effects);
        assert_eq!(warm_ups.len(), want_warm_ups, "{why}: warm-ups");
        assert_eq!(started.len(), want_started, "{why}: started at once");
        let mut waiting = kinds.len() - want_started;
        for (id, warm_up) in warm_ups {
            let effects = model(&mut agent, &id, say("."));
            let (more, group) = split(&effects);
            assert!(more.is_empty() && group.len() >= 2, "{why}: {effects:?}");
            waiting -= group.len();
            let mut first = group[0].1.clone();
            assert_eq!(last_text(&first), last_text(&warm_up), "{why}");
            first.max_tokens = 1;
            assert_eq!(first, warm_up, "{why}: the first member's own request");
            assert!(group.iter().all(|(_, r)| r.system == warm_up.system));
        }
        assert_eq!(waiting, 0, "{why}: every child started");
    }
}

#[test]
fn a_failed_warm_up_still_starts_the_children_and_its_usage_counts() {
    let cases = [
        (say("."), 10 + 10),
        (
            Err(ModelError {
                kind: ModelErrorKind::Unavailable,
                message: "overloaded".into(),
            }),
            10,
        ),
    ];
    for (result, input_tokens) in cases {
        let mut agent = team_agent(4, vec![]);
        let calls = vec![task("a", Some("explore")), task("b", Some("explore"))];
        let (warm_ups, _) = split(&fan_out(&mut agent, calls));
        let effects = model(&mut agent, &warm_ups[0].0, result);
        let (_, started) = split(&effects);
        let prompts: Vec<String> = started.iter().map(|(_, r)| last_text(r)).collect();
        assert_eq!(prompts, ["P-a", "P-b"]);
        assert_eq!(agent.usage().input_tokens, input_tokens);
    }
}

#[test]
fn a_prefix_written_in_the_last_five_minutes_is_not_warmed_again() {
    let cases = [(60_000, 0), (CACHE_TTL_MS + 60_000, 1)];
    for (later_ms, want_warm_ups) in cases {
        let mut agent = team_agent(4, vec![]);
        let calls = vec![task("a", Some("explore")), task("b", Some("explore"))];
        let (warm_ups, _) = split(&fan_out(&mut agent, calls));
        let (_, started) = split(&model(&mut agent, &warm_ups[0].0, say(".")));
        model(&mut agent, &started[0].0, say("A"));
        let main = model(&mut agent, &started[1].0, say("B"));
        let (_, next) = split(&main);
        assert_eq!(next.len(), 1, "the main agent's next turn: {main:?}");
        agent.set_clock(later_ms);
        let calls = vec![task("c", Some("explore")), task("d", Some("explore"))];
        let effects = model(&mut agent, &next[0].0, reply(calls, StopReason::ToolUse));
        let (warm_ups, started) = split(&effects);
        assert_eq!(warm_ups.len(), want_warm_ups, "{later_ms} ms later");
        assert_eq!(
            started.len(),
            2 * (1 - want_warm_ups),
            "{later_ms} ms later"
        );
    }
}
