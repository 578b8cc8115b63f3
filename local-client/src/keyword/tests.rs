#![allow(clippy::single_range_in_vec_init, clippy::reversed_empty_ranges)] // ranges are the data here

use super::{KEYWORD, KeywordMatch, Trigger, detect, detect_with_pasted};

/// (text, trigger start offsets, rewritten prompt when triggered)
type Case = (&'static str, &'static [usize], Option<&'static str>);

const CASES: &[Case] = &[
    // The reference examples.
    ("please ultraplan this", &[7], Some("please plan this")),
    (
        "Ultraplan: design the schema",
        &[0],
        Some("plan: design the schema"),
    ),
    ("open ultraplan.tsx", &[], None),
    ("use --ultraplan-mode", &[], None),
    ("the `ultraplan` keyword", &[], None),
    ("call it (ultraplan) later", &[], None),
    ("<b>ultraplan</b>", &[3], Some("<b>plan</b>")),
    (
        "x ultraplan y ultraplan z",
        &[2, 14],
        Some("x plan y ultraplan z"),
    ),
    ("n < 5 ultraplan n > 10", &[6], Some("n < 5 plan n > 10")),
    (
        "let's ultraplan it's fine",
        &[6],
        Some("let's plan it's fine"),
    ),
    (
        "[Pasted text #1] ultraplan it",
        &[17],
        Some("[Pasted text #1] plan it"),
    ),
    ("what is ultraplan?", &[], None),
    ("ultraplan ?", &[0], Some("plan ?")),
    ("ultraplan.md", &[], None),
    ("finish with ultraplan.", &[12], Some("finish with plan.")),
    // Slash commands.
    ("/ultraplan", &[], None),
    ("/help ultraplan this", &[], None),
    // Whole word and case.
    ("ultraplanning", &[], None),
    ("ultraplan2", &[], None),
    ("ultraplan_mode", &[], None),
    ("superultraplan", &[], None),
    ("ultraplanultraplan", &[], None),
    ("ULTRAPLAN the migration", &[0], Some("PLAN the migration")),
    ("uLtRaPlAn it", &[0], Some("PlAn it")),
    (
        "ask ultraplan: ultraplan",
        &[4, 15],
        Some("ask plan: ultraplan"),
    ),
    // Spans.
    ("\"ultraplan\" is quoted", &[], None),
    ("'ultraplan' in single quotes", &[], None),
    ("{ultraplan}", &[], None),
    ("[ultraplan]", &[], None),
    ("<ultraplan>", &[], None),
    ("<b ultraplan>", &[], None),
    ("</div> ultraplan", &[7], Some("</div> plan")),
    ("<3 ultraplan", &[3], Some("<3 plan")),
    ("a < b ultraplan", &[6], Some("a < b plan")),
    ("don't 'ultraplan' it", &[], None),
    ("x 'ultraplan's y", &[3], Some("x 'plan's y")),
    ("'ultraplan it's", &[1], Some("'plan it's")),
    (
        "unclosed \"ultraplan here",
        &[10],
        Some("unclosed \"plan here"),
    ),
    ("(unclosed ultraplan", &[10], Some("(unclosed plan")),
    ("`ultraplan", &[1], Some("`plan")),
    ("`a` ultraplan `b`", &[4], Some("`a` plan `b`")),
    ("(a \"b) ultraplan \"c", &[7], Some("(a \"b) plan \"c")),
    ("(\"ultraplan)\" x", &[], None),
    ("((ultraplan)) ultraplan", &[14], Some("((ultraplan)) plan")),
    ("[a [b] ultraplan c]", &[7], Some("[a [b] plan c]")),
    ("[ultraplan [x]", &[1], Some("[plan [x]")),
    (
        "{\"k\": \"ultraplan\"} ultraplan",
        &[19],
        Some("{\"k\": \"ultraplan\"} plan"),
    ),
    // Paths and flags.
    ("src/ultraplan/main.rs", &[], None),
    (" /ultraplan", &[], None),
    ("ultraplan/foo", &[], None),
    ("C:\\ultraplan", &[], None),
    ("ultraplan\\x", &[], None),
    ("pre-ultraplan", &[], None),
    ("ultraplan-mode", &[], None),
    ("-ultraplan", &[], None),
    // Questions.
    ("ultraplan?", &[], None),
    ("ultraplan?!", &[], None),
    // File names and sentence ends.
    ("ultraplan. Then ship", &[0], Some("plan. Then ship")),
    ("ultraplan..", &[0], Some("plan..")),
    ("ultraplan.5", &[], None),
    ("ultraplan._x", &[], None),
    ("ultraplan.é", &[], None),
    ("ultraplan!", &[0], Some("plan!")),
    ("ultraplan, please", &[0], Some("plan, please")),
    // Whitespace and empty prompts.
    ("", &[], None),
    ("ultraplan", &[0], Some("")),
    ("   ultraplan   ", &[3], Some("")),
    ("ULTRAPLAN\n", &[0], Some("")),
    ("ultraplan\tfix", &[0], Some("plan\tfix")),
    ("line one\nultraplan two", &[9], Some("line one\nplan two")),
    // Non-ASCII.
    ("é ultraplan ü", &[3], Some("é plan ü")),
    ("éultraplan", &[], None),
    ("日本ultraplan", &[], None),
    ("ultraplan日本", &[], None),
    ("«ultraplan»", &[2], Some("«plan»")),
    ("“ultraplan” 🚀", &[3], Some("“plan” 🚀")),
];

#[test]
fn table() {
    assert!(CASES.len() >= 45);
    for &(text, starts, rewritten) in CASES {
        let m = detect(text);
        let expected: Vec<Trigger> = starts
            .iter()
            .map(|&start| Trigger {
                start,
                end: start + KEYWORD.len(),
            })
            .collect();
        assert_eq!(m.triggers, expected, "triggers for {text:?}");
        assert_eq!(m.rewritten.as_deref(), rewritten, "rewrite of {text:?}");
        assert_eq!(m.prompt(), rewritten.unwrap_or(text), "prompt of {text:?}");
    }
}

#[test]
fn empty_prompt_is_only_the_keyword() {
    assert!(detect("ultraplan").prompt_is_empty());
    assert!(detect("  ULTRAPLAN \n").prompt_is_empty());
    assert!(!detect("ultraplan fix auth").prompt_is_empty());
    assert!(!detect("nothing here").prompt_is_empty());
    assert!(!detect("").prompt_is_empty());
}

#[test]
fn serializes_with_the_text_unchanged_when_nothing_triggers() {
    let json = |m: &KeywordMatch| serde_json::to_string(m).unwrap_or_default();
    assert_eq!(
        json(&detect("please ultraplan this")),
        r#"{"triggers":[{"start":7,"end":16}],"rewritten":"please plan this"}"#
    );
    assert_eq!(
        json(&detect("open ultraplan.tsx")),
        r#"{"triggers":[],"rewritten":"open ultraplan.tsx"}"#
    );
}

#[test]
fn pasted_text_does_not_trigger() {
    assert!(!detect_with_pasted("see ultraplan", &[4..13]).triggered());
    assert!(!detect_with_pasted("paste: ultraplan here", &[8..9]).triggered());
    let m = detect_with_pasted("ultraplan [Pasted ultraplan]", &[10..28]);
    assert_eq!(m.triggers, [Trigger { start: 0, end: 9 }]);
    assert_eq!(m.rewritten.as_deref(), Some("plan [Pasted ultraplan]"));
}

#[test]
fn pasted_text_opens_no_span_and_no_slash_command() {
    // Typed alone, the quotes would hide the keyword; the first quote was pasted.
    assert!(!detect("a\"b ultraplan \"c").triggered());
    let m = detect_with_pasted("a\"b ultraplan \"c", &[0..3]);
    assert_eq!(m.triggers, [Trigger { start: 4, end: 13 }]);
    let m = detect_with_pasted("/cmd ultraplan", &[0..4]);
    assert_eq!(m.triggers, [Trigger { start: 5, end: 14 }]);
}

#[test]
fn pasted_ranges_may_be_odd() {
    let text = "é ultraplan ü";
    for r in [5..1000, 9..3, 1..2, 0..1, usize::MAX - 1..usize::MAX] {
        let m = detect_with_pasted(text, std::slice::from_ref(&r));
        let touches = r.start < r.end && r.start < 12 && 3 < r.end;
        assert_eq!(m.triggered(), !touches, "range {r:?}");
    }
}

/// Tricky strings: multi-byte chars next to the keyword, combining marks, emoji, RTL, BOM.
const TRICKY: &[&str] = &[
    "ultraplan\u{301}",
    "\u{301}ultraplan",
    "🚀ultraplan🚀",
    "ultraplan.🚀",
    "'ultraplan’",
    "\u{feff}ultraplan",
    "ultraplan\u{200d}",
    "עברית ultraplan עברית",
    "<é ultraplan>",
    "<ultraplan",
    "[[[[ultraplan",
    "'''''ultraplan",
    "ULTRAPLAN\u{0}",
    "ß ULTRAPLAN ß",
    "\u{10ffff}ultraplan\u{10ffff}",
];

#[test]
fn tricky_unicode_never_panics_and_stays_on_boundaries() {
    for text in TRICKY {
        check_invariants(text, &[]);
        for at in 0..=text.len() + 1 {
            check_invariants(text, &[at..at + 1, 0..at]);
        }
    }
}

pub(super) fn check_invariants(text: &str, pasted: &[std::ops::Range<usize>]) {
    let m = detect_with_pasted(text, pasted);
    for t in &m.triggers {
        assert!(text.is_char_boundary(t.start) && text.is_char_boundary(t.end));
        assert!(text[t.start..t.end].eq_ignore_ascii_case(KEYWORD));
    }
    match m.triggers.first() {
        Some(t) if text[..t.start].trim().is_empty() && text[t.end..].trim().is_empty() => {
            assert_eq!(m.rewritten.as_deref(), Some(""), "keyword-only {text:?}");
            assert!(m.prompt_is_empty());
        }
        Some(t) => {
            let rewritten = m.rewritten.as_deref().unwrap_or_default();
            assert_eq!(rewritten.len(), text.len() - 5);
            assert_eq!(&rewritten[..t.start], &text[..t.start]);
            assert!(!m.prompt_is_empty());
        }
        None => assert!(m.rewritten.is_none()),
    }
}

#[path = "reference_tests.rs"]
mod reference;

mod properties {
    use proptest::prelude::*;

    /// Fragments that exercise every rule, glued together in random order.
    const FRAGMENTS: &[&str] = &[
        "ultraplan",
        "ULTRAPLAN",
        "Ultraplan",
        " ",
        "\n",
        "`",
        "\"",
        "'",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "<",
        ">",
        "/",
        "\\",
        "-",
        "?",
        ".",
        "_",
        "a",
        "9",
        "é",
        "日",
        "🚀",
        "\u{301}",
        "’",
    ];

    proptest! {
        #[test]
        fn never_panics_and_offsets_are_sound(
            parts in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..24),
            pasted in prop::collection::vec((0usize..200, 0usize..200), 0..3),
        ) {
            let text: String = parts.concat();
            let ranges: Vec<_> = pasted.into_iter().map(|(a, b)| a..b).collect();
            super::check_invariants(&text, &ranges);
        }

        #[test]
        fn arbitrary_strings_never_panic(text in "\\PC{0,64}") {
            super::check_invariants(&text, &[]);
        }
    }
}
