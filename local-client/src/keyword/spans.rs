//! Quoted and bracketed spans: the regions of a prompt whose `ultraplan` occurrences are
//! quotations or markup rather than a request.
//!
//! Rules (see the parent module for the full list):
//! - pairs are `` `…` ``, `"…"`, `'…'`, `(…)`, `[…]`, `{…}` and `<…>`;
//! - `<` opens only when followed by an ASCII letter or `/` (so `n < 5` is a comparison);
//! - `'` opens only after a non-word character or at the start, and closes only before a
//!   non-word character or at the end (so apostrophes in `let's` and `it's` do not count);
//! - one span is open at a time and inside it only its own closing character counts;
//! - a new `[` inside an open `[` span restarts the span at the new `[`;
//! - an opener that never finds its closer is an ordinary character: it suppresses nothing and
//!   scanning resumes right after it (later spans still count).
//!
//! The scan is linear: once a search for a given closer fails, every later search for the same
//! closer would fail too, so the failure is remembered.

use std::ops::Range;

use super::is_word_char;

/// The openers, in a fixed order used to index the "no closer left" memo.
const OPENERS: [char; 7] = ['`', '"', '\'', '(', '[', '{', '<'];

/// Byte ranges of every closed span, opener and closer included, in text order.
pub(super) fn quoted_spans(text: &str) -> Vec<Range<usize>> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut spans = Vec::new();
    let mut exhausted = [false; OPENERS.len()];
    let mut i = 0;
    while i < chars.len() {
        let Some(kind) = opener_kind(&chars, i) else {
            i += 1;
            continue;
        };
        if exhausted[kind] {
            i += 1;
            continue;
        }
        match find_close(&chars, i, kind) {
            Close::At(j) => {
                let end = chars[j].0 + chars[j].1.len_utf8();
                spans.push(chars[i].0..end);
                i = j + 1;
            }
            Close::Restart(j) => i = j,
            Close::Never => {
                exhausted[kind] = true;
                i += 1;
            }
        }
    }
    spans
}

/// Where the search for a closer ended.
enum Close {
    /// The closer is at this char index.
    At(usize),
    /// A `[` inside a `[` span: the span restarts at this char index.
    Restart(usize),
    /// No closer before the end of the text.
    Never,
}

/// The opener index in [`OPENERS`] when the char at `i` opens a span.
fn opener_kind(chars: &[(usize, char)], i: usize) -> Option<usize> {
    let c = chars[i].1;
    let kind = OPENERS.iter().position(|&o| o == c)?;
    let allowed = match c {
        '\'' => i == 0 || !is_word_char(chars[i - 1].1),
        '<' => chars
            .get(i + 1)
            .is_some_and(|&(_, n)| n.is_ascii_alphabetic() || n == '/'),
        _ => true,
    };
    allowed.then_some(kind)
}

fn closer_of(kind: usize) -> char {
    match OPENERS[kind] {
        '(' => ')',
        '[' => ']',
        '{' => '}',
        '<' => '>',
        same => same,
    }
}

fn find_close(chars: &[(usize, char)], open: usize, kind: usize) -> Close {
    let close = closer_of(kind);
    let restarts = OPENERS[kind] == '[';
    for j in open + 1..chars.len() {
        let c = chars[j].1;
        if c == close && (close != '\'' || closes_quote(chars, j)) {
            return Close::At(j);
        }
        if restarts && c == '[' {
            return Close::Restart(j);
        }
    }
    Close::Never
}

/// A `'` closes only before a non-word character or at the end of the text.
fn closes_quote(chars: &[(usize, char)], j: usize) -> bool {
    chars.get(j + 1).is_none_or(|&(_, n)| !is_word_char(n))
}

#[cfg(test)]
mod tests {
    use super::quoted_spans;

    fn spans(text: &str) -> Vec<&str> {
        quoted_spans(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn pairs_are_found_in_order() {
        assert_eq!(
            spans("a `b` \"c\" 'd' (e) [f] {g} <h>"),
            ["`b`", "\"c\"", "'d'", "(e)", "[f]", "{g}", "<h>"]
        );
    }

    #[test]
    fn only_the_own_closer_counts_inside_a_span() {
        assert_eq!(spans("(a \"b) c\""), ["(a \"b)"]);
    }

    #[test]
    fn bracket_restarts_at_a_nested_bracket() {
        assert_eq!(spans("[a [b] c"), ["[b]"]);
    }

    #[test]
    fn unclosed_opener_is_plain_text() {
        assert_eq!(spans("\"a (b) c"), ["(b)"]);
        assert!(spans("(((((").is_empty());
    }

    #[test]
    fn angle_needs_a_letter_or_slash() {
        assert!(spans("n < 5 and n > 3").is_empty());
        assert_eq!(spans("<b>x</b>"), ["<b>", "</b>"]);
    }

    #[test]
    fn apostrophes_inside_words_do_not_count() {
        assert!(spans("let's go, it's fine").is_empty());
        assert_eq!(spans("say 'hi' now"), ["'hi'"]);
        assert_eq!(spans("'a'"), ["'a'"]);
    }

    #[test]
    fn multibyte_spans_end_on_char_boundaries() {
        assert_eq!(spans("«x» “y” (é)"), ["(é)"]);
    }
}
