//! Keyword detection: does a prompt ask for an ultraplan, and what is the prompt to send?
//!
//! The rules reproduce the reference behaviour:
//! - **Slash commands** never trigger: text that begins with `/` is a command.
//! - **Whole word**: `ultraplan`, ASCII case-insensitively, as a whole word. Letters (Unicode),
//!   digits and `_` are word characters, so `ultraplanning`, `ultraplan2`, `ultraplan_mode`
//!   and `superultraplan` do not trigger.
//! - **Quoted or bracketed spans** hide occurrences inside them (rules in [`spans`]).
//! - **Paths and flags**: an occurrence preceded or followed by `/`, `\` or `-` is ignored.
//! - **Questions**: an occurrence directly followed by `?` is ignored (`ultraplan ?` triggers).
//! - **File names**: an occurrence followed by `.` and a word character is ignored
//!   (`ultraplan.md`); a sentence-ending `ultraplan.` triggers.
//! - **Rewrite**: only the first trigger is rewritten, by dropping its first five letters and
//!   keeping the case of the rest (`Ultraplan` → `plan`, `ULTRAPLAN` → `PLAN`); a prompt that
//!   holds nothing but the keyword is rewritten to the empty string.
//! - **Pasted text** is not what the user typed: [`detect_with_pasted`] masks the pasted byte
//!   ranges (each pasted character behaves like a space) before detection.
//!
//! Offsets are byte offsets into the original text; they always fall on char boundaries because
//! a trigger is ASCII.

mod spans;

use std::ops::Range;

use serde::ser::{Serialize, SerializeStruct, Serializer};

/// The keyword, lower case.
pub const KEYWORD: &str = "ultraplan";

/// How many leading letters the rewrite drops (`ultra`).
const DROPPED_PREFIX: usize = 5;

/// One occurrence of the keyword that counts as a request, as byte offsets `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Trigger {
    pub start: usize,
    pub end: usize,
}

/// The result of detection.
///
/// `rewritten` is `None` when nothing triggers. Serialized, the object is always
/// `{"triggers":[{"start":..,"end":..}],"rewritten":".."}`, and `rewritten` is then the text
/// unchanged when nothing triggers, so JSON consumers always get a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeywordMatch {
    /// Every trigger, in text order.
    pub triggers: Vec<Trigger>,
    /// The prompt with the first trigger rewritten, or `None` when nothing triggers.
    pub rewritten: Option<String>,
    /// The text detection ran on, for serialization.
    original: String,
}

impl KeywordMatch {
    /// True when at least one occurrence triggers.
    pub fn triggered(&self) -> bool {
        !self.triggers.is_empty()
    }

    /// The text to send: the rewrite when triggered, else the original text.
    pub fn prompt(&self) -> &str {
        self.rewritten.as_deref().unwrap_or(&self.original)
    }

    /// True when the prompt is triggered but says nothing besides the keyword: with the first
    /// trigger removed only whitespace remains (`ultraplan`, `  ULTRAPLAN `), so the rewrite is
    /// empty. The caller shows usage instead of launching.
    pub fn prompt_is_empty(&self) -> bool {
        self.rewritten.as_deref() == Some("")
    }
}

impl Serialize for KeywordMatch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("KeywordMatch", 2)?;
        out.serialize_field("triggers", &self.triggers)?;
        out.serialize_field("rewritten", self.prompt())?;
        out.end()
    }
}

/// Detects the keyword in text the user typed in full.
pub fn detect(text: &str) -> KeywordMatch {
    detect_with_pasted(text, &[])
}

/// Detects the keyword, treating the bytes in `pasted` as pasted content that the user did not
/// type. Ranges may be unsorted, overlapping, out of bounds or off char boundaries: every char
/// that overlaps a range is masked.
pub fn detect_with_pasted(text: &str, pasted: &[Range<usize>]) -> KeywordMatch {
    let masked = mask(text, pasted);
    let triggers = find_triggers(&masked);
    let rewritten = triggers.first().map(|t| rewrite(text, *t));
    KeywordMatch {
        triggers,
        rewritten,
        original: text.to_owned(),
    }
}

/// Letters, digits and `_`.
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The text with every pasted char replaced by spaces of the same byte length, so byte offsets
/// are unchanged.
fn mask(text: &str, pasted: &[Range<usize>]) -> String {
    let ranges: Vec<&Range<usize>> = pasted.iter().filter(|r| r.start < r.end).collect();
    if ranges.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for (at, c) in text.char_indices() {
        let end = at + c.len_utf8();
        if ranges.iter().any(|r| r.start < end && at < r.end) {
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    out
}

fn find_triggers(text: &str) -> Vec<Trigger> {
    if text.starts_with('/') {
        return Vec::new();
    }
    let spans = spans::quoted_spans(text);
    occurrences(text)
        .filter(|t| counts(text, *t) && !inside_any(&spans, *t))
        .collect()
}

/// Every ASCII case-insensitive occurrence of the keyword (they cannot overlap).
fn occurrences(text: &str) -> impl Iterator<Item = Trigger> + '_ {
    text.as_bytes()
        .windows(KEYWORD.len())
        .enumerate()
        .filter(|(_, w)| w.eq_ignore_ascii_case(KEYWORD.as_bytes()))
        .map(|(start, _)| Trigger {
            start,
            end: start + KEYWORD.len(),
        })
}

/// The neighbourhood rules: whole word, paths and flags, questions, file names.
fn counts(text: &str, t: Trigger) -> bool {
    let before = text[..t.start].chars().next_back();
    let mut after = text[t.end..].chars();
    let next = after.next();
    let next2 = after.next();
    let is_path_char = |c: char| matches!(c, '/' | '\\' | '-');
    if before.is_some_and(|c| is_word_char(c) || is_path_char(c)) {
        return false;
    }
    match next {
        None => true,
        Some(c) if is_word_char(c) || is_path_char(c) || c == '?' => false,
        Some('.') => !next2.is_some_and(is_word_char),
        Some(_) => true,
    }
}

/// Spans are sorted and disjoint: only the last one opening before the trigger can hold it.
fn inside_any(spans: &[Range<usize>], t: Trigger) -> bool {
    let after = spans.partition_point(|s| s.start < t.start);
    after > 0 && t.end <= spans[after - 1].end
}

/// The prompt to send for a trigger at `t`: the keyword loses its first five letters, and a
/// prompt that holds nothing but the keyword becomes empty (the caller then shows usage).
fn rewrite(text: &str, t: Trigger) -> String {
    if text[..t.start].trim().is_empty() && text[t.end..].trim().is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..t.start]);
    out.push_str(&text[t.start + DROPPED_PREFIX..]);
    out
}

#[cfg(test)]
mod tests;
