//! The verifier's verdict before a patch is applied: said first, and a FAIL is applied only
//! when the person confirms (at a terminal) or passed `--yes` (docs/ARCHITECTURE.md §6.6).

use ultraplan::sanitize;
use ultraplan_protocol::verdict::{Verdict, VerdictOutcome};

use crate::cmd::ui;

/// What to do about the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Apply,
    /// The person declined, or nobody could be asked: nothing is changed.
    Refuse,
}

/// The line that says the verdict: `Verification: FAIL — test_greet fails`.
pub fn line(verdict: &Verdict) -> String {
    let first = verdict
        .evidence
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(sanitize::line);
    match first {
        Some(first) => format!("Verification: {} — {first}", verdict.verdict.as_str()),
        None => format!("Verification: {}", verdict.verdict.as_str()),
    }
}

/// Whether the verdict lets the patch be applied: anything but FAIL does; a FAIL does with
/// `yes`, or when a person at a terminal says so. Pure but for the question.
pub fn gate(verdict: Option<&Verdict>, yes: bool, dry_run: bool, id: &str) -> anyhow::Result<Gate> {
    let Some(verdict) = verdict.filter(|v| v.verdict == VerdictOutcome::Fail) else {
        return Ok(Gate::Apply);
    };
    if yes || dry_run {
        return Ok(Gate::Apply);
    }
    if ui::interactive() {
        let question = "The verifier says this execution FAILS. Apply its patch anyway?";
        return Ok(if ui::confirm(question)? {
            Gate::Apply
        } else {
            Gate::Refuse
        });
    }
    let evidence = sanitize::text(&verdict.evidence);
    eprintln!(
        "The verifier's verdict on session {id} is FAIL:\n{}\n\nNothing was changed. Review the \
         evidence (`ultraplan logs {id}`), then run `ultraplan pull {id} --yes` to apply the \
         patch anyway.",
        evidence.trim_end()
    );
    Ok(Gate::Refuse)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(outcome: VerdictOutcome, evidence: &str) -> Verdict {
        Verdict {
            verdict: outcome,
            evidence: evidence.to_owned(),
        }
    }

    #[test]
    fn the_line_names_the_verdict_and_its_first_evidence() {
        let cases = [
            (
                VerdictOutcome::Pass,
                "\n  ran tests: ok\nmore",
                "Verification: PASS — ran tests: ok",
            ),
            (VerdictOutcome::Fail, "", "Verification: FAIL"),
            (
                VerdictOutcome::Partial,
                "\x1b[31mred\x1b[0m",
                "Verification: PARTIAL — red",
            ),
        ];
        for (outcome, evidence, want) in cases {
            assert_eq!(line(&verdict(outcome, evidence)), want);
        }
    }

    #[test]
    fn only_an_unconfirmed_fail_refuses() {
        let fail = verdict(VerdictOutcome::Fail, "test_greet fails");
        let pass = verdict(VerdictOutcome::Pass, "ok");
        // Tests never run at a terminal, so the FAIL without --yes is refused, not asked.
        let cases = [
            (None, false, false, Gate::Apply),
            (Some(&pass), false, false, Gate::Apply),
            (Some(&fail), true, false, Gate::Apply),
            (Some(&fail), false, true, Gate::Apply),
            (Some(&fail), false, false, Gate::Refuse),
        ];
        for (verdict, yes, dry_run, want) in cases {
            assert_eq!(
                gate(verdict, yes, dry_run, "s1").unwrap(),
                want,
                "{verdict:?} {yes} {dry_run}"
            );
        }
    }
}
