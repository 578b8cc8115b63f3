//! Fork request construction: shared prefixes, placeholders, directive last, breakpoints.

use serde_json::json;
use ultraplan_protocol::model::ModelRequest;

use super::*;
use crate::config::ContextSettings;
use crate::context::{self, Prefix};
use crate::conversation::{assistant, text_of, tool_results, user_text};

fn prefix() -> Prefix {
    crate::prompts::prefix(vec![], vec![])
}

/// A parent history ending with an assistant message that calls Glob and forks twice.
fn history() -> Vec<Message> {
    vec![
        user_text("plan the login fix"),
        assistant(vec![ContentBlock::tool_use(
            "g0",
            "Grep",
            json!({"pattern": "login"}),
        )]),
        user(vec![tool_result_block("g0", "src/auth.rs", false)]),
        assistant(vec![
            ContentBlock::text("Splitting the work."),
            ContentBlock::tool_use("g1", "Glob", json!({"pattern": "*"})),
            ContentBlock::tool_use("f1", "Task", json!({"description": "a", "prompt": "A"})),
            ContentBlock::tool_use("f2", "Task", json!({"description": "b", "prompt": "B"})),
        ]),
    ]
}

fn child_request(directive: &str) -> (ModelRequest, Vec<u8>) {
    let caller = prefix();
    let view = context::turn_view(&caller, &history(), &ContextSettings::default());
    let messages = request_messages(&child_messages(&base(view), directive));
    let request = super::prefix(&caller).request(messages, 1000);
    let bytes = serde_json::to_vec(&request).expect("json");
    (request, bytes)
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn find(haystack: &[u8], needle: &str) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .expect("present")
}

#[test]
fn children_share_every_byte_before_the_directive() {
    let (_, a) = child_request("Map the callers of login.");
    let (_, b) = child_request("Find the login tests.");
    let shared = common_prefix(&a, &b);
    let directive_a = find(&a, "Directive: Map");
    let directive_b = find(&b, "Directive: Find");
    assert_eq!(directive_a, directive_b);
    assert_eq!(shared, directive_a + "Directive: ".len());
    let intro = find(&a, "<fork-directive>");
    assert!(find(&a, PLACEHOLDER) < intro && intro < shared);
}

#[test]
fn every_tool_use_gets_the_placeholder_and_the_directive_comes_last() {
    let (request, _) = child_request("Map the callers of login.");
    let last = request.messages.last().expect("last");
    assert_eq!(last.role, Role::User);
    let results = tool_results(last);
    let ids: Vec<&str> = results.iter().map(|r| r.0).collect();
    assert_eq!(ids, ["g1", "f1", "f2"]);
    assert!(
        results
            .iter()
            .all(|(_, text, err)| text == PLACEHOLDER && !err)
    );
    let Some(ContentBlock::Text {
        text,
        cache_control,
    }) = last.content.last()
    else {
        panic!("the directive is the last block")
    };
    assert!(text.ends_with("Directive: Map the callers of login.\n</fork-directive>"));
    assert!(cache_control.is_some(), "its next turn reads it");
    assert_eq!(text_of(&request.messages[0]), "plan the login fix");
    assert_eq!(request.messages.len(), history().len() + 1);
}

fn is_marked(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Text { cache_control, .. }
        | ContentBlock::ToolUse { cache_control, .. }
        | ContentBlock::ToolResult { cache_control, .. } => cache_control.is_some(),
        ContentBlock::Thinking { .. } => false,
    }
}

/// Per message, which blocks carry a breakpoint.
fn message_marks(request: &ModelRequest) -> Vec<Vec<bool>> {
    let blocks = |m: &Message| m.content.iter().map(is_marked).collect();
    request.messages.iter().map(blocks).collect()
}

/// The request as JSON without its breakpoints, which are not part of the cached bytes.
fn unmarked(request: &ModelRequest) -> Vec<u8> {
    let mut value = serde_json::to_value(request).expect("json");
    strip_cache_control(&mut value);
    serde_json::to_vec(&value).expect("json")
}

fn strip_cache_control(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_cache_control);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

#[test]
fn breakpoints_are_system_forking_message_last_placeholder_and_last_block() {
    let (request, bytes) = child_request("x");
    let marks = String::from_utf8_lossy(&bytes)
        .matches("cache_control")
        .count();
    assert_eq!(marks, 4);
    assert!(request.system[0].cache_control.is_some());
    assert!(request.tools.iter().all(|t| t.cache_control.is_none()));
    let want = [
        vec![false],
        vec![false],
        vec![false],
        vec![false, false, false, true],
        vec![false, false, true, true],
    ];
    assert_eq!(
        message_marks(&request),
        want,
        "the forking message's last call, the last placeholder and the directive"
    );
}

#[test]
fn later_turns_keep_the_shared_prefix_and_mark_their_last_block() {
    let caller = prefix();
    let view = context::turn_view(&caller, &history(), &ContextSettings::default());
    let mut messages = child_messages(&base(view), "x");
    let prefix = super::prefix(&caller);
    let first = prefix.request(request_messages(&messages), 10);
    messages.push(assistant(vec![ContentBlock::tool_use(
        "c1",
        "Read",
        json!({"file_path": "a"}),
    )]));
    messages.push(user(vec![tool_result_block("c1", "text", false)]));
    let second = prefix.request(request_messages(&messages), 10);
    let (first, marked) = (unmarked(&first), message_marks(&second));
    let end_of_first_messages = find(&first, "</fork-directive>");
    assert!(common_prefix(&first, &unmarked(&second)) > end_of_first_messages);
    assert_eq!(
        marked[4],
        [false, false, true, false],
        "the last placeholder"
    );
    assert_eq!(marked[6], [true], "the newest block");
    assert_eq!(marked.iter().flatten().filter(|m| **m).count(), 3);
}

#[test]
fn a_typed_child_reads_its_role_and_tools_in_the_directive() {
    let critique = super::super::builtin::definitions()
        .into_iter()
        .find(|d| d.name == super::super::builtin::CRITIQUE)
        .expect("critique");
    assert!(critique.inherits_context);
    let allowed = ["Glob", "Grep", "Read"].map(String::from);
    let text = typed_directive_text(&critique, &allowed, " Break this draft: 1. x ");
    insta::assert_snapshot!("critique_directive", text);
    let cases: [(&[&str], &str); 3] = [
        (
            &[],
            "placeholders: those calls are being handled elsewhere. Use no tools. Do not",
        ),
        (&["Read"], "Use only Read."),
        (&["Glob", "Read"], "Use only Glob and Read."),
    ];
    for (tools, want) in cases {
        let tools: Vec<String> = tools.iter().map(|t| (*t).to_owned()).collect();
        let text = typed_directive_text(&critique, &tools, "x");
        assert!(text.contains(want), "{tools:?}: {text}");
    }
}
