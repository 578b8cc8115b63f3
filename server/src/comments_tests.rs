use super::*;

const PLAN: &str = "# Plan\n\nIntro line.\n\n## Steps\n\n1. Add the table.\n2. Wire the API.\n\n\
```sh\n# not a heading\nrun it\n```\n\n### Tests ###\n\nCover both databases.\n\n## Risks\n\nNone.\n";

#[test]
fn comments_are_checked() {
    let long_body = "b".repeat(MAX_COMMENT_BODY_CHARS + 1);
    let max_body = "é".repeat(MAX_COMMENT_BODY_CHARS);
    let long_quote = "q".repeat(MAX_COMMENT_QUOTE_CHARS + 1);
    // (quote, body, Ok(heading path) or Err(code))
    type Case<'a> = (&'a str, &'a str, Result<Vec<&'a str>, &'a str>);
    let cases: Vec<Case<'_>> = vec![
        ("Add the table.", "why?", Ok(vec!["Plan", "Steps"])),
        ("Intro line.", &max_body, Ok(vec!["Plan"])),
        ("run it", "x", Ok(vec!["Plan", "Steps"])),
        ("Cover both", "x", Ok(vec!["Plan", "Steps", "Tests"])),
        ("None.", "x", Ok(vec!["Plan", "Risks"])),
        ("# Plan", "x", Ok(vec!["Plan"])),
        ("Add the table.\n2. Wire", "x", Ok(vec!["Plan", "Steps"])),
        ("Add the table.", "  \n ", Err("comment_body_required")),
        ("Add the table.", &long_body, Err("comment_too_long")),
        ("", "x", Err("quote_required")),
        (" \n", "x", Err("quote_required")),
        (&long_quote, "x", Err("quote_too_long")),
        ("add the table.", "x", Err("quote_not_in_plan")),
        ("Add  the table.", "x", Err("quote_not_in_plan")),
    ];
    for (quote, body, want) in cases {
        let got = check(PLAN, quote, body).map_err(|r| r.code);
        let want = want.map(|p| p.into_iter().map(str::to_owned).collect::<Vec<_>>());
        assert_eq!(got, want, "{quote:?}");
    }
}

#[test]
fn headings_are_read_like_markdown() {
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("text", vec![]),
        ("# A\ntext", vec!["A"]),
        ("# A\n## B\n# C\ntext", vec!["C"]),
        ("# A\n### B\n## C\ntext", vec!["A", "C"]),
        ("#NoSpace\ntext", vec![]),
        ("    # indented code\ntext", vec![]),
        ("   # A #\ntext", vec!["A"]),
        ("####### seven\ntext", vec![]),
        ("~~~\n# in fence\n~~~\ntext", vec![]),
    ];
    for (text, want) in cases {
        let at = text.rfind("text").expect("marker");
        assert_eq!(heading_path(text, at), want, "{text:?}");
    }
}

#[test]
fn the_agent_reads_comments_in_a_stable_format() {
    let steps = vec!["Plan".to_owned(), "Steps".to_owned()];
    let comments = [
        CommentText {
            id: "cmt_1",
            quote: "Add the table.",
            heading_path: &steps,
            body: "Which migration number?\n\nUse the next free one.",
        },
        CommentText {
            id: "cmt_2",
            quote: "line one\n  line two",
            heading_path: &[],
            body: "  Say \"why\".  ",
        },
    ];
    let text = with_comments("Please also cover PostgreSQL.", &comments);
    insta::assert_snapshot!("rejection_with_comments", text);
    let only_comments = with_comments("", &comments[..1]);
    insta::assert_snapshot!("rejection_with_comments_only", only_comments);
    assert_eq!(with_comments("just feedback", &[]), "just feedback");
}

#[test]
fn a_comment_is_addressed_when_the_agent_says_so_and_open_when_it_names_others() {
    use ultraplan_protocol::comments::{AddressedBy, CommentState};
    let named = ["cmt_1".to_owned(), "cmt_other_plan".to_owned()];
    let none: [String; 0] = [];
    let addressed = |by| (CommentState::Addressed, Some(by));
    let open = (CommentState::Open, None);
    let cases = [
        ("cmt_1", false, Verdict::Current, open),
        (
            "cmt_1",
            false,
            Verdict::Revised(None),
            addressed(AddressedBy::Revision),
        ),
        (
            "cmt_1",
            false,
            Verdict::Revised(Some(&named)),
            addressed(AddressedBy::Agent),
        ),
        ("cmt_2", false, Verdict::Revised(Some(&named)), open),
        ("cmt_2", false, Verdict::Revised(Some(&none)), open),
        (
            "cmt_1",
            true,
            Verdict::Revised(Some(&named)),
            (CommentState::Reopened, None),
        ),
        (
            "cmt_1",
            true,
            Verdict::Current,
            (CommentState::Reopened, None),
        ),
    ];
    for (id, reopened, verdict, want) in cases {
        assert_eq!(
            comment_state(id, reopened, verdict),
            want,
            "{id} {reopened} {verdict:?}"
        );
    }
}

#[test]
fn selections_on_the_rendered_page_resolve_to_the_plan_text() {
    let plan = "# Plan\n\n1. Set the cookie in `src/auth_session.rs` **before** redirecting.\n\
2. Drop the   guard.\n";
    let cases = [
        ("before", Some("before")),
        (
            "Set the cookie in src/auth_session.rs before redirecting.",
            Some("Set the cookie in `src/auth_session.rs` **before** redirecting."),
        ),
        (
            "src/auth_session.rs before",
            Some("src/auth_session.rs` **before"),
        ),
        ("Drop the guard.", Some("Drop the   guard.")),
        ("  Plan\n", Some("Plan")),
        ("Drop the fence.", None),
        ("   ", None),
        ("**", Some("**")),
        ("`*_`", None),
    ];
    for (selected, want) in cases {
        let got = resolve_quote(plan, selected);
        if let Some(raw) = &got {
            assert_eq!(plain_text(raw), plain_text(selected), "reads the same");
        }
        assert_eq!(got.as_deref(), want, "{selected:?}");
        if let Some(raw) = got {
            assert!(plan.contains(&raw), "the stored quote occurs verbatim");
        }
    }
}
