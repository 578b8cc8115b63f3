//! Evidence links: `path:line` and `path:start-end` citations in a rendered plan become links
//! to the code view of the session's bundle, marked by whether the agent read them.
//!
//! Everything here is pure: [`find`] scans text, [`paths_in_html`] lists what a rendered plan
//! cites, and [`link_html`] rewrites the sanitised HTML's text nodes (never attributes, never
//! inside an existing link) given the files that exist and what the agent read.

use std::collections::BTreeSet;

use super::reads::Reads;

/// One citation in a text: byte range of the whole `path:line[-end]`, the path and lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Citation {
    pub start: usize,
    pub end: usize,
    pub path: String,
    pub first: u32,
    pub last: u32,
}

/// Longest path a citation may name.
const MAX_PATH: usize = 512;

fn path_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'-' | b'+' | b'@')
}

/// Digits at `at`: the number and where they end.
fn number(bytes: &[u8], at: usize) -> Option<(u32, usize)> {
    let len = bytes[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if len == 0 || len > 9 {
        return None;
    }
    let text = std::str::from_utf8(&bytes[at..at + len]).ok()?;
    Some((text.parse().ok()?, at + len))
}

/// A path as cited, normalised: `./` prefixes dropped; `None` when it cannot name a file in a
/// bundle (empty, absolute, `..`, too long).
pub fn clean_path(raw: &str) -> Option<&str> {
    let mut path = raw;
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    let bad = path.is_empty()
        || path.len() > MAX_PATH
        || path.starts_with('/')
        || path.ends_with('/')
        || path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..");
    (!bad).then_some(path)
}

/// Every `path:line` and `path:start-end` in `text`, in order. A path must contain a `.` or
/// a `/` (so `note:1` or `localhost:8080` are not taken), and the line must be at least 1.
pub fn find(text: &str) -> Vec<Citation> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !path_char(bytes[i]) || (i > 0 && path_char(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i;
        while end < bytes.len() && path_char(bytes[end]) {
            end += 1;
        }
        // A trailing full stop ends the sentence, not the path.
        let raw = text[start..end].trim_end_matches('.');
        let colon = start + raw.len();
        match citation_at(text, start, colon) {
            Some(c) => {
                i = c.end;
                found.push(c);
            }
            None => i = end.max(start + 1),
        }
    }
    found
}

fn citation_at(text: &str, start: usize, colon: usize) -> Option<Citation> {
    let bytes = text.as_bytes();
    if bytes.get(colon) != Some(&b':') {
        return None;
    }
    let raw = &text[start..colon];
    if !raw.contains(['.', '/']) || raw.starts_with("//") {
        return None;
    }
    let path = clean_path(raw)?;
    let (first, mut end) = number(bytes, colon + 1)?;
    let mut last = first;
    if bytes.get(end) == Some(&b'-')
        && let Some((to, after)) = number(bytes, end + 1)
        && to >= first
    {
        last = to;
        end = after;
    }
    let glued = bytes
        .get(end)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_');
    (first >= 1 && !glued).then(|| Citation {
        start,
        end,
        path: path.to_owned(),
        first,
        last,
    })
}

/// A piece of sanitised HTML: a tag or a text node.
enum Piece<'a> {
    Tag(&'a str),
    Text(&'a str),
}

fn pieces(html: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = html;
    while !rest.is_empty() {
        if rest.starts_with('<')
            && let Some(close) = rest.find('>')
        {
            out.push(Piece::Tag(&rest[..=close]));
            rest = &rest[close + 1..];
            continue;
        }
        let next = rest[1..].find('<').map_or(rest.len(), |n| n + 1);
        out.push(Piece::Text(&rest[..next]));
        rest = &rest[next..];
    }
    out
}

/// The text nodes of `html` outside links.
fn linkable_text(html: &str) -> Vec<&str> {
    let mut depth = 0usize;
    let mut out = Vec::new();
    for piece in pieces(html) {
        match piece {
            Piece::Tag(tag) => depth = link_depth(tag, depth),
            Piece::Text(text) if depth == 0 => out.push(text),
            Piece::Text(_) => {}
        }
    }
    out
}

fn link_depth(tag: &str, depth: usize) -> usize {
    let lower = tag
        .get(..3)
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    if lower == "<a " || lower == "<a>" {
        depth + 1
    } else if tag.eq_ignore_ascii_case("</a>") {
        depth.saturating_sub(1)
    } else {
        depth
    }
}

/// The distinct paths a rendered plan cites outside its links.
pub fn paths_in_html(html: &str) -> BTreeSet<String> {
    linkable_text(html)
        .into_iter()
        .flat_map(find)
        .map(|c| c.path)
        .collect()
}

/// Where a citation links: the code view at its first line.
pub fn href(session_id: &str, c: &Citation) -> String {
    let range = if c.last > c.first {
        format!("&amp;end={}", c.last)
    } else {
        String::new()
    };
    format!(
        "/sessions/{}/code/{}?line={}{range}#L{}",
        escape_attr(session_id),
        c.path,
        c.first,
        c.first
    )
}

fn escape_attr(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The link for one citation, with its read or asserted mark.
fn anchor(session_id: &str, c: &Citation, text: &str, reads: &Reads) -> String {
    let (class, title) = if reads.covers(&c.path, c.first, c.last) {
        ("read", "the agent read this")
    } else {
        ("asserted", "the agent cited this without reading it here")
    };
    format!(
        "<a class=\"cite {class}\" href=\"{}\" title=\"{title}\">{text}</a>",
        href(session_id, c)
    )
}

fn link_text(text: &str, session_id: &str, exists: &dyn Fn(&str) -> bool, reads: &Reads) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for c in find(text).into_iter().filter(|c| exists(&c.path)) {
        out.push_str(&text[at..c.start]);
        out.push_str(&anchor(session_id, &c, &text[c.start..c.end], reads));
        at = c.end;
    }
    out.push_str(&text[at..]);
    out
}

/// `html` with each citation of an existing file turned into a link to the code view.
/// Text inside links and every tag (attributes included) are left as they are.
pub fn link_html(
    html: &str,
    session_id: &str,
    exists: &dyn Fn(&str) -> bool,
    reads: &Reads,
) -> String {
    let mut depth = 0usize;
    let mut out = String::with_capacity(html.len());
    for piece in pieces(html) {
        match piece {
            Piece::Tag(tag) => {
                depth = link_depth(tag, depth);
                out.push_str(tag);
            }
            Piece::Text(text) if depth == 0 => {
                out.push_str(&link_text(text, session_id, exists, reads));
            }
            Piece::Text(text) => out.push_str(text),
        }
    }
    out
}

#[cfg(test)]
#[path = "citations_tests.rs"]
mod tests;
