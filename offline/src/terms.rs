//! Salient terms: the words of a request worth searching the repository for.
//!
//! Identifiers (`snake_case`, `CamelCase`, `a::b`, `kebab-case`, `call()`) and paths
//! (`src/auth.rs`) are kept whole and come first, then plain words, lowercased, minus stop words
//! and generic request verbs, each in order of first appearance, without duplicates.

use std::collections::BTreeSet;

/// How many terms a request yields at most.
pub(super) const MAX_TERMS: usize = 6;

/// What a term is; decides its grep pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TermKind {
    /// A plain word, lowercased.
    Word,
    /// An identifier, kept as written.
    Identifier,
    /// A file path, kept as written.
    Path,
}

/// Prefix of a word's pattern: the word starts a word or follows an underscore, so that `rate`
/// finds `rate`, `Rates`, `max_rate` and `RateLimiter` but not `crate` or `generate`.
pub(super) const WORD_START: &str = r"(?:\b|_)";

/// A search term and the regular expression Grep looks for (case-insensitively).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Term {
    pub(super) text: String,
    pub(super) pattern: String,
    pub(super) kind: TermKind,
    /// The literal the pattern looks for, lowercased.
    pub(super) needle: String,
}

impl Term {
    fn new(text: String, kind: TermKind) -> Self {
        let literal = match kind {
            TermKind::Word => stem(&text),
            TermKind::Identifier => &text,
            TermKind::Path => file_stem(&text),
        };
        let needle = literal.to_lowercase();
        let pattern = match kind {
            TermKind::Word => format!("{WORD_START}{}", escape(literal)),
            _ => escape(literal),
        };
        Term {
            text,
            pattern,
            kind,
            needle,
        }
    }

    /// Whether `line` contains the term: what Grep `-i` with [`Term::pattern`] finds.
    pub(super) fn occurs_in(&self, line: &str) -> bool {
        if self.needle.is_empty() {
            return false;
        }
        let line = line.to_lowercase();
        line.match_indices(&self.needle).any(|(i, _)| {
            self.kind != TermKind::Word
                || line[..i]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !c.is_alphanumeric())
        })
    }
}

/// The salient terms of `text`, at most `max`: identifiers and paths first, then words, each
/// in order of appearance. A word is dropped when an earlier term searches for the same thing
/// (`Token` after `token`, `tokens` after `token`, `cache` after `lib/cache.py`).
pub(super) fn salient_terms(text: &str, max: usize) -> Vec<Term> {
    let (mut terms, words): (Vec<Term>, Vec<Term>) = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter_map(classify)
        .map(|(token, kind)| Term::new(token, kind))
        .partition(|t| t.kind != TermKind::Word);
    let mut seen = BTreeSet::new();
    terms.retain(|t| seen.insert(t.text.to_lowercase()));
    for term in &terms {
        seen.insert(term.needle.clone());
    }
    for word in words {
        if !seen.contains(&word.text) && !seen.contains(&word.needle) {
            seen.insert(word.text.clone());
            seen.insert(word.needle.clone());
            terms.push(word);
        }
    }
    terms.truncate(max);
    terms
}

/// The alternation of the terms' patterns: one regex matching any of them.
pub(super) fn alternation(terms: &[Term]) -> String {
    terms
        .iter()
        .map(|t| t.pattern.as_str())
        .collect::<Vec<_>>()
        .join("|")
}

