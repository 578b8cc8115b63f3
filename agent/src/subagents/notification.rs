//! What a finished subagent reports: one `<task-notification>` (the `Task` call's result),
//! and `system` events the server counts agents by (`task_queued`, `task_started`,
//! `task_finished`, each with the Task tool_use id as `data.task_id`).

use serde_json::json;
use ultraplan_protocol::EventBody;
use ultraplan_protocol::events::SystemEvent;

use crate::tools::ToolOutput;

/// `system` event subtypes of the subagent lifecycle.
pub const QUEUED_SUBTYPE: &str = ultraplan_protocol::constants::TASK_QUEUED;
pub const STARTED_SUBTYPE: &str = ultraplan_protocol::constants::TASK_STARTED;
pub const FINISHED_SUBTYPE: &str = ultraplan_protocol::constants::TASK_FINISHED;

/// How a subagent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// It gave its final answer.
    Completed,
    /// A model error ended it.
    Failed,
    /// The harness stopped it (its turn limit).
    Killed,
}

impl TaskStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Killed => "killed",
        }
    }
}

/// A finished subagent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskReport {
    /// The Task tool_use id.
    pub task_id: String,
    pub description: String,
    /// The definition's name, or `fork`.
    pub agent_type: String,
    pub status: TaskStatus,
    /// Its final text (or the last it said, or why it failed).
    pub result: String,
    /// Why it did not complete, for the summary.
    pub reason: Option<String>,
    pub total_tokens: u64,
    pub tool_uses: u32,
    pub duration_ms: u64,
}

impl TaskReport {
    /// One line: who, and how it ended.
    pub fn summary(&self) -> String {
        let who = format!("Agent \"{}\" ({})", self.description, self.agent_type);
        let how = match self.status {
            TaskStatus::Completed => "completed".to_owned(),
            TaskStatus::Failed => "failed".to_owned(),
            TaskStatus::Killed => "was stopped".to_owned(),
        };
        match &self.reason {
            Some(reason) => format!("{who} {how}: {reason}"),
            None => format!("{who} {how}"),
        }
    }

    /// The notification text.
    pub fn render(&self) -> String {
        format!(
            "<task-notification>\n<task-id>{}</task-id>\n<status>{}</status>\n\
             <summary>{}</summary>\n<result>{}</result>\n<usage>total_tokens: {}\n\
             tool_uses: {}\nduration_ms: {}</usage>\n</task-notification>",
            self.task_id,
            self.status.as_str(),
            self.summary(),
            self.result.trim(),
            self.total_tokens,
            self.tool_uses,
            self.duration_ms
        )
    }

    /// The `Task` call's result: the notification; an error only when the subagent failed.
    pub fn output(&self) -> ToolOutput {
        ToolOutput {
            content: self.render(),
            is_error: self.status == TaskStatus::Failed,
        }
    }

    /// The `task_finished` event.
    pub fn event(&self) -> EventBody {
        system(
            FINISHED_SUBTYPE,
            self.summary(),
            json!({
                "task_id": self.task_id,
                "status": self.status.as_str(),
                "subagent_type": self.agent_type,
                "total_tokens": self.total_tokens,
                "tool_uses": self.tool_uses,
                "duration_ms": self.duration_ms,
            }),
        )
    }
}

/// The `task_queued` (`started == false`) or `task_started` event of a subagent.
pub fn lifecycle_event(
    started: bool,
    task_id: &str,
    description: &str,
    agent_type: &str,
) -> EventBody {
    let (subtype, verb) = if started {
        (STARTED_SUBTYPE, "started")
    } else {
        (QUEUED_SUBTYPE, "queued")
    };
    system(
        subtype,
        format!("Agent \"{description}\" ({agent_type}) {verb}"),
        json!({"task_id": task_id, "description": description, "subagent_type": agent_type}),
    )
}

fn system(subtype: &str, message: String, data: serde_json::Value) -> EventBody {
    EventBody::System(SystemEvent {
        subtype: subtype.to_owned(),
        message: Some(message),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(status: TaskStatus, reason: Option<&str>) -> TaskReport {
        TaskReport {
            task_id: "toolu_1".into(),
            description: "Map auth".into(),
            agent_type: "explore".into(),
            status,
            result: "  auth lives in src/auth.rs:1\n".into(),
            reason: reason.map(str::to_owned),
            total_tokens: 1234,
            tool_uses: 3,
            duration_ms: 450,
        }
    }

    #[test]
    fn notification_format() {
        let done = report(TaskStatus::Completed, None);
        assert_eq!(
            done.render(),
            "<task-notification>\n<task-id>toolu_1</task-id>\n<status>completed</status>\n\
             <summary>Agent \"Map auth\" (explore) completed</summary>\n\
             <result>auth lives in src/auth.rs:1</result>\n\
             <usage>total_tokens: 1234\ntool_uses: 3\nduration_ms: 450</usage>\n\
             </task-notification>"
        );
        assert!(!done.output().is_error);
        let failed = report(TaskStatus::Failed, Some("the model is unavailable"));
        assert!(failed.output().is_error);
        assert!(failed.render().contains(
            "<status>failed</status>\n<summary>Agent \"Map auth\" (explore) failed: the model"
        ));
        let killed = report(TaskStatus::Killed, Some("turn limit"));
        assert!(!killed.output().is_error);
        assert!(killed.render().contains("<status>killed</status>"));
        assert!(killed.summary().ends_with("was stopped: turn limit"));
    }

    #[test]
    fn lifecycle_events_carry_the_task_id() {
        let EventBody::System(finished) = report(TaskStatus::Completed, None).event() else {
            panic!("system")
        };
        assert_eq!(finished.subtype, FINISHED_SUBTYPE);
        assert_eq!(finished.data["task_id"], "toolu_1");
        assert_eq!(finished.data["tool_uses"], 3);
        for (started, subtype) in [(false, QUEUED_SUBTYPE), (true, STARTED_SUBTYPE)] {
            let EventBody::System(e) = lifecycle_event(started, "t", "d", "fork") else {
                panic!("system")
            };
            assert_eq!(
                (e.subtype.as_str(), &e.data["task_id"]),
                (subtype, &json!("t"))
            );
        }
    }
}
