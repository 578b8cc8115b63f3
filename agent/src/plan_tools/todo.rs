//! `TodoWrite`: the model's own checklist, kept by the harness, with a reminder when it goes
//! stale.

use serde::Deserialize;
use serde_json::{Value, json};
use ultraplan_protocol::model::{Message, ToolDefinition};

use crate::conversation::tool_calls;
use crate::tools::{ToolOutput, object_tool, parse_input};

/// The tool's name as the model calls it.
pub const NAME: &str = "TodoWrite";
/// Assistant turns without a TodoWrite after which the model is reminded of its list.
pub const REMINDER_AFTER_TURNS: u32 = 3;
/// Most items a list may hold.
pub const MAX_ITEMS: usize = 100;

/// One item of the list.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    pub content: String,
    pub status: TodoStatus,
    #[serde(default, rename = "activeForm")]
    pub active_form: Option<String>,
}

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, expecting = "an object with a `todos` array")]
struct TodoInput {
    todos: Vec<TodoItem>,
}

/// The tool as offered to the model in plan mode.
pub fn definition() -> ToolDefinition {
    with_description(DESCRIPTION)
}

/// The tool as offered in execution mode, where it tracks the approved plan's steps.
pub fn execution_definition() -> ToolDefinition {
    with_description(EXECUTION_DESCRIPTION)
}

fn with_description(description: &str) -> ToolDefinition {
    object_tool(
        NAME,
        description,
        json!({
            "todos": {
                "type": "array",
                "description": "The complete list; it replaces the previous one.",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1,
                            "description": "What to do, in the imperative."},
                        "status": {"type": "string",
                            "enum": ["pending", "in_progress", "completed"]},
                        "activeForm": {"type": "string",
                            "description": "Present-continuous form shown while in progress."}
                    },
                    "required": ["content", "status"],
                    "additionalProperties": false
                }
            }
        }),
        &["todos"],
    )
}

const DESCRIPTION: &str = "Keep a checklist of your own investigation and planning work. Each \
call replaces the whole list. Use it when the task has several parts: add the items you intend \
to cover, keep exactly one item in_progress while you work on it, and mark items completed as \
soon as they are done. Skip it for trivial requests. The list is for tracking your work; the \
plan itself goes to ExitPlanMode.";

const EXECUTION_DESCRIPTION: &str = "Keep the checklist of the approved plan's steps while you \
implement them. Each call replaces the whole list. Before changing anything, add one item per \
plan step (plus any extra work you discover); keep exactly one item in_progress while you work \
on it, and mark items completed as soon as they are done, so progress is visible.";

/// The list and how long ago it was last written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TodoState {
    items: Vec<TodoItem>,
    turns_since_update: u32,
}

impl TodoState {
    /// The state after replaying every TodoWrite call of a history.
    pub fn replay(messages: &[Message]) -> Self {
        let mut state = TodoState::default();
        for message in messages {
            let calls = tool_calls(message);
            let writes: Vec<_> = calls.iter().filter(|c| c.name == NAME).collect();
            if message.role == ultraplan_protocol::events::Role::Assistant {
                state.on_assistant_turn(!writes.is_empty());
            }
            for call in writes {
                state.apply(call.input.clone());
            }
        }
        state
    }

    /// The current items.
    pub fn items(&self) -> &[TodoItem] {
        &self.items
    }

