//! Anthropic prompt-cache breakpoints: `cache_control: ephemeral` on the last tool definition,
//! the last system block and the last content block of the latest message, keeping whatever
//! the agent placed itself, and never more than the four breakpoints the API allows.

use ultraplan_protocol::events::{CacheControl, ContentBlock};
use ultraplan_protocol::model::ModelRequest;

/// Most breakpoints one Anthropic request may carry.
pub const MAX_CACHE_BREAKPOINTS: usize = 4;

/// A place that can hold a breakpoint, in the order the API reads a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Tool(usize),
    System(usize),
    Block(usize, usize),
}

/// The request with breakpoints placed (pure; the same input gives the same bytes).
pub fn apply_cache_breakpoints(mut request: ModelRequest) -> ModelRequest {
    let mut used = all_slots(&request)
        .into_iter()
        .filter(|&s| is_set(&request, s))
        .count();
    for slot in targets(&request) {
        if used >= MAX_CACHE_BREAKPOINTS {
            break;
        }
        if let Some(cache) = slot_mut(&mut request, slot)
            && cache.is_none()
        {
            *cache = Some(CacheControl::ephemeral());
            used += 1;
        }
    }
    trim_to_limit(&mut request);
    request
}

/// The three places the gateway marks, when they exist, most valuable first: the latest
/// message (caches the whole conversation), the system prompt (shared across sessions), tools.
fn targets(request: &ModelRequest) -> Vec<Slot> {
    let last_tool = request.tools.len().checked_sub(1).map(Slot::Tool);
    let last_system = request
        .system
        .iter()
        .rposition(|b| !b.text.is_empty())
        .map(Slot::System);
    let last_block = request.messages.len().checked_sub(1).and_then(|m| {
        let blocks = &request.messages[m].content;
        blocks
            .iter()
            .rposition(cacheable)
            .map(|b| Slot::Block(m, b))
    });
    [last_block, last_system, last_tool]
        .into_iter()
        .flatten()
        .collect()
}

/// Blocks the API accepts a breakpoint on: not thinking, not empty text.
fn cacheable(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Text { text, .. } => !text.is_empty(),
        ContentBlock::ToolUse { .. } | ContentBlock::ToolResult { .. } => true,
        ContentBlock::Thinking { .. } => false,
    }
}

fn all_slots(request: &ModelRequest) -> Vec<Slot> {
    let tools = (0..request.tools.len()).map(Slot::Tool);
    let system = (0..request.system.len()).map(Slot::System);
    let blocks = request
        .messages
        .iter()
        .enumerate()
        .flat_map(|(m, msg)| (0..msg.content.len()).map(move |b| Slot::Block(m, b)));
    tools.chain(system).chain(blocks).collect()
}

fn is_set(request: &ModelRequest, slot: Slot) -> bool {
    match slot {
        Slot::Tool(i) => request.tools[i].cache_control.is_some(),
        Slot::System(i) => request.system[i].cache_control.is_some(),
        Slot::Block(m, b) => match &request.messages[m].content[b] {
            ContentBlock::Text { cache_control, .. }
            | ContentBlock::ToolUse { cache_control, .. }
            | ContentBlock::ToolResult { cache_control, .. } => cache_control.is_some(),
            ContentBlock::Thinking { .. } => false,
        },
    }
}

fn slot_mut(request: &mut ModelRequest, slot: Slot) -> Option<&mut Option<CacheControl>> {
    match slot {
        Slot::Tool(i) => Some(&mut request.tools.get_mut(i)?.cache_control),
        Slot::System(i) => Some(&mut request.system.get_mut(i)?.cache_control),
        Slot::Block(m, b) => match request.messages.get_mut(m)?.content.get_mut(b)? {
            ContentBlock::Text { cache_control, .. }
            | ContentBlock::ToolUse { cache_control, .. }
            | ContentBlock::ToolResult { cache_control, .. } => Some(cache_control),
            ContentBlock::Thinking { .. } => None,
        },
    }
}

