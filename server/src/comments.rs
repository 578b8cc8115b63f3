//! Inline comments on plan passages, as pure functions (docs/ARCHITECTURE.md §3.2): what a
//! new comment must satisfy, the headings above its passage, and the text the agent reads
//! when a rejection carries comments.

use ultraplan_protocol::comments::{
    ADDRESSED_REQUEST, AddressedBy, CommentState, MAX_COMMENT_BODY_CHARS, MAX_COMMENT_QUOTE_CHARS,
};

/// Why a new comment was refused: a stable code and a reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn refuse(code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

/// Check a new comment on `plan`; the heading path of its passage when it is acceptable.
pub fn check(plan: &str, quote: &str, body: &str) -> Result<Vec<String>, Refusal> {
    if body.trim().is_empty() {
        return Err(refuse("comment_body_required", "a comment needs a body"));
    }
    if body.chars().count() > MAX_COMMENT_BODY_CHARS {
        return Err(refuse(
            "comment_too_long",
            format!("a comment body is at most {MAX_COMMENT_BODY_CHARS} characters"),
        ));
    }
    if quote.trim().is_empty() {
        return Err(refuse(
            "quote_required",
            "a comment quotes the passage it is about",
        ));
    }
    if quote.chars().count() > MAX_COMMENT_QUOTE_CHARS {
        return Err(refuse(
            "quote_too_long",
            format!("a quoted passage is at most {MAX_COMMENT_QUOTE_CHARS} characters"),
        ));
    }
    let Some(at) = plan.find(quote) else {
        return Err(refuse(
            "quote_not_in_plan",
            "the quoted passage does not occur verbatim in the plan",
        ));
    };
    Ok(heading_path(plan, at))
}

/// The markdown (ATX) headings enclosing byte offset `at` of `text`, outermost first. Lines
/// inside fenced code blocks are not headings.
pub fn heading_path(text: &str, at: usize) -> Vec<String> {
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut fence: Option<&str> = None;
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if start > at {
            break;
        }
        start += line.len();
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if let Some(f) = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f)) {
            fence = Some(f);
            continue;
        }
        if let Some((level, title)) = atx_heading(line) {
            path.retain(|(l, _)| *l < level);
            path.push((level, title));
        }
    }
    path.into_iter().map(|(_, title)| title).collect()
}

/// `(level, title)` of an ATX heading line: up to three spaces, 1–6 `#`, then a space or
/// the end of the line; closing `#`s are dropped.
fn atx_heading(line: &str) -> Option<(usize, String)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &rest[level..];
    if !(after.is_empty() || after.starts_with([' ', '\t', '\n', '\r'])) {
        return None;
    }
    let title = after.trim().trim_end_matches('#').trim_end();
    Some((level, title.to_owned()))
}

/// Markdown punctuation a rendered page does not show (emphasis, code spans, headings, quotes,
/// link brackets), ignored when a selection on the page is matched against the plan's text.
fn markup(c: char) -> bool {
    matches!(c, '*' | '_' | '`' | '~' | '#' | '>' | '[' | ']')
}

/// The passage of `plan` a selection on the rendered page stands for: `selected` itself when it
/// occurs verbatim, else the shortest span of the plan's text that reads the same once markup
/// characters are dropped and whitespace runs count as one space (a selection over
/// `` `src/a.rs` **now** `` reads `src/a.rs now`). `None` when nothing reads the same.
pub fn resolve_quote(plan: &str, selected: &str) -> Option<String> {
    if selected.trim().is_empty() {
        return None;
    }
    if plan.contains(selected) {
        return Some(selected.to_owned());
    }
    let wanted: Vec<char> = project(selected).into_iter().map(|(_, c)| c).collect();
    let wanted = trim_spaces(&wanted);
    if wanted.is_empty() {
        return None;
    }
    let text = project(plan);
    let at = text
        .windows(wanted.len())
        .position(|w| w.iter().map(|(_, c)| *c).eq(wanted.iter().copied()))?;
    let (start, _) = text[at];
    let (last, c) = text[at + wanted.len() - 1];
    plan.get(start..last + c.len_utf8()).map(str::to_owned)
}

