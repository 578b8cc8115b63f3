//! Rendering the plan: Markdown with a title, the offline label, Goal, Relevant files, Steps,
//! Tests, Risks, and one section per revision.

use std::fmt::Write as _;

use super::commands::{Command, Purpose};
use super::evidence::{Evidence, clip, clip_words};
use super::explore::{MAX_INSPECTED, READ_LIMIT};
use super::rank::{Ranked, cited_lines};
use super::request::UserRequest;
use super::revise::Revision;
use super::steps::{Intent, final_step, initial_steps, layout, term_list};
use super::terms::Term;

/// The label every offline plan carries right under its title.
pub(super) const OFFLINE_LABEL: &str = "*Written by the offline planner (no model configured): a \
deterministic outline built from a keyword search of the repository, not by a language model. \
Check every step before approving.*";

/// Lines cited per file at most.
const LINES_PER_FILE: usize = 3;
/// Characters of a cited line shown at most.
const SNIPPET_CHARS: usize = 80;
/// Characters of the request quoted at most.
const MAX_QUOTE_CHARS: usize = 4000;

/// Everything the plan is written from.
#[derive(Debug, Clone)]
pub(super) struct Findings<'a> {
    pub(super) request: &'a UserRequest,
    pub(super) summary: String,
    pub(super) intent: Intent,
    pub(super) notes: &'a [String],
    pub(super) terms: &'a [Term],
    pub(super) evidence: &'a Evidence,
    pub(super) ranked: &'a [Ranked],
    /// The inspected files that exist, best first.
    pub(super) files: Vec<String>,
    /// Every manifest Glob found, shallowest first.
    pub(super) manifests: Vec<String>,
    pub(super) commands: Vec<Command>,
    /// Whether Grep was offered (else files were picked by name).
    pub(super) grep_offered: bool,
    /// Exploration stopped at the turn cap.
    pub(super) cut_short: bool,
}

/// The plan's title: the request's first line, without the trigger word, at most 72 chars.
pub(super) fn summary(request: &UserRequest) -> String {
    let source = match request.text.trim() {
        "" => request.draft.as_deref().unwrap_or_default(),
        text => text,
    };
    let line = source
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut line = line.as_str();
    let trigger = line
        .get(..9)
        .is_some_and(|w| w.eq_ignore_ascii_case("ultraplan"))
        && !line[9..].starts_with(char::is_alphanumeric);
    if trigger {
        line = line[9..].trim_start_matches([':', ',', '-', ' ']);
    }
    if let Some(rest) = line.strip_prefix("Plan:") {
        line = rest.trim();
    }
    let line = clip_words(line.trim_end_matches(['.', ':', ' ']), 72);
    let mut chars = line.chars();
    match chars.next() {
        None => "Untitled request".to_owned(),
        Some(first) => first.to_uppercase().chain(chars).collect(),
    }
}