/// Escapes regex metacharacters (the set the Rust regex syntax accepts escaped).
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The token's term and kind, or `None` when it is not worth searching for.
fn classify(raw: &str) -> Option<(String, TermKind)> {
    if raw.contains("://") {
        return None;
    }
    let token = raw.trim_matches(|c: char| {
        matches!(
            c,
            '"' | '\''
                | '`'
                | '('
                | '['
                | '{'
                | '<'
                | '>'
                | '}'
                | ']'
                | '.'
                | ':'
                | '!'
                | '?'
                | '*'
                | '-'
                | '“'
                | '”'
                | '‘'
                | '’'
        )
    });
    if let Some(call) = token.strip_suffix("()") {
        let call = call.trim_start_matches(['(', '[']);
        return is_identifier_text(call).then(|| (call.to_owned(), TermKind::Identifier));
    }
    let token = token.trim_end_matches(')');
    if is_path(token) {
        return Some((token.trim_start_matches("./").to_owned(), TermKind::Path));
    }
    if is_identifier(token) {
        return Some((token.to_owned(), TermKind::Identifier));
    }
    let word = token.to_lowercase();
    let letters = word.chars().all(|c| c.is_alphanumeric()) && word.chars().count() >= 3;
    let starts_alpha = word.chars().next().is_some_and(char::is_alphabetic);
    (letters && starts_alpha && !is_stop_word(&word)).then_some((word, TermKind::Word))
}

fn is_identifier_text(token: &str) -> bool {
    !token.is_empty()
        && token
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
        && token
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | ':' | '-'))
}

/// `snake_case`, `CamelCase`, `camelCase`, `SCREAMING_CASE`, `a::b`, `kebab-case`.
fn is_identifier(token: &str) -> bool {
    if !is_identifier_text(token) || token.chars().count() < 3 {
        return false;
    }
    let inner_joint = |sep: &str| {
        token
            .split(sep)
            .filter(|part| !part.is_empty())
            .count()
            .gt(&1)
    };
    let camel = token
        .chars()
        .zip(token.chars().skip(1))
        .any(|(a, b)| a.is_lowercase() && b.is_uppercase());
    inner_joint("_") || inner_joint("::") || camel || (inner_joint("-") && !token.contains(':'))
}

/// `src/auth.rs`, `docs/`, `auth.rs`, `Cargo.toml`: a slash, or a name with a short
/// alphabetic extension.
fn is_path(token: &str) -> bool {
    if token.is_empty() || token.starts_with('-') || !token.chars().any(char::is_alphanumeric) {
        return false;
    }
    let plausible = token
        .chars()
        .all(|c| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
    if !plausible {
        return false;
    }
    if token.contains('/') {
        return !token.contains("//");
    }
    match token.rsplit_once('.') {
        Some((stem, ext)) => {
            stem.chars().count() >= 2
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphabetic())
                && stem.chars().any(char::is_alphabetic)
        }
        None => false,
    }
}

/// The file name of a path without its extension (what code usually mentions).
fn file_stem(path: &str) -> &str {
    let name = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path);
    match name.split_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => name,
    }
}

/// Drops a plural `s` so that `tokens` also finds `token`.
fn stem(word: &str) -> &str {
    let keep = ["ss", "us", "is", "os"];
    if word.len() > 4 && word.ends_with('s') && !keep.iter().any(|k| word.ends_with(k)) {
        &word[..word.len() - 1]
    } else {
        word
    }
}

/// English stop words, generic request verbs, programming keywords and words too vague to
/// search for.
fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.split_whitespace().any(|w| w == word)
}

