//! Revisions: what a reviewer's feedback adds to the plan.

use super::evidence::Evidence;
use super::plan::{Findings, code};
use super::rank::{LineRef, cited_lines, is_noise};
use super::steps::{strip_list_marker, test_command, test_target};
use super::terms::{MAX_TERMS, Term, salient_terms};

/// Feedback sentences turned into steps at most, per revision.
const MAX_SENTENCES: usize = 10;
/// Lines related to the feedback cited at most, per revision.
const MAX_REFS: usize = 6;

/// One rejection and what the plan adds for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Revision {
    pub(super) number: usize,
    /// The reviewer's feedback, verbatim.
    pub(super) feedback: String,
    pub(super) steps: Vec<String>,
    /// Lines the feedback's terms were found on.
    pub(super) refs: Vec<LineRef>,
}

/// Which feedback words call for which extra step.
const RULES: &[(&[&str], &str)] = &[
    (
        &[
            "test",
            "tests",
            "testing",
            "tested",
            "coverage",
            "spec",
            "specs",
            "unit",
            "integration",
            "e2e",
            "regression",
        ],
        "Add tests for what the feedback raises {tests}; check that they fail without the \
         change and pass with it{run}.",
    ),
    (
        &[
            "doc",
            "docs",
            "documentation",
            "document",
            "documented",
            "readme",
            "comment",
            "comments",
            "changelog",
        ],
        "Update the documentation the change affects (README, docs, changelog) and the comments \
         in the changed code.",
    ),
    (
        &[
            "split",
            "smaller",
            "small",
            "separate",
            "incremental",
            "commits",
            "scope",
            "focused",
        ],
        "Keep the change small: land it as separate commits, one per step, each passing the \
         tests{run}.",
    ),
    (
        &[
            "security",
            "secure",
            "permission",
            "permissions",
            "validate",
            "validation",
            "sanitize",
            "injection",
            "secret",
            "secrets",
            "untrusted",
        ],
        "Review the security impact: validate untrusted input and check permissions in the \
         changed code, with a test for the refused case.",
    ),
    (
        &[
            "performance",
            "slow",
            "fast",
            "faster",
            "speed",
            "latency",
            "benchmark",
            "memory",
        ],
        "Measure before and after with a benchmark {near}; keep the change only if it does \
         not regress.",
    ),
    (
        &[
            "compat",
            "compatibility",
            "compatible",
            "backward",
            "backwards",
            "migration",
            "migrate",
            "breaking",
            "deprecate",
        ],
        "Keep backward compatibility: leave the old behaviour working (or deprecate it \
         explicitly) and describe the migration.",
    ),
    (
        &[
            "error", "errors", "failure", "failures", "fail", "fails", "handling", "panic",
            "crash", "edge",
        ],
        "Handle the failure paths explicitly (errors, empty input, edge cases) and cover each \
         with a test.",
    ),
    (
        &[
            "simpler",
            "simplify",
            "simple",
            "complex",
            "complicated",
            "overkill",
            "overengineered",
            "unnecessary",
        ],
        "Simplify: drop every step the goal does not need and keep the smallest diff that \
         meets it.",
    ),
];

/// The revision for the `number`-th rejection; `evidence` is what the search for the
/// feedback's terms found (maybe nothing).
pub(super) fn revision(
    number: usize,
    feedback: &str,
    evidence: &Evidence,
    f: &Findings<'_>,
) -> Revision {
    let terms = salient_terms(feedback, MAX_TERMS);
    let refs = related_lines(evidence, &terms, &f.files);
    let sentences = sentences(feedback);
    let mut steps: Vec<String> = sentences
        .iter()
        .take(MAX_SENTENCES)
        .map(|sentence| address(sentence, &refs))
        .collect();
    if sentences.is_empty() {
        steps.push(
            "Address: the plan was rejected without feedback; check each step against the goal \
             and ask the reviewer what is missing."
                .to_owned(),
        );
    }
    let words = words(feedback);
    for (keys, template) in RULES {
        if keys.iter().any(|k| words.iter().any(|w| w == k)) {
            steps.push(fill(template, f));
        }
    }
    Revision {
        number,
        feedback: feedback.to_owned(),
        steps,
        refs,
    }
}

/// `Address: <sentence>`, pointing at a related line when one mentions the sentence's terms.
fn address(sentence: &str, refs: &[LineRef]) -> String {
    let terms = salient_terms(sentence, MAX_TERMS);
    let related = refs
        .iter()
        .find(|r| terms.iter().any(|t| t.occurs_in(&r.text)));
    match related {
        Some(r) => format!(
            "Address: {sentence} (see {})",
            code(&format!("{}:{}", r.path, r.number))
        ),
        None => format!("Address: {sentence}"),
    }
}

fn fill(template: &str, f: &Findings<'_>) -> String {
    let tests = test_target(f);
    let near = match f.files.first() {
        Some(top) => format!("around {}", code(top)),
        None => "around the changed code".to_owned(),
    };
    let run = test_command(f)
        .map(|c| format!(" (`{c}`)"))
        .unwrap_or_default();
    template
        .replace("{tests}", &tests)
        .replace("{near}", &near)
        .replace("{run}", &run)
}

/// Lines of the feedback search that mention its terms: those with more of the terms first,
/// then lines of the plan's files, at most two per file.
fn related_lines(evidence: &Evidence, terms: &[Term], plan_files: &[String]) -> Vec<LineRef> {
    if terms.is_empty() {
        return Vec::new();
    }
    let refs: Vec<&Term> = terms.iter().collect();
    let mut lines: Vec<(usize, bool, LineRef)> = evidence
        .lines
        .keys()
        .filter(|p| !is_noise(p))
        .flat_map(|p| cited_lines(evidence, p, &refs, 2))
        .map(|line| {
            let hits = terms.iter().filter(|t| t.occurs_in(&line.text)).count();
            (hits, !plan_files.contains(&line.path), line)
        })
        .collect();
    lines.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.cmp(&b.1))
            .then_with(|| a.2.path.cmp(&b.2.path))
            .then_with(|| a.2.number.cmp(&b.2.number))
    });
    lines
        .into_iter()
        .take(MAX_REFS)
        .map(|(.., line)| line)
        .collect()
}

/// The feedback's sentences: one per line or list item, lines split after `.`, `!` or `?`.
pub(super) fn sentences(feedback: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in feedback.lines() {
        let line = line.trim();
        let line = strip_list_marker(line).unwrap_or(line);
        let mut start = 0;
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        for (k, (i, c)) in chars.iter().enumerate() {
            let next_is_space = chars.get(k + 1).is_none_or(|(_, n)| n.is_whitespace());
            if matches!(c, '.' | '!' | '?') && next_is_space {
                let end = i + c.len_utf8();
                push_sentence(&mut out, &line[start..end]);
                start = end;
            }
        }
        push_sentence(&mut out, &line[start..]);
    }
    out
}

fn push_sentence(out: &mut Vec<String>, sentence: &str) {
    let sentence = sentence.trim();
    if sentence.chars().any(char::is_alphanumeric) {
        out.push(sentence.to_owned());
    }
}

fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_feedback_into_sentences() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("  \n ", &[]),
            ("add tests", &["add tests"]),
            (
                "Add tests. Also keep it small! Why v1.2?",
                &["Add tests.", "Also keep it small!", "Why v1.2?"],
            ),
            (
                "- cover the error path\n- rename `x.y`\n\n3. ship it...",
                &["cover the error path", "rename `x.y`", "ship it..."],
            ),
        ];
        for (text, want) in cases {
            assert_eq!(sentences(text), *want, "{text:?}");
        }
    }
}
