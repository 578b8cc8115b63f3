//! Human formatting of counts, ages and durations, and the status pill.

use ultraplan_protocol::derive_phase;
use ultraplan_protocol::patch::ExecutionState;
use ultraplan_protocol::session::{Phase, SessionStatus};

pub use ultraplan_protocol::usage::thousands;

/// `12345` → `12.3k`, `2500000` → `2.5M`.
pub fn short(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// How long ago `then_ms` was at `now_ms`.
pub fn age(now_ms: i64, then_ms: i64) -> String {
    let s = (now_ms - then_ms).max(0) / 1000;
    match s {
        0..=44 => "just now".to_owned(),
        45..=3_599 => format!("{} min ago", (s + 30) / 60),
        3_600..=86_399 => format!("{} h ago", s / 3_600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// A duration: `45 s`, `12 min 5 s`, `2 h 3 min`.
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s} s"),
        60..=3_599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3_600, (s % 3_600) / 60),
    }
}

/// The status pill of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pill {
    /// CSS modifier.
    pub class: &'static str,
    pub label: &'static str,
}

/// What the pill says: failed when the last `result` was not a success, then executed once
/// remote execution finished, then archived, then executing while the approved plan is
/// implemented, then the same phases the terminal shows.
pub fn pill(
    status: SessionStatus,
    pending_plan: bool,
    last_result: Option<&str>,
    execution: Option<ExecutionState>,
) -> Pill {
    if last_result.is_some_and(|s| s != "success") {
        return Pill {
            class: "failed",
            label: "failed",
        };
    }
    if execution == Some(ExecutionState::Finished) {
        return Pill {
            class: "executed",
            label: "◆ executed",
        };
    }
    if status == SessionStatus::Archived {
        return Pill {
            class: "archived",
            label: "archived",
        };
    }
    if execution == Some(ExecutionState::Executing) {
        return Pill {
            class: "executing",
            label: "◇ executing",
        };
    }
    match derive_phase(status, pending_plan, false) {
        Phase::PlanReady => Pill {
            class: "ready",
            label: "◆ ready",
        },
        Phase::NeedsInput => Pill {
            class: "input",
            label: "◇ needs input",
        },
        Phase::Running => Pill {
            class: "running",
            label: "◇ running",
        },
        Phase::Ended => Pill {
            class: "archived",
            label: "archived",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        let cases = [
            (0, "0", "0"),
            (999, "999", "999"),
            (12_345, "12,345", "12.3k"),
            (2_500_000, "2,500,000", "2.5M"),
        ];
        for (n, long, brief) in cases {
            assert_eq!((thousands(n).as_str(), short(n).as_str()), (long, brief));
        }
    }

    #[test]
    fn times_read_well() {
        assert_eq!(age(100_000, 90_000), "just now");
        assert_eq!(age(10 * 60_000, 0), "10 min ago");
        assert_eq!(age(3 * 3_600_000, 0), "3 h ago");
        assert_eq!(age(50 * 3_600_000, 0), "2 d ago");
        assert_eq!(duration(45_500), "45 s");
        assert_eq!(duration(725_000), "12 min 5 s");
        assert_eq!(duration(7_380_000), "2 h 3 min");
    }

    #[test]
    fn pills_follow_status() {
        use ExecutionState::{Executing, Finished};
        use SessionStatus::*;
        let cases = [
            (Running, false, None, None, "◇ running"),
            (RequiresAction, true, None, None, "◆ ready"),
            (RequiresAction, false, None, None, "◇ needs input"),
            (Idle, false, Some("success"), None, "◇ needs input"),
            (Archived, false, Some("success"), None, "archived"),
            (Archived, false, Some("error_timeout"), None, "failed"),
            (Idle, true, Some("error_during_execution"), None, "failed"),
            (
                Running,
                false,
                Some("success"),
                Some(Executing),
                "◇ executing",
            ),
            (Idle, false, Some("success"), Some(Executing), "◇ executing"),
            (Archived, false, None, Some(Executing), "archived"),
            (Idle, false, Some("success"), Some(Finished), "◆ executed"),
            (
                Archived,
                false,
                Some("success"),
                Some(Finished),
                "◆ executed",
            ),
            (
                Idle,
                false,
                Some("error_during_execution"),
                Some(Finished),
                "failed",
            ),
        ];
        for (status, pending, last, execution, want) in cases {
            let got = pill(status, pending, last, execution).label;
            assert_eq!(got, want, "{status:?} {execution:?}");
        }
    }
}