/// The characters of `text` a reader sees, with their byte offsets: markup dropped, each run
/// of whitespace one space (at the offset of its first character).
fn project(text: &str) -> Vec<(usize, char)> {
    let mut out: Vec<(usize, char)> = Vec::new();
    for (i, c) in text.char_indices() {
        if markup(c) {
            continue;
        }
        if c.is_whitespace() {
            if out.last().is_none_or(|(_, p)| *p != ' ') {
                out.push((i, ' '));
            }
            continue;
        }
        out.push((i, c));
    }
    out
}

/// What a passage reads on the rendered page: markup dropped, whitespace runs as one space.
pub fn plain_text(quote: &str) -> String {
    let chars: Vec<char> = project(quote).into_iter().map(|(_, c)| c).collect();
    trim_spaces(&chars).iter().collect()
}

fn trim_spaces(chars: &[char]) -> &[char] {
    let start = chars.iter().position(|c| *c != ' ').unwrap_or(chars.len());
    let end = chars
        .iter()
        .rposition(|c| *c != ' ')
        .map_or(start, |e| e + 1);
    &chars[start..end]
}

/// One comment as the agent reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentText<'a> {
    /// The comment's id: the agent names it back in `addressed_comment_ids`.
    pub id: &'a str,
    pub quote: &'a str,
    pub heading_path: &'a [String],
    pub body: &'a str,
}

/// The rejection text with its comments: the feedback as the rejection contract has it,
/// then a numbered list of the comments, each with its id, its passage (on one line) and
/// headings, then [`ADDRESSED_REQUEST`].
pub fn with_comments(feedback_text: &str, comments: &[CommentText<'_>]) -> String {
    if comments.is_empty() {
        return feedback_text.to_owned();
    }
    let mut out = String::new();
    if !feedback_text.trim().is_empty() {
        out.push_str(feedback_text.trim_end());
        out.push_str("\n\n");
    }
    out.push_str("Comments on the plan:");
    for (n, c) in comments.iter().enumerate() {
        let quote = c.quote.split_whitespace().collect::<Vec<_>>().join(" ");
        out.push_str(&format!("\n{}. [{}] On \"{quote}\"", n + 1, c.id));
        if !c.heading_path.is_empty() {
            out.push_str(&format!(" (under {})", c.heading_path.join(" › ")));
        }
        out.push(':');
        for line in c.body.trim().lines().map(str::trim_end) {
            out.push('\n');
            if !line.is_empty() {
                out.push_str("   ");
                out.push_str(line);
            }
        }
    }
    out.push_str("\n\n");
    out.push_str(ADDRESSED_REQUEST);
    out
}

/// What the next revision's agent said about the comments of the revision before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// No newer revision exists yet.
    Current,
    /// A newer revision exists; its call named these ids in `addressed_comment_ids`
    /// (`None`: it named none at all).
    Revised(Option<&'a [String]>),
}

/// The state of a comment on a revision the reviewer has not carried it over from
/// (`reopened`), given what the next revision said: addressed when the agent named it,
/// open when the agent named others but not it (an id it named that is no comment of that
/// revision simply matches nothing), and addressed by the revision alone when the agent
/// named none.
pub fn comment_state(
    id: &str,
    reopened: bool,
    verdict: Verdict<'_>,
) -> (CommentState, Option<AddressedBy>) {
    match (reopened, verdict) {
        (true, _) => (CommentState::Reopened, None),
        (false, Verdict::Current) => (CommentState::Open, None),
        (false, Verdict::Revised(None)) => (CommentState::Addressed, Some(AddressedBy::Revision)),
        (false, Verdict::Revised(Some(named))) if named.iter().any(|n| n == id) => {
            (CommentState::Addressed, Some(AddressedBy::Agent))
        }
        (false, Verdict::Revised(Some(_))) => (CommentState::Open, None),
    }
}

#[cfg(test)]
#[path = "comments_tests.rs"]
mod tests;
