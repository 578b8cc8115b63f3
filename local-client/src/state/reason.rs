//! How a watch ends, and the words the user sees for it.

use serde::{Deserialize, Serialize};

/// How the watch of a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The plan was approved; execution continues remotely.
    Approved,
    /// The plan was sent back to the terminal.
    Teleport,
    /// The watch failed; see the failure reason.
    Failed,
}

/// Why a watch failed (docs/ARCHITECTURE.md §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// The remote session ended on its own (a `result` with an error subtype).
    Terminated,
    /// The timeout passed while a plan waited for review.
    TimeoutPending,
    /// The timeout passed before any plan arrived.
    TimeoutNoPlan,
    /// An approval whose plan could not be read back.
    ExtractMarkerMissing,
    /// The server could not be reached, failed repeatedly, or refused a request.
    NetworkOrUnknown,
    /// The session was archived elsewhere, or the watcher was told to stop.
    Stopped,
}

impl FailureReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Terminated => "terminated",
            Self::TimeoutPending => "timeout_pending",
            Self::TimeoutNoPlan => "timeout_no_plan",
            Self::ExtractMarkerMissing => "extract_marker_missing",
            Self::NetworkOrUnknown => "network_or_unknown",
            Self::Stopped => "stopped",
        }
    }

    /// The message the user sees; `detail` adds what is known (a subtype, an error).
    pub fn message(self, detail: Option<&str>) -> String {
        let base = match self {
            Self::Terminated => "The remote session ended before a plan was approved",
            Self::TimeoutPending => {
                "Timed out waiting for your review: the plan was ready but nobody approved, \
                 rejected or teleported it"
            }
            Self::TimeoutNoPlan => "Timed out before the agent produced a plan",
            Self::ExtractMarkerMissing => {
                "The plan was approved, but the approval did not carry the plan text, so it \
                 cannot be used"
            }
            Self::NetworkOrUnknown => "Lost track of the session",
            Self::Stopped => "The session was stopped",
        };
        match detail.filter(|d| !d.is_empty()) {
            Some(detail) => format!("{base} ({detail})."),
            None => format!("{base}."),
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a teleported plan was taken up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Handled {
    /// Handed to the local coding command in this repository.
    ImplementHere,
    /// Handed to a fresh session of the local coding command.
    NewSession,
    /// Saved under `.ultraplan/plans/`.
    SaveToFile,
    /// Given to Claude Code through the `UserPromptSubmit` hook.
    Hook,
    /// Saved by `ultraplan pull`.
    Pull,
}

#[cfg(test)]
mod tests {
    use super::FailureReason;

    #[test]
    fn reasons_have_wire_names_and_messages() {
        let all = [
            (FailureReason::Terminated, "terminated"),
            (FailureReason::TimeoutPending, "timeout_pending"),
            (FailureReason::TimeoutNoPlan, "timeout_no_plan"),
            (
                FailureReason::ExtractMarkerMissing,
                "extract_marker_missing",
            ),
            (FailureReason::NetworkOrUnknown, "network_or_unknown"),
            (FailureReason::Stopped, "stopped"),
        ];
        for (reason, name) in all {
            assert_eq!(reason.as_str(), name);
            assert_eq!(serde_json::to_value(reason).unwrap(), name);
            assert!(reason.message(None).ends_with('.'));
        }
        assert_eq!(
            FailureReason::Terminated.message(Some("error_timeout")),
            "The remote session ended before a plan was approved (error_timeout)."
        );
    }
}
