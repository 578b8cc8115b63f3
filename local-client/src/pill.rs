//! The status line: the pill of a session with its elapsed time and token usage.

use std::time::Duration;

use time::OffsetDateTime;
use ultraplan_protocol::constants::{PILL_READY, PILL_WORKING};

use crate::state::{Outcome, SessionState};

/// `45s`, `2m 14s`, `1h 03m`.
pub fn format_elapsed(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        _ => format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// `950 tokens`, `12.3k tokens`, `1.2M tokens`.
pub fn format_tokens(n: u64) -> String {
    // Precision loss is irrelevant at one decimal.
    #[allow(clippy::cast_precision_loss)]
    let f = n as f64;
    match n {
        0..1000 => format!("{n} tokens"),
        1000..1_000_000 => format!("{:.1}k tokens", f / 1e3),
        _ => format!("{:.1}M tokens", f / 1e6),
    }
}

/// Whether a pending plan with `remaining` of a `timeout` left is near its limit (the rule the
/// review page follows too).
pub fn near_limit(timeout: Duration, remaining: Duration) -> bool {
    ultraplan_protocol::expiry::near_limit(timeout, remaining)
}

/// `expires in 4 min` (rounded up), `expires in 45 s` under a minute.
pub fn expires_in(remaining: Duration) -> String {
    format!(
        "expires in {}",
        ultraplan_protocol::expiry::time_left(remaining)
    )
}

/// The pill text, or the outcome once the watch ended.
pub fn pill(state: &SessionState) -> String {
    match state.outcome {
        None => state.pill.clone(),
        Some(Outcome::Approved) => format!("{PILL_READY} ultraplan approved"),
        Some(Outcome::Teleport) if state.handled.is_none() => {
            format!("{PILL_READY} ultraplan plan teleported")
        }
        Some(Outcome::Teleport) => format!("{PILL_READY} ultraplan plan taken up"),
        Some(Outcome::Failed) => format!(
            "{PILL_WORKING} ultraplan ended: {}",
            state.failure.map_or("unknown", |f| f.as_str())
        ),
    }
}

/// One line: pill · elapsed · tokens (the last two when known).
pub fn status_line(state: &SessionState, now: OffsetDateTime) -> String {
    let mut parts = vec![pill(state)];
    if let Some(secs) = state.elapsed_secs(now) {
        parts.push(format_elapsed(secs));
    }
    if let Some(usage) = state.usage.filter(|u| u.total() > 0) {
        parts.push(format_tokens(usage.total()));
    }
    if let Some(agents) = state.agents.filter(|a| a.total > 0) {
        parts.push(ultraplan_protocol::activity::summary(
            agents,
            state.tool_calls,
        ));
    }
    parts.join(" · ")
}

/// What the user should know or do next, for a finished watch.
pub fn outcome_hint(state: &SessionState) -> Option<String> {
    let id = &state.session_id;
    match state.outcome? {
        Outcome::Approved => Some(format!(
            "The plan was approved; the agent implements it remotely. Follow it at {}, and \
             apply its patch with `ultraplan pull {id}`.",
            state.url
        )),
        Outcome::Teleport if state.handled.is_none() => Some(format!(
            "The plan was teleported back: run `ultraplan` to choose how to implement it, or \
             `ultraplan pull {id}` to save it."
        )),
        Outcome::Teleport => state
            .plan_file
            .as_ref()
            .map(|p| format!("The plan was saved to {}", p.display())),
        Outcome::Failed => match (&state.failure_message, &state.plan_file) {
            (Some(message), Some(path)) => Some(format!(
                "{message} The last plan was saved to {}",
                path.display()
            )),
            (None, Some(path)) => Some(format!("The last plan was saved to {}", path.display())),
            (message, None) => message.clone(),
        },
    }
}

/// What remote execution has reached, for `status`.
pub fn execution_line(id: &str, execution: &ultraplan_protocol::patch::Execution) -> String {
    use ultraplan_protocol::patch::ExecutionState;
    match (execution.state, &execution.patch) {
        (ExecutionState::Executing, _) => {
            "Remote execution: the agent is implementing the plan.".to_owned()
        }
        (ExecutionState::Finished, Some(patch)) if patch.is_empty() => {
            "Remote execution finished with no changes.".to_owned()
        }
        (ExecutionState::Finished, Some(patch)) => {
            let verdict = patch.verdict.as_ref().map(|v| {
                let first = v.evidence.lines().map(str::trim).find(|l| !l.is_empty());
                let first = first.map(crate::sanitize::line).unwrap_or_default();
                let sep = if first.is_empty() { "" } else { " — " };
                format!("\nVerification: {}{sep}{first}", v.verdict.as_str())
            });
            format!(
                "Patch ready: {}. Apply it with `ultraplan pull {id}`.{}",
                patch.headline(),
                verdict.unwrap_or_default()
            )
        }
        (ExecutionState::Finished, None) => {
            "Remote execution ended without a patch; the session log says why.".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::FailureReason;
    use ultraplan_protocol::model::Usage;

    #[test]
    fn elapsed_and_tokens_read_well() {
        assert_eq!(format_elapsed(5), "5s");
        assert_eq!(format_elapsed(134), "2m 14s");
        assert_eq!(format_elapsed(3780), "1h 03m");
        assert_eq!(format_tokens(950), "950 tokens");
        assert_eq!(format_tokens(12_345), "12.3k tokens");
        assert_eq!(format_tokens(1_250_000), "1.2M tokens");
    }

    #[test]
    fn status_line_shows_pill_elapsed_and_tokens() {
        let mut s = SessionState::new("s", "h", "u", "t");
        s.started_at = "2026-01-01T00:00:00Z".into();
        let now = OffsetDateTime::parse(
            "2026-01-01T00:02:14Z",
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        assert_eq!(status_line(&s, now), "◇ ultraplan · 2m 14s");
        s.pill = "◆ ultraplan ready".into();
        s.usage = Some(Usage {
            input_tokens: 12_000,
            output_tokens: 300,
            ..Usage::default()
        });
        assert_eq!(
            status_line(&s, now),
            "◆ ultraplan ready · 2m 14s · 12.3k tokens"
        );
        s.agents = Some(ultraplan_protocol::activity::AgentCounts {
            total: 4,
            done: 4,
            ..Default::default()
        });
        s.tool_calls = 17;
        assert_eq!(
            status_line(&s, now),
            "◆ ultraplan ready · 2m 14s · 12.3k tokens · 4 agents · 17 tool calls"
        );
        s.outcome = Some(Outcome::Failed);
        s.failure = Some(FailureReason::TimeoutNoPlan);
        assert!(status_line(&s, now).starts_with("◇ ultraplan ended: timeout_no_plan"));
    }

    #[test]
    fn the_warning_comes_in_the_last_fifth_or_five_minutes() {
        let s = Duration::from_secs;
        // (timeout, remaining, warn)
        let table = [
            (s(1800), s(301), false),
            (s(1800), s(300), true),
            (s(1800), s(1), true),
            (s(1800), s(0), false),
            (s(600), s(121), false),
            (s(600), s(120), true),
            (s(20), s(5), false),
            (s(20), s(4), true),
            (s(86_400), s(3600), false),
        ];
        for (timeout, remaining, warn) in table {
            assert_eq!(
                near_limit(timeout, remaining),
                warn,
                "{timeout:?} {remaining:?}"
            );
        }
        assert_eq!(expires_in(Duration::from_millis(3_200)), "expires in 4 s");
        assert_eq!(expires_in(s(59)), "expires in 59 s");
        assert_eq!(expires_in(s(60)), "expires in 1 min");
        assert_eq!(expires_in(s(181)), "expires in 4 min");
    }

    #[test]
    fn a_timed_out_plan_says_where_it_was_saved() {
        let mut s = SessionState::new("s", "h", "u", "t");
        s.outcome = Some(Outcome::Failed);
        s.failure = Some(FailureReason::TimeoutPending);
        let table = [
            (Some("Timed out."), None, Some("Timed out.")),
            (
                Some("Timed out."),
                Some("/r/.ultraplan/plans/s.md"),
                Some("Timed out. The last plan was saved to /r/.ultraplan/plans/s.md"),
            ),
            (
                None,
                Some("/r/p.md"),
                Some("The last plan was saved to /r/p.md"),
            ),
            (None, None, None),
        ];
        for (message, file, want) in table {
            s.failure_message = message.map(str::to_owned);
            s.plan_file = file.map(Into::into);
            assert_eq!(outcome_hint(&s).as_deref(), want);
        }
    }

    #[test]
    fn execution_lines() {
        use ultraplan_protocol::patch::{
            Execution, ExecutionState, FileChange, PatchFile, PatchSummary,
        };
        let file = PatchFile {
            path: "a".into(),
            change: FileChange::Added,
            additions: 2,
            deletions: 0,
            binary: false,
        };
        let summary = |files: Vec<PatchFile>| PatchSummary {
            additions: files.iter().map(|f| f.additions).sum(),
            files,
            ..PatchSummary::default()
        };
        let cases = [
            (
                ExecutionState::Executing,
                None,
                "Remote execution: the agent is implementing the plan.",
            ),
            (
                ExecutionState::Finished,
                Some(summary(vec![])),
                "Remote execution finished with no changes.",
            ),
            (
                ExecutionState::Finished,
                Some(summary(vec![file])),
                "Patch ready: 1 file changed, +2 −0. Apply it with `ultraplan pull s1`.",
            ),
            (
                ExecutionState::Finished,
                None,
                "Remote execution ended without a patch; the session log says why.",
            ),
        ];
        for (state, patch, want) in cases {
            assert_eq!(execution_line("s1", &Execution { state, patch }), want);
        }
    }
}
