//! An execution resumed on a runner whose writable copy is fresh from the bundle: the runner
//! that held it was lost with its copy, so the edits the log records are not in this one. The
//! agent then starts the execution over from the approval, rather than resume a transcript
//! that claims edits its tree does not hold (docs/ARCHITECTURE.md §5.3).

use ultraplan_protocol::events::EventBody;

/// The `system` note that marks the start of an execution in the log.
pub const EXECUTION_STARTED: &str = "execution_started";
/// The `system` note that says an execution starts over on a fresh copy.
pub const EXECUTION_RESTARTED: &str = "execution_restarted";

/// The transcript an execution on a fresh copy restarts from: everything up to the note that
/// the execution started. `None` when the executing agent had done nothing yet (nothing to
/// lose, so nothing to cut) or the log has no such note.
pub fn restart_point(transcript: &[EventBody]) -> Option<Vec<EventBody>> {
    let started = transcript.iter().rposition(is_execution_started)?;
    let worked = transcript[started + 1..]
        .iter()
        .any(|e| matches!(e, EventBody::Assistant(_)) && e.parent_tool_use_id().is_none());
    worked.then(|| transcript[..=started].to_vec())
}

/// Whether `event` is the note that an execution started.
pub fn is_execution_started(event: &EventBody) -> bool {
    matches!(event, EventBody::System(s) if s.subtype == EXECUTION_STARTED)
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::events::{ContentBlock, SystemEvent};

    use super::*;

    fn note(subtype: &str) -> EventBody {
        EventBody::System(SystemEvent {
            subtype: subtype.to_owned(),
            message: None,
            data: serde_json::Value::Null,
        })
    }

    fn said(text: &str) -> EventBody {
        EventBody::assistant(vec![ContentBlock::Text {
            text: text.to_owned(),
            cache_control: None,
        }])
    }

    #[test]
    fn the_cut_falls_after_the_execution_note_once_the_agent_worked() {
        let plan = vec![EventBody::user_text("do it"), said("plan")];
        let started = [plan.clone(), vec![note(EXECUTION_STARTED)]].concat();
        let worked = [
            started.clone(),
            vec![said("editing"), EventBody::tool_result("t1", "ok", false)],
        ]
        .concat();
        let cases: [(&str, &[EventBody], Option<usize>); 4] = [
            ("no execution yet", &plan, None),
            ("nothing done since the start", &started, None),
            ("edits since the start", &worked, Some(started.len())),
            (
                "restarted before: still cut at the execution's start",
                &[
                    worked.clone(),
                    vec![note(EXECUTION_RESTARTED), said("again")],
                ]
                .concat(),
                Some(started.len()),
            ),
        ];
        for (name, transcript, want) in cases {
            let got = restart_point(transcript).map(|t| t.len());
            assert_eq!(got, want, "{name}");
        }
    }
}