/// When the agent itself placed too many, drop the earliest so the API accepts the request.
fn trim_to_limit(request: &mut ModelRequest) {
    let set: Vec<Slot> = all_slots(request)
        .into_iter()
        .filter(|&s| is_set(request, s))
        .collect();
    let excess = set.len().saturating_sub(MAX_CACHE_BREAKPOINTS);
    for slot in set.into_iter().take(excess) {
        if let Some(cache) = slot_mut(request, slot) {
            *cache = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use ultraplan_protocol::events::Role;
    use ultraplan_protocol::model::{Message, SystemBlock, ToolDefinition};

    use super::*;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
            cache_control: None,
        }
    }

    fn msg(role: Role, content: Vec<ContentBlock>) -> Message {
        Message { role, content }
    }

    fn request(tools: usize, system: usize, messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: None,
            max_tokens: 100,
            system: (0..system)
                .map(|i| SystemBlock::text(format!("s{i}")))
                .collect(),
            messages,
            tools: (0..tools).map(|i| tool(&format!("t{i}"))).collect(),
            temperature: None,
        }
    }

    fn marked(request: &ModelRequest) -> Vec<Slot> {
        all_slots(request)
            .into_iter()
            .filter(|&s| is_set(request, s))
            .collect()
    }

    fn with_cache(mut block: ContentBlock) -> ContentBlock {
        if let ContentBlock::Text { cache_control, .. } = &mut block {
            *cache_control = Some(CacheControl::ephemeral());
        }
        block
    }

    #[test]
    fn places_breakpoints_on_the_right_slots() {
        let text = ContentBlock::text;
        let thinking = ContentBlock::Thinking {
            thinking: "t".into(),
            signature: None,
        };
        let user = |blocks| msg(Role::User, blocks);
        let cases: Vec<(&str, ModelRequest, Vec<Slot>)> = vec![
            ("empty", request(0, 0, vec![]), vec![]),
            (
                "all three",
                request(
                    3,
                    2,
                    vec![user(vec![text("a")]), user(vec![text("b"), text("c")])],
                ),
                vec![Slot::Tool(2), Slot::System(1), Slot::Block(1, 1)],
            ),
            (
                "no tools",
                request(0, 1, vec![user(vec![text("a")])]),
                vec![Slot::System(0), Slot::Block(0, 0)],
            ),
            (
                "skips thinking and empty text",
                request(
                    0,
                    0,
                    vec![msg(
                        Role::Assistant,
                        vec![text("x"), thinking.clone(), text("")],
                    )],
                ),
                vec![Slot::Block(0, 0)],
            ),
            (
                "only thinking",
                request(0, 0, vec![msg(Role::Assistant, vec![thinking])]),
                vec![],
            ),
            (
                "keeps the agent's own and stays within four",
                request(
                    1,
                    1,
                    vec![
                        user(vec![with_cache(text("a"))]),
                        user(vec![with_cache(text("b")), text("c")]),
                    ],
                ),
                vec![
                    Slot::System(0),
                    Slot::Block(0, 0),
                    Slot::Block(1, 0),
                    Slot::Block(1, 1),
                ],
            ),
            (
                "trims the earliest when the agent placed too many",
                request(
                    0,
                    0,
                    (0..6)
                        .map(|i| user(vec![with_cache(ContentBlock::text(i.to_string()))]))
                        .collect(),
                ),
                (2..6).map(|m| Slot::Block(m, 0)).collect(),
            ),
        ];
        for (name, input, want) in cases {
            let out = apply_cache_breakpoints(input);
            assert_eq!(marked(&out), want, "{name}");
            assert!(marked(&out).len() <= MAX_CACHE_BREAKPOINTS, "{name}");
        }
    }

    #[test]
    fn is_idempotent_and_serialises_as_ephemeral() {
        let req = request(1, 1, vec![msg(Role::User, vec![ContentBlock::text("q")])]);
        let once = apply_cache_breakpoints(req);
        let twice = apply_cache_breakpoints(once.clone());
        assert_eq!(once, twice);
        let body = serde_json::to_value(&once).unwrap();
        assert_eq!(
            body["tools"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            body["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            body["messages"][0]["content"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }
}
