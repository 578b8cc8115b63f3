//! Tests of custom definition files: parsing, and loading a folder with good and bad files.

use super::*;
use crate::subagents::definition::INVALID_SUBTYPE;
use crate::test_support::tree;
use ultraplan_protocol::EventBody;

const AUDITOR: &str = "---
name: security-auditor
description: Reviews code paths for security problems.
tools: Grep, Read
disallowedTools:
  - Glob
model: sonnet
maxTurns: 7
color: red
---

You audit code for security problems.
";

#[test]
fn a_valid_file_becomes_a_definition() {
    let def = parse(".claude/agents/security-auditor.md", AUDITOR).expect("valid");
    assert_eq!(def.name, "security-auditor");
    assert_eq!(def.description, "Reviews code paths for security problems.");
    assert_eq!(def.system_prompt, "You audit code for security problems.");
    assert_eq!(def.tools, Some(vec!["Grep".to_owned(), "Read".to_owned()]));
    assert_eq!(def.disallowed_tools, ["Glob"]);
    assert_eq!(def.model.as_deref(), Some("sonnet"));
    assert_eq!(def.max_turns, 7);
    assert_eq!(
        def.source,
        Source::File(".claude/agents/security-auditor.md".into())
    );
}

#[test]
fn tool_lists_take_both_forms_and_star_means_all() {
    let cases = [
        ("tools: [Read, Grep]", Some(vec!["Read", "Grep"])),
        ("tools: Read", Some(vec!["Read"])),
        ("tools: '*'", None),
        ("tools: ", None),
        ("other: x", None),
        ("tools: [ ]", Some(vec![])),
    ];
    for (line, want) in cases {
        let text = format!("---\nname: a\ndescription: d\n{line}\n---\nbody\n");
        let def = parse("a.md", &text).expect(line);
        let want = want.map(|v| v.into_iter().map(String::from).collect::<Vec<_>>());
        assert_eq!(def.tools, want, "{line}");
        assert_eq!(def.max_turns, DEFAULT_MAX_TURNS);
    }
}

#[test]
fn invalid_files_say_why() {
    let cases = [
        ("just text", "does not start with a `---`"),
        ("---\ndescription: d\n---\nbody", "`name` is missing"),
        ("---\nname: a\n---\nbody", "`description` is missing"),
        (
            "---\nname: a b\ndescription: d\n---\nbody",
            "`name` `a b` may hold only",
        ),
        (
            "---\nname: [a]\ndescription: d\n---\nbody",
            "`name` must be text",
        ),
        ("---\nname: a\ndescription: d\n---\n  \n", "the body"),
        (
            "---\nname: a\ndescription: d\nmaxTurns: lots\n---\nbody",
            "`maxTurns` must be a whole number from 1 to 200, not `lots`",
        ),
        (
            "---\nname: a\ndescription: d\nmaxTurns: 0\n---\nbody",
            "not `0`",
        ),
        ("---\nname: a\ndescription: d\n", "not closed"),
    ];
    for (text, want) in cases {
        let err = parse("x.md", text).expect_err(text);
        assert!(err.to_string().contains(want), "{text:?}: {err}");
    }
}

#[test]
fn loading_keeps_good_files_and_reports_bad_ones() {
    let big = format!(
        "---\nname: big\ndescription: d\n---\n{}",
        "x".repeat(70_000)
    );
    let dir = tree(&[
        (".claude/agents/security-auditor.md", AUDITOR.as_bytes()),
        (".claude/agents/broken.md", b"---\nname: broken\n"),
        (".claude/agents/zz-dup.md", AUDITOR.as_bytes()),
        (".claude/agents/big.md", big.as_bytes()),
        (".claude/agents/notes.txt", b"ignored"),
        (".claude/agents/nested/deep.md", AUDITOR.as_bytes()),
        (".claude/agents/binary.md", &[0xff, 0xfe, 0x00]),
    ]);
    let workspace = Workspace::new(dir.path()).expect("workspace");
    let (valid, invalid) = load(&workspace);
    let names: Vec<&str> = valid.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["security-auditor"]);
    let reasons: Vec<(&str, &str)> = invalid
        .iter()
        .map(|i| (i.path.as_str(), i.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:#?}");
    let find = |file: &str| {
        reasons
            .iter()
            .find(|(p, _)| p.ends_with(file))
            .map(|(_, r)| *r)
            .unwrap_or_default()
    };
    assert!(find("big.md").contains("larger than"));
    assert!(find("binary.md").contains("not UTF-8"));
    assert!(find("broken.md").contains("not closed"));
    assert!(find("zz-dup.md").contains("already defined by .claude/agents/security-auditor.md"));
    for bad in &invalid {
        assert!(matches!(bad.event(), EventBody::System(s) if s.subtype == INVALID_SUBTYPE));
    }
}

#[test]
fn a_missing_folder_or_escaping_link_is_not_fatal() {
    let empty = tree(&[("README.md", b"x")]);
    let workspace = Workspace::new(empty.path()).expect("workspace");
    assert_eq!(load(&workspace), (vec![], vec![]));

    let outside = tree(&[("secret.md", AUDITOR.as_bytes())]);
    let dir = tree(&[("README.md", b"x")]);
    crate::test_support::symlink(
        dir.path(),
        ".claude/agents/leak.md",
        &outside.path().join("secret.md"),
    );
    let workspace = Workspace::new(dir.path()).expect("workspace");
    let (valid, invalid) = load(&workspace);
    assert!(valid.is_empty());
    assert_eq!(invalid.len(), 1);
    assert!(invalid[0].path.ends_with("leak.md"));
}
