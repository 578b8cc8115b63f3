//! Constants every part must agree on byte for byte.

/// Name of the tool the plan-mode agent calls to submit a plan for review.
pub const EXIT_PLAN_MODE_TOOL: &str = "ExitPlanMode";

/// Name of the tool the agent calls to ask the user a question.
pub const ASK_USER_QUESTION_TOOL: &str = "AskUserQuestion";

/// What a main-agent tool_use that leaves the session waiting on the user waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserWait {
    /// An [`EXIT_PLAN_MODE_TOOL`] call: the reviewer approves or rejects the plan.
    Decision,
    /// An [`ASK_USER_QUESTION_TOOL`] call: the user answers the question.
    Question,
}

impl UserWait {
    /// What a main-agent call of `tool_name` waits on the user for; `None` for every tool that
    /// does not wait on the user. Subagent calls never wait on the user, whatever their name.
    pub fn of_tool(tool_name: &str) -> Option<UserWait> {
        match tool_name {
            EXIT_PLAN_MODE_TOOL => Some(UserWait::Decision),
            ASK_USER_QUESTION_TOOL => Some(UserWait::Question),
            _ => None,
        }
    }
}

/// Whether a main-agent call of `tool_name` leaves the session waiting on the user.
pub fn waits_on_user(tool_name: &str) -> bool {
    UserWait::of_tool(tool_name).is_some()
}

/// First line of an ExitPlanMode tool_result when the reviewer teleports the plan back to the
/// terminal. The plan follows on the next line.
pub const TELEPORT_SENTINEL: &str = "__ULTRAPLAN_TELEPORT_LOCAL__";

/// Marker that precedes the approved plan in the approval tool_result.
pub const APPROVED_PLAN_MARKER: &str = "## Approved Plan:";

/// Marker that precedes the approved plan when the reviewer edited it before approving.
pub const APPROVED_PLAN_EDITED_MARKER: &str = "## Approved Plan (edited by user):";

/// The only answer the agent gives after a teleport. The harness enforces it.
pub const TELEPORT_REPLY: &str = "Plan teleported. Return to your terminal to continue.";

/// The only answer the agent gives when the plan flow breaks on a tool error.
pub const PLAN_FLOW_INTERRUPTED_REPLY: &str =
    "Plan flow interrupted. Return to your terminal and retry.";

/// Hollow diamond: the session is working or waiting for input.
pub const PILL_WORKING: char = '◇';

/// Filled diamond: a plan is ready for review.
pub const PILL_READY: char = '◆';

/// Pill text for each phase as the terminal shows it.
pub const PILL_TEXT_RUNNING: &str = "◇ ultraplan";
/// Pill text when the session waits for the user.
pub const PILL_TEXT_NEEDS_INPUT: &str = "◇ ultraplan needs your input";
/// Pill text when a plan is ready.
pub const PILL_TEXT_READY: &str = "◆ ultraplan ready";

/// How often the client polls the events endpoint.
pub const POLL_INTERVAL_SECS: u64 = 3;

/// Consecutive transient failures (no response or 5xx) that end the client's poll.
pub const MAX_TRANSIENT_POLL_FAILURES: u32 = 5;

/// Default session timeout when the server flag is unset.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 1800;

/// Largest `limit` accepted by the events endpoint.
pub const MAX_EVENTS_PAGE: u32 = 100;

/// Longest `wait` (seconds) the events endpoint holds a request.
pub const MAX_EVENTS_WAIT_SECS: u64 = 25;

/// Version of the agent ↔ server frame protocol, sent in the first `hello` frame.
pub const FRAME_PROTOCOL_VERSION: u32 = 1;

/// Largest frame (one JSON line, newline excluded) either side accepts.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// `system` event subtype: a subagent waits for a free slot.
pub const TASK_QUEUED: &str = "task_queued";
/// `system` event subtype: a subagent started.
pub const TASK_STARTED: &str = "task_started";
/// `system` event subtype: a subagent finished (`data.status`: completed, failed, killed).
pub const TASK_FINISHED: &str = "task_finished";
/// `system` event subtype: an environment's setup started (`data`: key, commands, network,
/// secrets by name, timeout_seconds).
pub const ENVIRONMENT_SETUP: &str = "environment_setup";
/// `system` event subtype: lines of setup output (`message`: the lines; secrets masked).
pub const ENVIRONMENT_OUTPUT: &str = "environment_output";
/// `system` event subtype: setup succeeded (`data`: key, setup_ms, blocked).
pub const ENVIRONMENT_READY: &str = "environment_ready";
/// `system` event subtype: a cached environment was reused (`data`: key, built_at, setup_ms).
pub const ENVIRONMENT_REUSED: &str = "environment_reused";
/// `system` event subtype: setup failed or timed out (`data`: exit_code, timed_out, tail,
/// blocked, setup_ms); an `error_environment` result follows.
pub const ENVIRONMENT_FAILED: &str = "environment_failed";
/// `system` event subtype: the verifier's verdict on an execution (`data`: a
/// [`crate::verdict::Verdict`]); the patch result carries the last one.
pub const VERIFICATION: &str = "verification";
/// `subagent_type` of the read-only verifier the agent starts itself at the end of an
/// execution (its `Task` tool_use input carries `started_by`: [`HARNESS_STARTED_BY`]).
pub const VERIFIER_SUBAGENT_TYPE: &str = "verifier";
/// `started_by` in the input of a `Task` tool_use the agent emitted itself, not the model.
pub const HARNESS_STARTED_BY: &str = "ultraplan";
/// `result` subtype: the session ended because its environment could not be made ready.
pub const ERROR_ENVIRONMENT: &str = "error_environment";
/// `system` event subtype: a custom agent definition was invalid and skipped.
pub const AGENT_DEFINITION_INVALID: &str = "agent_definition_invalid";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plan_exits_and_questions_wait_on_the_user() {
        let cases = [
            ("ExitPlanMode", Some(UserWait::Decision)),
            ("AskUserQuestion", Some(UserWait::Question)),
            ("exitplanmode", None),
            ("AskUserQuestion ", None),
            ("TodoWrite", None),
            ("Task", None),
            ("Bash", None),
            ("", None),
        ];
        for (name, want) in cases {
            assert_eq!(UserWait::of_tool(name), want, "{name:?}");
            assert_eq!(waits_on_user(name), want.is_some(), "{name:?}");
        }
    }
}