    /// Runs one TodoWrite call.
    pub fn apply(&mut self, input: Value) -> ToolOutput {
        let parsed: TodoInput = match parse_input(NAME, input) {
            Ok(parsed) => parsed,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        if let Some(problem) = check(&parsed.todos) {
            return ToolOutput::error(format!("Invalid input for {NAME}: {problem}"));
        }
        self.items = parsed.todos;
        self.turns_since_update = 0;
        ToolOutput::ok(self.summary())
    }

    /// Counts an assistant turn; `wrote` when it called TodoWrite.
    pub fn on_assistant_turn(&mut self, wrote: bool) {
        if wrote {
            self.turns_since_update = 0;
        } else {
            self.turns_since_update += 1;
        }
    }

    /// A reminder when the list has open items and went [`REMINDER_AFTER_TURNS`] turns
    /// without an update; giving it restarts the count.
    pub fn take_reminder(&mut self) -> Option<String> {
        let open = self.items.iter().any(|i| i.status != TodoStatus::Completed);
        if !open || self.turns_since_update < REMINDER_AFTER_TURNS {
            return None;
        }
        self.turns_since_update = 0;
        Some(format!(
            "<system-reminder>\nYour todo list has not been updated for a few turns. If your \
             progress changed, call TodoWrite with the updated list (mark finished items \
             completed). Ignore this if it is current. Current list:\n{}\n</system-reminder>",
            self.render()
        ))
    }

    fn render(&self) -> String {
        self.items
            .iter()
            .map(|item| {
                let mark = match item.status {
                    TodoStatus::Pending => "[ ]",
                    TodoStatus::InProgress => "[~]",
                    TodoStatus::Completed => "[x]",
                };
                format!("{mark} {}", item.content)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn summary(&self) -> String {
        let count = |s| self.items.iter().filter(|i| i.status == s).count();
        format!(
            "Todo list updated: {} in progress, {} pending, {} completed. Keep it current as \
             you work.",
            count(TodoStatus::InProgress),
            count(TodoStatus::Pending),
            count(TodoStatus::Completed)
        )
    }
}

fn check(items: &[TodoItem]) -> Option<String> {
    if items.len() > MAX_ITEMS {
        return Some(format!("at most {MAX_ITEMS} items, got {}", items.len()));
    }
    items
        .iter()
        .position(|i| i.content.trim().is_empty())
        .map(|i| format!("item {i} has empty `content`"))
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::ContentBlock;

    use super::*;
    use crate::conversation::{assistant, user_text};

    fn list(statuses: &[&str]) -> Value {
        let todos: Vec<Value> = statuses
            .iter()
            .enumerate()
            .map(|(i, s)| json!({"content": format!("item {i}"), "status": s}))
            .collect();
        json!({ "todos": todos })
    }

    #[test]
    fn inputs_are_validated() {
        let cases = [
            (
                list(&["pending", "in_progress", "completed"]),
                false,
                "1 in progress, 1 pending",
            ),
            (json!({"todos": []}), false, "0 in progress"),
            (
                json!({"todos": [{"content": "x", "status": "done"}]}),
                true,
                "field `todos[0].status`",
            ),
            (
                json!({"todos": [{"content": " ", "status": "pending"}]}),
                true,
                "empty `content`",
            ),
            (json!({"todo": []}), true, "Invalid input for TodoWrite"),
            (
                json!({"todos": [{"content": "x", "status": "pending", "activeForm": "Xing"}]}),
                false,
                "1 pending",
            ),
        ];
        for (input, is_error, needle) in cases {
            let out = TodoState::default().apply(input.clone());
            assert_eq!(out.is_error, is_error, "{input}: {}", out.content);
            assert!(out.content.contains(needle), "{input}: {}", out.content);
        }
    }

    #[test]
    fn reminders_come_after_three_quiet_turns_with_open_items() {
        // (statuses, quiet turns, reminder expected)
        let cases: [(&[&str], u32, bool); 5] = [
            (&["pending"], 2, false),
            (&["pending"], 3, true),
            (&["in_progress", "completed"], 5, true),
            (&["completed"], 5, false),
            (&[], 5, false),
        ];
        for (statuses, quiet, want) in cases {
            let mut state = TodoState::default();
            state.apply(list(statuses));
            state.on_assistant_turn(true);
            for _ in 0..quiet {
                state.on_assistant_turn(false);
            }
            let reminder = state.take_reminder();
            assert_eq!(reminder.is_some(), want, "{statuses:?} after {quiet}");
            if let Some(text) = reminder {
                assert!(
                    text.contains("[ ] item 0") || text.contains("[~] item 0"),
                    "{text}"
                );
                assert_eq!(state.take_reminder(), None, "count restarts");
            }
        }
    }

    #[test]
    fn replay_rebuilds_list_and_count() {
        let write = |id: &str, statuses: &[&str]| {
            assistant(vec![ContentBlock::tool_use(id, NAME, list(statuses))])
        };
        let quiet = || assistant(vec![ContentBlock::text("…")]);
        let messages = vec![
            user_text("p"),
            write("a", &["pending"]),
            quiet(),
            write("b", &["pending", "in_progress"]),
            quiet(),
            quiet(),
            quiet(),
        ];
        let mut state = TodoState::replay(&messages);
        assert_eq!(state.items().len(), 2);
        assert!(state.take_reminder().is_some());
    }
}
