//! The ordered steps of a plan, grounded in the files the search found.

use std::collections::BTreeMap;

use super::commands::{Purpose, is_manifest};
use super::plan::{Findings, code};
use super::rank::{LineRef, cited_lines, is_test_path};
use super::terms::Term;

/// What kind of change the request asks for, from its verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Intent {
    Fix,
    Remove,
    Refactor,
    Perf,
    Docs,
    Add,
    Change,
}

/// Words revealing each intent, checked in this order.
const INTENT_WORDS: &[(Intent, &[&str])] = &[
    (
        Intent::Fix,
        &[
            "fix",
            "bug",
            "broken",
            "crash",
            "crashes",
            "error",
            "errors",
            "fails",
            "failing",
            "failure",
            "regression",
            "wrong",
            "incorrect",
            "panic",
            "panics",
            "issue",
        ],
    ),
    (
        Intent::Remove,
        &["remove", "delete", "drop", "deprecate", "eliminate"],
    ),
    (
        Intent::Refactor,
        &[
            "refactor",
            "rename",
            "move",
            "extract",
            "split",
            "restructure",
            "reorganize",
            "cleanup",
            "simplify",
        ],
    ),
    (
        Intent::Perf,
        &[
            "slow",
            "faster",
            "performance",
            "optimize",
            "optimise",
            "speed",
            "latency",
        ],
    ),
    (
        Intent::Docs,
        &["document", "docs", "documentation", "readme"],
    ),
    (
        Intent::Add,
        &[
            "add",
            "implement",
            "support",
            "create",
            "introduce",
            "new",
            "enable",
            "allow",
            "feature",
        ],
    ),
];

/// The request's intent (the first listed intent any of its words reveals).
pub(super) fn intent(text: &str) -> Intent {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    INTENT_WORDS
        .iter()
        .find(|(_, keys)| words.iter().any(|w| keys.contains(w)))
        .map_or(Intent::Change, |(intent, _)| *intent)
}

