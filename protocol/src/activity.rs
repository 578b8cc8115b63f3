//! Agent activity of a session: subagents by state and tool calls, folded from the event log
//! (the agent's `task_queued` / `task_started` / `task_finished` system events and every
//! tool_use block). Pure, so the server, the pages and the client count alike.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::constants::{TASK_FINISHED, TASK_QUEUED, TASK_STARTED};
use crate::events::{ContentBlock, EventBody};

/// Where one subagent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Waiting,
    Working,
    Done,
    Failed,
}

/// Subagents by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentCounts {
    pub total: u32,
    pub waiting: u32,
    pub working: u32,
    pub done: u32,
    pub failed: u32,
}

/// The running fold over a session's events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    /// Subagents by Task tool_use id; the latest event wins.
    #[serde(default)]
    pub tasks: BTreeMap<String, TaskState>,
    /// tool_use blocks of the main agent and subagents, Task calls excluded.
    #[serde(default)]
    pub tool_calls: u64,
}

const TASK_TOOLS: [&str; 2] = ["Task", "Agent"];

impl Activity {
    /// Whether the event changes the activity (so storage can skip the rest).
    pub fn touches(body: &EventBody) -> bool {
        match body {
            EventBody::Assistant(a) => a
                .message
                .content
                .iter()
                .any(|b| matches!(b, ContentBlock::ToolUse { .. })),
            EventBody::System(s) => {
                [TASK_QUEUED, TASK_STARTED, TASK_FINISHED].contains(&s.subtype.as_str())
            }
            _ => false,
        }
    }

    /// Fold one event in.
    pub fn apply(&mut self, body: &EventBody) {
        match body {
            EventBody::Assistant(a) => {
                let calls = a.message.content.iter().filter(|b| {
                    matches!(b, ContentBlock::ToolUse { name, .. } if !TASK_TOOLS.contains(&name.as_str()))
                });
                self.tool_calls += calls.count() as u64;
            }
            EventBody::System(s) => {
                let Some(task_id) = s.data.get("task_id").and_then(|v| v.as_str()) else {
                    return;
                };
                let state = match s.subtype.as_str() {
                    TASK_QUEUED => TaskState::Waiting,
                    TASK_STARTED => TaskState::Working,
                    TASK_FINISHED => match s.data.get("status").and_then(|v| v.as_str()) {
                        Some("completed") => TaskState::Done,
                        _ => TaskState::Failed,
                    },
                    _ => return,
                };
                self.tasks.insert(task_id.to_owned(), state);
            }
            _ => {}
        }
    }

    /// The subagents that have not finished count as stopped once no agent runs.
    pub fn stop_unfinished(&mut self) {
        for state in self.tasks.values_mut() {
            if matches!(state, TaskState::Waiting | TaskState::Working) {
                *state = TaskState::Failed;
            }
        }
    }

    /// Subagents by state.
    pub fn counts(&self) -> AgentCounts {
        let mut counts = AgentCounts::default();
        for state in self.tasks.values() {
            counts.total += 1;
            match state {
                TaskState::Waiting => counts.waiting += 1,
                TaskState::Working => counts.working += 1,
                TaskState::Done => counts.done += 1,
                TaskState::Failed => counts.failed += 1,
            }
        }
        counts
    }
}

/// "N agents · M tool calls", as the terminal shows it.
pub fn summary(counts: AgentCounts, tool_calls: u64) -> String {
    let agents = if counts.total == 1 { "agent" } else { "agents" };
    let calls = if tool_calls == 1 {
        "tool call"
    } else {
        "tool calls"
    };
    format!("{} {agents} · {tool_calls} {calls}", counts.total)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::events::SystemEvent;

    fn task(subtype: &str, id: &str, status: Option<&str>) -> EventBody {
        let mut data = json!({ "task_id": id });
        if let Some(status) = status {
            data["status"] = json!(status);
        }
        EventBody::System(SystemEvent {
            subtype: subtype.to_owned(),
            message: None,
            data,
        })
    }

    fn calls(names: &[&str]) -> EventBody {
        EventBody::assistant(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| ContentBlock::tool_use(format!("t{i}"), *n, json!({})))
                .collect(),
        )
    }

    #[test]
    fn folds_tasks_and_tool_calls() {
        let events = [
            calls(&["Task", "Task", "Agent"]),
            task(TASK_QUEUED, "a", None),
            task(TASK_STARTED, "b", None),
            task(TASK_STARTED, "c", None),
            calls(&["Grep", "Read"]),
            task(TASK_STARTED, "a", None),
            task(TASK_FINISHED, "b", Some("completed")),
            task(TASK_FINISHED, "c", Some("failed")),
            calls(&["Glob"]),
            EventBody::user_text("not counted"),
        ];
        let mut activity = Activity::default();
        for e in &events {
            assert_eq!(Activity::touches(e), !matches!(e, EventBody::User(_)));
            activity.apply(e);
        }
        let counts = activity.counts();
        assert_eq!(
            (
                counts.total,
                counts.waiting,
                counts.working,
                counts.done,
                counts.failed
            ),
            (3, 0, 1, 1, 1)
        );
        assert_eq!(activity.tool_calls, 3);
        assert_eq!(
            summary(counts, activity.tool_calls),
            "3 agents · 3 tool calls"
        );
        activity.stop_unfinished();
        assert_eq!(activity.counts().failed, 2);
        assert_eq!(summary(AgentCounts::default(), 1), "0 agents · 1 tool call");
    }
}
