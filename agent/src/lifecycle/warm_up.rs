//! Cache warm-up for subagents that start together (pure decisions; `tasks` does the IO).
//!
//! Children that start at the same moment with the same request prefix cannot read each
//! other's prompt-cache entries: an entry is readable only once the request that writes it has
//! been answered, so every sibling would write the same prefix again. Before such a group
//! starts, the agent sends the first member's own first request once with `max_tokens: 1`
//! and starts the whole group when it returns: that request writes the shared prefix (and the
//! first member's whole prompt), and every member reads it.
//!
//! Why a warm-up request rather than staggering (starting the first child and the others
//! after its first reply): both write the prefix once, but staggering holds the siblings back
//! for the first child's whole first turn (its output generation, often many seconds), while
//! the warm-up costs one round trip for one output token. The warm-up also makes the first
//! member's own request a full cache read. Its price is one extra read of the prefix, which
//! [`worth_warming`] weighs against the writes it saves.
//!
//! The prefix warmed is the one the real requests hit: the agent sets the breakpoints on the
//! system prompt of every prefix it builds (a subagent's has two blocks, the notes all
//! subagents share and its type's own prompt; the main agent's one) and on the main agent's
//! last tool (and on a fork's last placeholder), and the gateway keeps breakpoints the agent
//! placed, so the shared part of the siblings' requests ends at a breakpoint the warm-up
//! request carries too.
//!
//! Subagents whose tools are the first tools the caller offers (the built-ins read with
//! Glob, Grep and Read) can also read those from the caller's cache: the caller's request
//! gets a breakpoint after them when it has one to spare (its first request has three), so
//! the warm-up writes only the subagents' system prompt. A lone fresh subagent of another type
//! with the same tools reads the tools and the shared notes from the entry the warm-up wrote,
//! and writes only its type's own prompt. A child that starts from a copy of the caller's
//! conversation (a fork, or the critic) reads the caller's last request whole and needs no
//! warm-up unless what its siblings add to it outweighs one.

use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::events::CacheControl;
use ultraplan_protocol::model::ModelRequest;

/// Anthropic's cache prices per input token, in hundredths of the base input price: writing
/// an entry costs 1.25×, reading one 0.1×.
const WRITE: usize = 125;
const READ: usize = 10;

/// How long a cache entry lives after it was last written or read (Anthropic's default).
pub(super) const CACHE_TTL_MS: u64 = 5 * 60 * 1000;

/// The prefix a group of children shares, as the decision sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shared {
    /// Children starting now with this prefix.
    pub members: usize,
    /// Estimated tokens of the shared prefix that no answered request has written yet.
    pub new_tokens: usize,
    /// Estimated tokens of the shared prefix already in the cache.
    pub cached_tokens: usize,
}

/// Whether a warm-up request saves more than it costs.
///
/// Without it, each of the `n` members writes the new part and reads the cached part. With
/// it, the warm-up writes the new part and reads the cached part once, and then each member
/// reads the whole prefix. The saving is `new·(WRITE·(n−1) − READ·n) − READ·cached`: always
/// negative for a single child (nothing changes when only one subagent starts), and negative
/// for forks whose prefix the caller's last request already wrote, unless the part they add
/// is large enough.
pub(super) fn worth_warming(shared: Shared) -> bool {
    let n = shared.members;
    if n < 2 {
        return false;
    }
    let saved = shared
        .new_tokens
        .saturating_mul(WRITE.saturating_mul(n - 1));
    let spent = shared
        .new_tokens
        .saturating_mul(READ.saturating_mul(n))
        .saturating_add(shared.cached_tokens.saturating_mul(READ));
    saved > spent
}

/// Splits children that start together into groups with equal keys (their request
/// prefixes): indexes into `keys`, each group in order, the groups in order of first member.
pub(super) fn groups<K: PartialEq>(keys: &[K]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        match out.iter_mut().find(|g| keys[g[0]] == *key) {
            Some(group) => group.push(i),
            None => out.push(vec![i]),
        }
    }
    out
}

/// Whether an entry last written or read at `at_ms` is still alive at `now_ms`.
pub(super) fn alive(at_ms: u64, now_ms: u64) -> bool {
    now_ms.saturating_sub(at_ms) < CACHE_TTL_MS
}

/// Most cache breakpoints one Anthropic request may carry (the gateway drops the earliest
/// beyond it).
pub(super) const MAX_BREAKPOINTS: usize = 4;

/// Where in the caller's `offered` tools a breakpoint serves its subagents best
/// (`subagents`: each type's allowed tools, in the caller's order): after the first `k`
/// tools, where `k` is the whole tool list of some type and shorter than `offered` (at the
/// end the caller's own last-tool breakpoint serves). A type whose tools start with the
/// caller's first `k` reads those `k` from the entry; the choice maximises tools read, `k`
/// times the types served, the longer on a tie.
pub(super) fn shared_tools(offered: &[String], subagents: &[Vec<String>]) -> Option<usize> {
    let lists: Vec<usize> = subagents
        .iter()
        .filter(|s| !s.is_empty() && offered.starts_with(s))
        .map(Vec::len)
        .collect();
    let candidates = lists.iter().copied().filter(|&k| k < offered.len());
    candidates.max_by_key(|&k| (k * lists.iter().filter(|&&n| n >= k).count(), k))
}

/// Puts a breakpoint on the tool at `index` when the request has one to spare; returns
/// whether it did.
pub(super) fn mark_tool(request: &mut ModelRequest, index: usize) -> bool {
    if breakpoints(request) >= MAX_BREAKPOINTS {
        return false;
    }
    match request.tools.get_mut(index) {
        Some(tool) if tool.cache_control.is_none() => {
            tool.cache_control = Some(CacheControl::ephemeral());
            true
        }
        _ => false,
    }
}

/// The breakpoints a request carries.
fn breakpoints(request: &ModelRequest) -> usize {
    let tools = request.tools.iter().filter(|t| t.cache_control.is_some());
    let system = request.system.iter().filter(|b| b.cache_control.is_some());
    let blocks = request.messages.iter().flat_map(|m| &m.content);
    let blocks = blocks.filter(|b| match b {
        ContentBlock::Text { cache_control, .. }
        | ContentBlock::ToolUse { cache_control, .. }
        | ContentBlock::ToolResult { cache_control, .. } => cache_control.is_some(),
        ContentBlock::Thinking { .. } => false,
    });
    tools.count() + system.count() + blocks.count()
}