/// The list items of a draft plan (its steps), markers removed.
pub(super) fn draft_items(draft: &str) -> Vec<String> {
    draft
        .lines()
        .filter_map(|line| strip_list_marker(line.trim()))
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The text of a Markdown list item, or `None` when the line is not one.
pub(super) fn strip_list_marker(line: &str) -> Option<&str> {
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = line.strip_prefix(bullet) {
            return Some(rest.trim_start_matches("[ ] ").trim());
        }
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &line[digits..];
    (digits > 0)
        .then(|| rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")))
        .flatten()
        .map(str::trim)
}

/// The steps before the revisions and the final check.
pub(super) fn initial_steps(f: &Findings<'_>) -> Vec<String> {
    let mut steps = Vec::new();
    if let Some(draft) = &f.request.draft {
        let items = draft_items(draft);
        if items.is_empty() {
            steps.push("Start from the draft plan given with the request.".to_owned());
        }
        steps.extend(
            items
                .iter()
                .take(12)
                .map(|i| format!("From the draft plan: {i}")),
        );
    }
    steps.push(first_step(f));
    let (tests, code_files): (Vec<&String>, Vec<&String>) =
        f.files.iter().partition(|p| is_test_path(p));
    for path in code_files.iter().filter(|p| !is_doc(p)) {
        steps.push(file_step(f, path));
    }
    steps.push(test_step(f, &tests));
    let docs: Vec<String> = f
        .files
        .iter()
        .filter(|p| is_doc(p))
        .map(|p| code(p))
        .collect();
    if !docs.is_empty() {
        steps.push(format!(
            "Bring the documentation in line with the change: {}.",
            docs.join(", ")
        ));
    } else if f.intent == Intent::Docs {
        steps.push("Write the documentation the request asks for (README.md or docs/).".into());
    }
    steps
}

fn is_doc(path: &str) -> bool {
    let lower = path.to_lowercase();
    [".md", ".rst", ".txt", ".adoc"]
        .iter()
        .any(|ext| lower.ends_with(ext))
        && !is_manifest(path)
}

fn first_step(f: &Findings<'_>) -> String {
    let summary = &f.summary;
    let Some(top) = f.files.first() else {
        let layout = layout(&f.evidence.globbed);
        return if f.terms.is_empty() {
            format!(
                "The request names nothing to search for: pin down the goal, then find the entry \
                 point by hand, starting from {layout}."
            )
        } else {
            format!(
                "No file mentions {}: find the entry point by hand, starting from {layout}, and \
                 name it in this plan.",
                term_list(f.terms)
            )
        };
    };
    let mentions = f
        .ranked
        .iter()
        .find(|r| r.path == *top)
        .filter(|r| !r.terms.is_empty())
        .map(|r| {
            let terms: Vec<&Term> = r.terms.iter().filter_map(|&i| f.terms.get(i)).collect();
            format!(" (it mentions {})", term_list_refs(&terms))
        })
        .unwrap_or_default();
    let top = code(top);
    let matching = f.ranked.len();
    match f.intent {
        Intent::Fix => format!(
            "Reproduce the problem first: write a test that fails because of it (\"{summary}\"), \
             next to the code in {top}{mentions}."
        ),
        Intent::Remove => format!(
            "List every use of {} before deleting anything ({matching} files mention them); \
             start with {top}.",
            term_list(f.terms)
        ),
        Intent::Refactor => format!(
            "Map every use of {} ({matching} files mention them) so that nothing is left \
             half-moved; start with {top}.",
            term_list(f.terms)
        ),
        Intent::Perf => format!(
            "Measure the current cost first: add a benchmark or timing around the code in \
             {top}{mentions}."
        ),
        Intent::Docs => format!("Collect the facts to document from {top}{mentions}."),
        Intent::Add => format!(
            "Pin down the behaviour to add (\"{summary}\") and where it enters the code: {top} \
             is the closest match{mentions}."
        ),
        Intent::Change => {
            format!("Confirm where the change belongs: {top} is the closest match{mentions}.")
        }
    }
}

fn file_step(f: &Findings<'_>, path: &str) -> String {
    let verb = match f.intent {
        Intent::Fix => "Fix the behaviour in",
        Intent::Remove => "Remove the code in question from",
        Intent::Refactor => "Restructure",
        Intent::Perf => "Optimise the hot path in",
        Intent::Docs => "Document",
        Intent::Add => "Extend",
        Intent::Change => "Update",
    };
    let terms: Vec<&Term> = f.terms.iter().collect();
    let lines = cited_lines(f.evidence, path, &terms, 1);
    let mut step = format!("{verb} {}", code(path));
    if let Some(best) = lines.first() {
        step.push_str(&format!(
            " around line {} ({})",
            best.number,
            code(&clip_line(best))
        ));
    }
    let found: Vec<&Term> = f
        .terms
        .iter()
        .filter(|t| lines_mention(f, path, t, &lines))
        .collect();
    if !found.is_empty() {
        let verb = if found.len() == 1 {
            "appears"
        } else {
            "appear"
        };
        step.push_str(&format!(", where {} {verb}", term_list_refs(&found)));
    }
    step.push('.');
    step
}

fn lines_mention(f: &Findings<'_>, path: &str, term: &Term, cited: &[LineRef]) -> bool {
    cited.iter().any(|l| term.occurs_in(&l.text))
        || f.evidence
            .lines
            .get(path)
            .is_some_and(|lines| lines.values().any(|l| term.occurs_in(l)))
}

fn test_step(f: &Findings<'_>, tests: &[&String]) -> String {
    let command = test_command(f).map(|c| format!("; run them with {}", code(&c)));
    let command = command.unwrap_or_default();
    match (tests.first(), f.files.first()) {
        (Some(test), _) => format!(
            "Extend the tests in {} to cover the change, including one failure case{command}.",
            code(test)
        ),
        (None, Some(top)) => format!(
            "Add tests beside {} that cover the change, including one failure case{command}.",
            code(top)
        ),
        (None, None) => {
            format!("Add tests that cover the change, including one failure case{command}.")
        }
    }
}

/// The last step: run everything that checks the change.
pub(super) fn final_step(f: &Findings<'_>) -> String {
    let checks: Vec<String> = f
        .commands
        .iter()
        .filter(|c| c.purpose != Purpose::Build)
        .take(3)
        .map(|c| code(&c.command))
        .collect();
    if checks.is_empty() {
        return "Run the project's tests (no test command was detected) and compare the diff \
                with the goal above."
            .to_owned();
    }
    format!(
        "Run {}, fix what fails, and compare the diff with the goal above.",
        checks.join(", then ")
    )
}

/// The first test command, if any.
pub(super) fn test_command(f: &Findings<'_>) -> Option<String> {
    f.commands
        .iter()
        .find(|c| c.purpose == Purpose::Test)
        .map(|c| c.command.clone())
}

/// The top-level directories of the globbed files, with counts: `` `src/` (12 files) ``.
pub(super) fn layout(globbed: &[String]) -> String {
    let mut dirs: BTreeMap<&str, usize> = BTreeMap::new();
    for path in globbed {
        if let Some((dir, _)) = path.split_once('/') {
            *dirs.entry(dir).or_default() += 1;
        }
    }
    if dirs.is_empty() {
        return "the repository root".to_owned();
    }
    let mut dirs: Vec<(&str, usize)> = dirs.into_iter().collect();
    dirs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    dirs.iter()
        .take(4)
        .map(|(dir, n)| format!("`{dir}/` ({n} {})", if *n == 1 { "file" } else { "files" }))
        .collect::<Vec<_>>()
        .join(", ")
}

fn clip_line(line: &LineRef) -> String {
    super::evidence::clip_words(&line.text, 60)
}

/// Where new tests go: the first test file inspected, else beside the best match.
pub(super) fn test_target(f: &Findings<'_>) -> String {
    match (f.files.iter().find(|p| is_test_path(p)), f.files.first()) {
        (Some(test), _) => format!("in {}", code(test)),
        (None, Some(top)) => format!("beside {}", code(top)),
        (None, None) => "where the project keeps its tests".to_owned(),
    }
}

/// `` `a`, `b` and `c` ``.
pub(super) fn term_list(terms: &[Term]) -> String {
    term_list_refs(&terms.iter().collect::<Vec<_>>())
}

fn term_list_refs(terms: &[&Term]) -> String {
    let quoted: Vec<String> = terms.iter().map(|t| code(&t.text)).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_intents() {
        let cases = [
            ("fix the login crash", Intent::Fix),
            ("Login is slow, make it faster", Intent::Perf),
            ("add rate limiting", Intent::Add),
            ("remove the legacy exporter", Intent::Remove),
            ("rename Foo to Bar", Intent::Refactor),
            ("document the config flags", Intent::Docs),
            ("tweak the colours", Intent::Change),
            ("", Intent::Change),
        ];
        for (text, want) in cases {
            assert_eq!(intent(text), want, "{text}");
        }
    }

    #[test]
    fn reads_draft_items() {
        let draft = "# Plan\nIntro.\n- [ ] cache results\n* index\n2. measure\n3) ship\n-nope";
        assert_eq!(
            draft_items(draft),
            ["cache results", "index", "measure", "ship"]
        );
    }

    #[test]
    fn summarises_layout() {
        let globbed: Vec<String> = ["src/a.rs", "src/b.rs", "tests/t.rs", "build.rs"]
            .iter()
            .map(|p| (*p).to_owned())
            .collect();
        assert_eq!(layout(&globbed), "`src/` (2 files), `tests/` (1 file)");
        assert_eq!(layout(&[]), "the repository root");
    }
}
