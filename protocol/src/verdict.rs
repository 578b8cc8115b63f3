//! The verifier's verdict on an execution: `VERDICT: PASS | FAIL | PARTIAL` ending its report,
//! and the evidence before it (docs/ARCHITECTURE.md §6.6).

use serde::{Deserialize, Serialize};

/// The largest evidence text kept with a verdict.
pub const MAX_EVIDENCE_CHARS: usize = 16_000;

/// What the verifier concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "UPPERCASE")]
pub enum VerdictOutcome {
    /// The tests pass and the plan was carried out.
    Pass,
    /// A test fails, or the change does not do what the plan says.
    Fail,
    /// Some of the plan was done, or the tests could not all run.
    Partial,
}

impl VerdictOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictOutcome::Pass => "PASS",
            VerdictOutcome::Fail => "FAIL",
            VerdictOutcome::Partial => "PARTIAL",
        }
    }
}

/// A verdict and its evidence (commands run, exit codes, failing tests, plan steps not done).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verdict {
    pub verdict: VerdictOutcome,
    pub evidence: String,
}

/// The verdict a report ends with: its last line of the form `VERDICT: PASS` (any case,
/// optionally in Markdown bold or code), with the rest of the report as evidence. `None`
/// when no line gives a verdict.
pub fn parse_verdict(report: &str) -> Option<Verdict> {
    let lines: Vec<&str> = report.lines().collect();
    let (at, verdict) = lines
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, line)| verdict_of(line).map(|v| (i, v)))?;
    let evidence: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != at)
        .map(|(_, l)| *l)
        .collect();
    let evidence = evidence.join("\n").trim().to_owned();
    Some(Verdict {
        verdict,
        evidence: cap(evidence),
    })
}

fn verdict_of(line: &str) -> Option<VerdictOutcome> {
    let bare = line
        .trim()
        .trim_matches(|c| c == '*' || c == '`' || c == '#' || c == ' ');
    let (label, rest) = bare.split_once(':')?;
    if !label.trim().eq_ignore_ascii_case("verdict") {
        return None;
    }
    let word: String = rest
        .trim()
        .trim_matches(|c| c == '*' || c == '`')
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    match word.to_ascii_uppercase().as_str() {
        "PASS" => Some(VerdictOutcome::Pass),
        "FAIL" => Some(VerdictOutcome::Fail),
        "PARTIAL" => Some(VerdictOutcome::Partial),
        _ => None,
    }
}

fn cap(text: String) -> String {
    if text.chars().count() <= MAX_EVIDENCE_CHARS {
        return text;
    }
    let kept: String = text.chars().take(MAX_EVIDENCE_CHARS).collect();
    format!("{kept}\n… (evidence cut)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_verdict_line_counts() {
        use VerdictOutcome::*;
        let cases = [
            ("Ran tests.\nVERDICT: PASS", Some(Pass), "Ran tests."),
            ("**VERDICT: FAIL**\nmore", Some(Fail), "more"),
            ("verdict: partial — step 3 not done", Some(Partial), ""),
            ("`VERDICT: PASS`", Some(Pass), ""),
            ("## Verdict: FAIL", Some(Fail), ""),
            (
                "VERDICT: FAIL\nthen\nVERDICT: PASS",
                Some(Pass),
                "VERDICT: FAIL\nthen",
            ),
            ("The verdict is PASS", None, ""),
            ("VERDICT: MAYBE", None, ""),
            ("VERDICT: PASSING", None, ""),
            ("", None, ""),
        ];
        for (report, want, evidence) in cases {
            let got = parse_verdict(report);
            assert_eq!(got.as_ref().map(|v| v.verdict), want, "{report:?}");
            if let Some(v) = got {
                assert_eq!(v.evidence, evidence, "{report:?}");
            }
        }
    }

    #[test]
    fn evidence_is_capped_and_the_wire_form_is_upper_case() {
        let long = format!("{}\nVERDICT: PASS", "x".repeat(MAX_EVIDENCE_CHARS + 10));
        let v = parse_verdict(&long).expect("verdict");
        assert!(v.evidence.ends_with("(evidence cut)"));
        let verdict = Verdict {
            verdict: VerdictOutcome::Partial,
            evidence: "e".into(),
        };
        let json = serde_json::to_value(verdict).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"verdict": "PARTIAL", "evidence": "e"})
        );
    }
}
