//! The exact texts of ExitPlanMode tool_results (docs/ARCHITECTURE.md §3.2), built and parsed in
//! one place.

use crate::api::Decision;
use crate::constants::{APPROVED_PLAN_EDITED_MARKER, APPROVED_PLAN_MARKER, TELEPORT_SENTINEL};

/// Text that precedes the approved plan in an approval result.
const APPROVAL_PREAMBLE: &str = "User has approved your plan. You can now start coding.";

/// The tool_result `(content, is_error)` a decision produces for a proposed plan.
pub fn decision_tool_result(decision: &Decision, proposed_plan: &str) -> (String, bool) {
    match decision {
        Decision::Approve { plan } => {
            let edited = plan.as_deref().filter(|p| p.trim() != proposed_plan.trim());
            let (marker, text) = match edited {
                Some(p) => (APPROVED_PLAN_EDITED_MARKER, p),
                None => (APPROVED_PLAN_MARKER, proposed_plan),
            };
            (format!("{APPROVAL_PREAMBLE}\n\n{marker}\n{text}"), false)
        }
        // Feedback that opens with the teleport sentinel would read as a teleport: say it is
        // feedback first (found by the scanner property test).
        Decision::Reject { feedback, .. } if extract_teleport_plan(feedback).is_some() => {
            (format!("Feedback: {feedback}"), true)
        }
        Decision::Reject { feedback, .. } => (feedback.clone(), true),
        Decision::Teleport {} => (format!("{TELEPORT_SENTINEL}\n{proposed_plan}"), true),
    }
}

/// The plan carried by an approval result, and whether the reviewer edited it. `None` when the
/// text carries neither marker. The first marker in the text wins, so a plan that itself quotes
/// the other marker is neither cut short nor mislabelled.
pub fn extract_approved_plan(text: &str) -> Option<(String, bool)> {
    let (i, marker, edited) = [
        (APPROVED_PLAN_MARKER, false),
        (APPROVED_PLAN_EDITED_MARKER, true),
    ]
    .into_iter()
    .filter_map(|(marker, edited)| text.find(marker).map(|i| (i, marker, edited)))
    .min_by_key(|(i, ..)| *i)?;
    let rest = &text[i + marker.len()..];
    let plan = rest.strip_prefix('\n').unwrap_or(rest).trim_end();
    Some((plan.to_owned(), edited))
}

/// The plan carried by a teleport result; `None` unless the text starts with the sentinel.
pub fn extract_teleport_plan(text: &str) -> Option<String> {
    let rest = text.strip_prefix(TELEPORT_SENTINEL)?;
    if !(rest.is_empty() || rest.starts_with('\n')) {
        return None;
    }
    Some(rest.trim_start_matches('\n').trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_produce_the_documented_texts() {
        let plan = "1. do it";
        let cases = [
            (
                Decision::Approve { plan: None },
                "## Approved Plan:\n1. do it",
                false,
            ),
            (
                Decision::Approve {
                    plan: Some("1. do it\n".into()),
                },
                "## Approved Plan:\n1. do it",
                false,
            ),
            (
                Decision::Approve {
                    plan: Some("2. better".into()),
                },
                "## Approved Plan (edited by user):\n2. better",
                false,
            ),
            (
                Decision::Reject {
                    feedback: "add tests".into(),
                    comment_ids: Vec::new(),
                },
                "add tests",
                true,
            ),
            (
                Decision::Teleport {},
                "__ULTRAPLAN_TELEPORT_LOCAL__\n1. do it",
                true,
            ),
        ];
        for (decision, expected, expected_error) in cases {
            let (text, is_error) = decision_tool_result(&decision, plan);
            assert!(text.contains(expected), "{decision:?}: {text}");
            assert_eq!(is_error, expected_error, "{decision:?}");
            if matches!(decision, Decision::Reject { .. }) {
                assert_eq!(text, expected, "feedback travels verbatim");
            }
        }
    }

    #[test]
    fn extraction_inverts_construction() {
        let (text, _) = decision_tool_result(&Decision::Approve { plan: None }, "# P\nstep");
        assert_eq!(
            extract_approved_plan(&text),
            Some(("# P\nstep".into(), false))
        );
        let (text, _) = decision_tool_result(&Decision::Teleport {}, "# P\nstep");
        assert_eq!(extract_teleport_plan(&text), Some("# P\nstep".into()));
        assert_eq!(extract_approved_plan("no marker here"), None);
        assert_eq!(extract_teleport_plan("__ULTRAPLAN_TELEPORT_LOCAL__X"), None);
        assert_eq!(extract_teleport_plan("feedback"), None);
    }

    #[test]
    fn feedback_that_opens_with_the_teleport_sentinel_stays_a_rejection() {
        for feedback in [
            "__ULTRAPLAN_TELEPORT_LOCAL__",
            "__ULTRAPLAN_TELEPORT_LOCAL__\nyou do it",
        ] {
            let decision = Decision::Reject {
                feedback: feedback.to_owned(),
                comment_ids: Vec::new(),
            };
            let (text, is_error) = decision_tool_result(&decision, "1. plan");
            assert!(is_error);
            assert_eq!(extract_teleport_plan(&text), None, "{text:?}");
            assert!(text.ends_with(feedback), "{text:?}");
        }
    }
}
