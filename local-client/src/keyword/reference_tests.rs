//! Property test: the detector against a slow, obviously-correct reference written from the
//! module docs (keyword.rs and spans.rs) literally: every occurrence is scanned, the span scan
//! restarts its closer search from scratch each time (no "no closer left" memo), and nothing is
//! shared with the detector but `is_word_char`'s definition, restated here.
//!
//! `PROPTEST_CASES=N` runs more cases (see fuzz/README.md).

use std::ops::Range;

use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::keyword::{KEYWORD, Trigger, detect_with_pasted};

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Letters (Unicode), digits and `_`.
fn word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The rule list of spans.rs, one rule a line.
fn ref_spans(chars: &[(usize, char)]) -> Vec<Range<usize>> {
    let end_of = |j: usize| chars[j].0 + chars[j].1.len_utf8();
    let mut spans = Vec::new();
    let mut i = 0;
    'scan: while i < chars.len() {
        let c = chars[i].1;
        let close = match c {
            '`' | '"' => c,
            // `'` opens only after a non-word character or at the start.
            '\'' if i == 0 || !word(chars[i - 1].1) => '\'',
            '(' => ')',
            '[' => ']',
            '{' => '}',
            // `<` opens only when followed by an ASCII letter or `/`.
            '<' if chars
                .get(i + 1)
                .is_some_and(|&(_, n)| n.is_ascii_alphabetic() || n == '/') =>
            {
                '>'
            }
            _ => {
                i += 1;
                continue;
            }
        };
        // Inside a span only its own closer counts, and a `[` restarts an open `[` span.
        for j in i + 1..chars.len() {
            let d = chars[j].1;
            // `'` closes only before a non-word character or at the end.
            let closes =
                d == close && (close != '\'' || chars.get(j + 1).is_none_or(|&(_, n)| !word(n)));
            if closes {
                spans.push(chars[i].0..end_of(j));
                i = j + 1;
                continue 'scan;
            }
            if c == '[' && d == '[' {
                i = j;
                continue 'scan;
            }
        }
        // Never closed: an ordinary character; scanning resumes right after it.
        i += 1;
    }
    spans
}

/// The detector's documented rules, applied to every occurrence.
fn reference(text: &str, pasted: &[Range<usize>]) -> (Vec<Trigger>, Option<String>) {
    // Pasted chars behave like spaces (of the same byte length).
    let masked: String = text
        .char_indices()
        .flat_map(|(at, c)| {
            let end = at + c.len_utf8();
            let hit = pasted
                .iter()
                .any(|r| r.start < r.end && r.start < end && at < r.end);
            let n = if hit { c.len_utf8() } else { 1 };
            std::iter::repeat_n(if hit { ' ' } else { c }, n)
        })
        .collect();
    let chars: Vec<(usize, char)> = masked.char_indices().collect();
    let spans = ref_spans(&chars);
    let kw: Vec<char> = KEYWORD.chars().collect();
    let mut triggers = Vec::new();
    if !masked.starts_with('/') {
        for k in 0..chars.len() {
            let matches = (0..kw.len()).all(|n| {
                chars
                    .get(k + n)
                    .is_some_and(|&(_, c)| c.to_ascii_lowercase() == kw[n])
            });
            if !matches {
                continue;
            }
            let start = chars[k].0;
            let end = start + KEYWORD.len();
            let before = k.checked_sub(1).map(|p| chars[p].1);
            let next = chars.get(k + kw.len()).map(|&(_, c)| c);
            let next2 = chars.get(k + kw.len() + 1).map(|&(_, c)| c);
            let path = |c: char| c == '/' || c == '\\' || c == '-';
            let excluded = before.is_some_and(|c| word(c) || path(c))
                || next.is_some_and(|c| word(c) || path(c) || c == '?')
                || (next == Some('.') && next2.is_some_and(word))
                || spans.iter().any(|s| s.start <= start && end <= s.end);
            if !excluded {
                triggers.push(Trigger { start, end });
            }
        }
    }
    let rewritten = triggers.first().map(|t| {
        if text[..t.start].trim().is_empty() && text[t.end..].trim().is_empty() {
            String::new()
        } else {
            format!("{}{}", &text[..t.start], &text[t.start + 5..])
        }
    });
    (triggers, rewritten)
}

/// Fragments rich in what the rules look at.
const FRAGMENTS: &[&str] = &[
    "ultraplan",
    "ULTRAPLAN",
    "Ultraplan",
    "ultra",
    "plan",
    "uLtRaPlAn",
    " ",
    " ",
    "\n",
    "\r\n",
    "\t",
    "`",
    "\"",
    "'",
    "'",
    "(",
    ")",
    "[",
    "[",
    "]",
    "{",
    "}",
    "<",
    "<a",
    "</",
    ">",
    "/",
    "\\",
    "-",
    "?",
    ".",
    "._",
    "_",
    "a",
    "s",
    "9",
    "é",
    "日",
    "Ω",
    "🚀",
    "\u{301}",
    "’",
    "«",
];

proptest! {
    #![proptest_config(config(4096))]

    #[test]
    fn detector_agrees_with_the_reference(
        parts in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40),
        pasted in prop::collection::vec((0usize..120, 0usize..120), 0..2),
    ) {
        let text: String = parts.concat();
        let ranges: Vec<Range<usize>> = pasted.into_iter().map(|(a, b)| a..b).collect();
        let got = detect_with_pasted(&text, &ranges);
        let (triggers, rewritten) = reference(&text, &ranges);
        prop_assert_eq!(&got.triggers, &triggers, "triggers of {:?} pasted {:?}", text, ranges);
        prop_assert_eq!(got.rewritten, rewritten, "rewrite of {:?}", text);
    }

    #[test]
    fn spans_agree_with_the_reference(
        parts in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..60),
    ) {
        let text: String = parts.concat();
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        prop_assert_eq!(crate::keyword::spans::quoted_spans(&text), ref_spans(&chars), "{:?}", text);
    }
}