/// Sorted and space-separated (checked by a test).
const STOP_WORDS: &str = "\
    about above add adding after again against all allow also always and another any are \
    around async await because been before being below better between both bug bugs but can \
    cannot change changes class code codebase const could create data did does doing done \
    down draft during each else ensure etc even every false few file files fix fixes fixing \
    for from function functions further get gets give goal good had has have having help her \
    here his how implement implementing import improve instead into issue its just keep let \
    like look make makes making many may method methods might more most much must need needs \
    new nil none not now null off once one only other our out over own plan please private \
    project proper properly public put really refine repo repository return returns revise \
    same see self set she should since some static step steps still such support sure take \
    than that the their them then there these they thing things this those through too true \
    try two ultraplan under until update use used uses using value values very void want was \
    way well were what when where which while who why will with within without work works \
    would yet you your";

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<String> {
        salient_terms(text, MAX_TERMS)
            .into_iter()
            .map(|t| t.text)
            .collect()
    }

    #[test]
    fn stop_words_are_sorted_and_lowercase() {
        let words: Vec<&str> = STOP_WORDS.split_whitespace().collect();
        assert!(words.windows(2).all(|w| w[0] < w[1]));
        assert!(words.iter().all(|w| w.to_lowercase() == *w));
        assert!(is_stop_word("about") && is_stop_word("your") && !is_stop_word("login"));
    }

    #[test]
    fn extracts_terms_in_a_stable_order() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("fix the bug", &[]),
            (
                "ultraplan add rate limiting to the login endpoint",
                &["rate", "limiting", "login", "endpoint"],
            ),
            (
                "Refresh expired tokens in `refresh_token` and TokenStore",
                &[
                    "refresh_token",
                    "TokenStore",
                    "refresh",
                    "expired",
                    "tokens",
                ],
            ),
            (
                "Make src/auth/session.rs use parse_header() instead of split",
                &["src/auth/session.rs", "parse_header", "split"],
            ),
            (
                "Support --dry-run in the CLI, like the `git` one. Also the CLI docs!",
                &["dry-run", "cli", "git", "docs"],
            ),
            (
                "see https://example.com/x and e.g. Cargo.toml v1.2 42 3rd",
                &["Cargo.toml"],
            ),
            (
                "one two three four five six seven eight nine alpha beta gamma delta epsilon \
                 zeta eta theta",
                &["three", "four", "five", "six", "seven", "eight"],
            ),
            (
                "Auth auth AUTH gateway::offline",
                &["gateway::offline", "auth"],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(texts(text), *want, "{text:?}");
        }
    }

    #[test]
    fn patterns_are_escaped_and_stemmed() {
        let cases = [
            ("tokens", TermKind::Word, r"(?:\b|_)token", "token"),
            ("class", TermKind::Word, r"(?:\b|_)class", "class"),
            ("status", TermKind::Word, r"(?:\b|_)status", "status"),
            ("a.b+c", TermKind::Identifier, r"a\.b\+c", "a.b+c"),
            ("Dry-Run", TermKind::Identifier, r"Dry\-Run", "dry-run"),
            ("src/auth/session.rs", TermKind::Path, "session", "session"),
            ("Cargo.toml", TermKind::Path, "Cargo", "cargo"),
            ("docs/", TermKind::Path, "docs", "docs"),
        ];
        for (text, kind, pattern, needle) in cases {
            let term = Term::new(text.to_owned(), kind);
            assert_eq!(
                (term.pattern.as_str(), term.needle.as_str()),
                (pattern, needle),
                "{text}"
            );
        }
    }

    #[test]
    fn occurrence_matches_the_grep_pattern_case_insensitively() {
        let cases = [
            ("tokens", TermKind::Word, "let Token = 1;", true),
            ("tokens", TermKind::Word, "let tok = 1;", false),
            ("rate", TermKind::Word, "use crate::x; // generate", false),
            (
                "rate",
                TermKind::Word,
                "struct RateLimiter; let max_rate = 1;",
                true,
            ),
            ("rate", TermKind::Word, "let r = rates[0];", true),
            ("crate", TermKind::Word, "use crate::x;", true),
            ("limit", TermKind::Identifier, "unlimited", true),
        ];
        for (text, kind, line, want) in cases {
            let term = Term::new(text.to_owned(), kind);
            assert_eq!(term.occurs_in(line), want, "{text} in {line}");
        }
        let terms = salient_terms("retry_policy and Backoff", MAX_TERMS);
        assert_eq!(alternation(&terms), r"retry_policy|(?:\b|_)backoff");
    }

    #[test]
    fn paths_sharing_a_stem_are_both_kept() {
        let got = texts("tune cache in lib/cache.py and docs/cache.md");
        assert_eq!(got, ["lib/cache.py", "docs/cache.md", "tune"]);
    }
}