/// The whole plan.
pub(super) fn render(f: &Findings<'_>, revisions: &[Revision]) -> String {
    let mut out = format!("# Plan: {}\n\n{OFFLINE_LABEL}\n\n", f.summary);
    section(&mut out, "Goal", &goal(f));
    section(&mut out, "Relevant files", &relevant_files(f).join("\n"));
    section(&mut out, "Steps", &numbered_steps(f, revisions));
    section(&mut out, "Tests", &tests(f).join("\n"));
    section(&mut out, "Risks", &risks(f).join("\n"));
    let mut first_revision_step = initial_steps(f).len() + 1;
    for revision in revisions {
        let body = revision_section(revision, first_revision_step);
        section(&mut out, &format!("Revision {}", revision.number), &body);
        first_revision_step += revision.steps.len();
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

fn section(out: &mut String, title: &str, body: &str) {
    let _ = write!(out, "## {title}\n\n{}\n\n", body.trim_end());
}

/// Inline code, safe for text that holds backticks.
pub(super) fn code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// `text` as a Markdown blockquote, verbatim.
pub(super) fn quote(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_owned()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn goal(f: &Findings<'_>) -> String {
    let mut out = String::new();
    if f.request.text.trim().is_empty() {
        out.push_str("Refine the draft plan given with the request.\n\n");
    } else {
        let _ = writeln!(out, "{}\n", quote(&clip(&f.request.text, MAX_QUOTE_CHARS)));
    }
    if f.request.draft.is_some() {
        out.push_str(
            "Starting point: the draft plan given with the request; its steps open the list \
             below.\n\n",
        );
    }
    if f.terms.is_empty() {
        out.push_str("The request names nothing specific to search the repository for.\n\n");
    } else {
        let _ = writeln!(out, "Searched the repository for {}.\n", term_list(f.terms));
    }
    if !f.notes.is_empty() {
        out.push_str("Later input from the user:\n\n");
        for note in f.notes {
            let _ = writeln!(out, "{}\n", quote(&clip(note, MAX_QUOTE_CHARS)));
        }
    }
    out
}

fn relevant_files(f: &Findings<'_>) -> Vec<String> {
    let terms: Vec<&Term> = f.terms.iter().collect();
    let mut bullets = Vec::new();
    for path in &f.files {
        let lines = cited_lines(f.evidence, path, &terms, LINES_PER_FILE);
        if lines.is_empty() {
            let why = match f.ranked.iter().find(|r| r.path == *path) {
                Some(r) if r.matches > 0 => format!("{} matching lines", r.matches),
                Some(_) => "matches the request's terms".to_owned(),
                None => "named in the request".to_owned(),
            };
            bullets.push(format!("- {} — {why}", code(path)));
        }
        for line in lines {
            let location = format!("{}:{}", line.path, line.number);
            let snippet = clip(&line.text, SNIPPET_CHARS);
            bullets.push(format!("- {} — {}", code(&location), code(&snippet)));
        }
    }
    let others: Vec<&Ranked> = f
        .ranked
        .iter()
        .filter(|r| !f.files.contains(&r.path) && !f.manifests.contains(&r.path))
        .collect();
    if !others.is_empty() {
        let shown: Vec<String> = others.iter().take(6).map(|r| code(&r.path)).collect();
        let more = match others.len().saturating_sub(shown.len()) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        bullets.push(format!("- Also matching: {}{more}", shown.join(", ")));
    }
    if !f.manifests.is_empty() {
        let shown: Vec<String> = f.manifests.iter().take(5).map(|m| code(m)).collect();
        bullets.push(format!("- Build manifests: {}", shown.join(", ")));
    }
    if f.files.is_empty() {
        bullets.insert(
            0,
            format!(
                "- No file matched the request's terms. Source layout: {}.",
                layout(&f.evidence.globbed)
            ),
        );
    }
    bullets
}

fn numbered_steps(f: &Findings<'_>, revisions: &[Revision]) -> String {
    let mut steps = initial_steps(f);
    for revision in revisions {
        let label = format!("**Revision {}:**", revision.number);
        steps.extend(revision.steps.iter().map(|s| format!("{label} {s}")));
    }
    steps.push(final_step(f));
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{}. {s}", i + 1))
        .collect::<Vec<_>>()
        .join("\n")
}

fn tests(f: &Findings<'_>) -> Vec<String> {
    let mut lines: Vec<String> = f
        .commands
        .iter()
        .map(|c| {
            let purpose = match c.purpose {
                Purpose::Test => "Test",
                Purpose::Lint => "Lint",
                Purpose::Build => "Build",
            };
            let note = c
                .note
                .as_ref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default();
            format!(
                "- {purpose}: {} (from {}{note})",
                code(&c.command),
                code(&c.source)
            )
        })
        .collect();
    if !f.commands.iter().any(|c| c.purpose == Purpose::Test) {
        let why = if f.manifests.is_empty() {
            "no build manifest was found"
        } else {
            "the manifests reveal no test command"
        };
        lines.push(format!(
            "- No test command detected: {why}. Decide how the change will be verified before \
             starting."
        ));
    }
    lines.push(
        "- Cover: the behaviour the goal asks for, one failure case, and whatever the review \
         feedback asks to test."
            .to_owned(),
    );
    lines
}

fn risks(f: &Findings<'_>) -> Vec<String> {
    let mut risks = vec![
        "- This outline comes from matching words, not from understanding the code: confirm \
         that the files and steps are the right ones before approving."
            .to_owned(),
    ];
    if f.cut_short {
        risks.push("- Exploration stopped at the turn limit; the search may be incomplete.".into());
    }
    if !f.grep_offered {
        risks.push(
            "- No Grep tool was available: files were picked by their names only.".to_owned(),
        );
    }
    let missing: Vec<Term> = f
        .terms
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            f.evidence.counts.contains_key(&t.pattern)
                && !f.ranked.iter().any(|r| r.terms.contains(i))
        })
        .map(|(_, t)| t.clone())
        .collect();
    if !missing.is_empty() {
        risks.push(format!(
            "- Nothing in the repository mentions {}: it may be named differently, or the change \
             has to introduce it.",
            term_list(&missing)
        ));
    }
    if f.ranked.len() > 2 * MAX_INSPECTED {
        risks.push(format!(
            "- The terms are common ({} files match): the change may reach beyond the files \
             listed here.",
            f.ranked.len()
        ));
    }
    if f.manifests.len() > 1 {
        let shown: Vec<String> = f.manifests.iter().take(5).map(|m| code(m)).collect();
        risks.push(format!(
            "- Several build manifests ({}): check which packages the change touches.",
            shown.join(", ")
        ));
    }
    let partial: Vec<String> = f
        .files
        .iter()
        .filter(|p| f.evidence.reads.get(*p).copied().unwrap_or(false))
        .map(|p| code(p))
        .collect();
    if !partial.is_empty() {
        risks.push(format!(
            "- Only the first {READ_LIMIT} lines of {} were read.",
            partial.join(", ")
        ));
    }
    risks.extend(
        f.evidence
            .errors
            .iter()
            .take(5)
            .map(|e| format!("- {e}; the plan may miss files.")),
    );
    let specific = match f.intent {
        Intent::Fix => "- A fix made without a failing test first may hide the root cause.",
        Intent::Remove | Intent::Refactor => {
            "- Callers outside the files listed may break: search again for every renamed or \
             removed name before finishing."
        }
        Intent::Perf => "- Optimising without measuring may not help, or may regress elsewhere.",
        Intent::Add => "- New behaviour needs defaults that keep existing users working.",
        Intent::Docs | Intent::Change => {
            "- The request is open to interpretation: agree on the expected result before coding."
        }
    };
    risks.push(specific.to_owned());
    risks
}

fn revision_section(revision: &Revision, first_step: usize) -> String {
    let feedback = if revision.feedback.trim().is_empty() {
        "> (no feedback given)".to_owned()
    } else {
        quote(&revision.feedback)
    };
    let last_step = first_step + revision.steps.len().saturating_sub(1);
    let range = if last_step > first_step {
        format!("Steps {first_step}–{last_step} address it.")
    } else {
        format!("Step {first_step} addresses it.")
    };
    let mut out = format!("Reviewer feedback:\n\n{feedback}\n\n{range}\n");
    if !revision.refs.is_empty() {
        out.push_str("\nRelated lines:\n\n");
        for r in &revision.refs {
            let location = format!("{}:{}", r.path, r.number);
            let _ = writeln!(
                out,
                "- {} — {}",
                code(&location),
                code(&clip(&r.text, SNIPPET_CHARS))
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_the_request() {
        let cases = [
            ("ultraplan: add rate limiting.", None, "Add rate limiting"),
            (
                "\n\n  fix   the\tlogin  crash\nmore text",
                None,
                "Fix the login crash",
            ),
            ("", Some("## Plan: cache results\n- a"), "Cache results"),
            ("", None, "Untitled request"),
            (
                "Ultraplan make the very long request title that goes on and on and on past \
                 the limit of the title",
                None,
                "Make the very long request title that goes on and on and on past the…",
            ),
        ];
        for (text, draft, want) in cases {
            let request = UserRequest {
                text: text.to_owned(),
                draft: draft.map(str::to_owned),
            };
            assert_eq!(summary(&request), want, "{text:?}");
        }
    }

    #[test]
    fn quotes_and_code_spans_are_safe() {
        assert_eq!(quote("a\n\nb"), "> a\n>\n> b");
        assert_eq!(code("x"), "`x`");
        assert_eq!(code("a `b`"), "`` a `b` ``");
    }
}
