//! The session timeline as a pure function of the event log. Each event becomes a few
//! operations (append an entry at the root or under a subagent's Task call, or fill a tool
//! call's result); the page applies them to a tree on the server, the live stream sends
//! them to the browser, which applies them the same way.

use serde_json::Value;
use ultraplan_protocol::constants::{
    ASK_USER_QUESTION_TOOL, ENVIRONMENT_FAILED, ENVIRONMENT_OUTPUT, ENVIRONMENT_READY,
    ENVIRONMENT_REUSED, ENVIRONMENT_SETUP, EXIT_PLAN_MODE_TOOL,
};
use ultraplan_protocol::events::{ContentBlock, ControlRequest, Event, SystemEvent};
use ultraplan_protocol::plan_text::{extract_approved_plan, extract_teleport_plan};

use super::markdown::render_text;

/// Name of the tool that starts a subagent.
pub const TASK_TOOL: &str = "Task";
/// Name of the agent's checklist tool.
pub const TODO_TOOL: &str = "TodoWrite";
const MAX_RESULT_CHARS: usize = 8_000;
const MAX_INPUT_CHARS: usize = 4_000;

/// Where an operation lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Root,
    /// Under the Task call with this key (subagent traffic).
    Children(String),
    /// Into the result slot of the tool call with this key.
    Result(String),
}

/// One change to the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub place: Place,
    pub item: Item,
}

/// What an operation adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Entry(Box<Entry>),
    Result(ResultView),
}

/// One entry of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Element id.
    pub dom_id: String,
    /// Key of a tool call (its result and children slots are `res-<key>`, `kids-<key>`).
    pub key: String,
    pub iso: String,
    pub time: String,
    pub kind: EntryKind,
    /// Subagent entries under a Task call (page render only).
    pub children: Vec<Entry>,
    /// The children, rendered (filled in just before the page renders).
    pub kids_html: String,
    pub result: Option<ResultView>,
}

/// What an entry shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// A user message (the prompt, an answer, a steer).
    Prompt {
        text: String,
    },
    /// Assistant text, rendered and sanitised.
    Text {
        html: String,
    },
    Thinking {
        text: String,
    },
    Tool {
        name: String,
        summary: String,
        input: String,
        task: bool,
    },
    /// An ExitPlanMode call.
    Plan {
        revision: u32,
    },
    /// An AskUserQuestion call.
    Question {
        text: String,
        options: Vec<String>,
    },
    /// A `result` event.
    Outcome {
        ok: bool,
        subtype: String,
        text: String,
        detail: String,
        /// The `result` that ends a remote execution (it carries the patch summary).
        execution: bool,
    },
    /// System and control notes.
    Note {
        label: String,
        text: String,
    },
}

/// A tool call's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultView {
    pub label: String,
    /// `ok`, `error` or `decision`.
    pub tone: &'static str,
    /// Plain text (escaped when rendered).
    pub text: String,
    /// Sanitised HTML instead of text (subagent reports).
    pub html: Option<String>,
    /// Characters left out.
    pub cut: usize,
}

/// A key usable in element ids for any tool_use id.
pub fn tool_key(id: &str) -> String {
    let plain = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain {
        id.to_owned()
    } else {
        use sha2::Digest as _;
        format!(
            "h{}",
            &hex::encode(sha2::Sha256::digest(id.as_bytes()))[..20]
        )
    }
}

/// At most `max` characters of `text`, and how many were left out.
pub fn cut(text: &str, max: usize) -> (String, usize) {
    let total = text.chars().count();
    if total <= max {
        return (text.to_owned(), 0);
    }
    (text.chars().take(max).collect(), total - max)
}

fn str_field<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// A one-line description of a tool call.
pub fn summary(name: &str, input: &Value) -> String {
    let text = match name {
        "Grep" => str_field(input, "pattern").map(|p| match str_field(input, "path") {
            Some(path) => format!("{p}  in {path}"),
            None => p.to_owned(),
        }),
        "Glob" => str_field(input, "pattern").map(str::to_owned),
        "Read" => str_field(input, "file_path")
            .or_else(|| str_field(input, "path"))
            .map(str::to_owned),
        TASK_TOOL => {
            let kind = str_field(input, "subagent_type").unwrap_or("subagent");
            let what = str_field(input, "description").or_else(|| str_field(input, "prompt"));
            Some(format!("{kind}: {}", what.unwrap_or("")))
        }
        TODO_TOOL => {
            let items = input
                .get("todos")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            Some(format!("{items} items"))
        }
        _ => input
            .as_object()
            .and_then(|o| o.values().find_map(Value::as_str))
            .map(str::to_owned),
    };
    let line = text
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    cut(&line, 120).0
}

/// Pretty JSON of a tool input, cut to a readable length.
pub fn pretty(input: &Value) -> String {
    let text = serde_json::to_string_pretty(input).unwrap_or_default();
    let (mut text, left) = cut(&text, MAX_INPUT_CHARS);
    if left > 0 {
        text.push_str("\n…");
    }
    text
}

fn plain(label: &str, tone: &'static str, text: &str) -> ResultView {
    let (text, cut) = cut(text, MAX_RESULT_CHARS);
    ResultView {
        label: label.to_owned(),
        tone,
        text,
        html: None,
        cut,
    }
}

/// What an ExitPlanMode tool_result says about the decision.
fn decision_view(text: &str, is_error: bool) -> ResultView {
    let label = if is_error && extract_teleport_plan(text).is_some() {
        "Sent back to the terminal"
    } else if is_error {
        "Rejected with feedback"
    } else {
        match extract_approved_plan(text) {
            Some((_, true)) => "Approved (edited by you)",
            Some((_, false)) => "Approved",
            None => return plain("Result", "ok", text),
        }
    };
    let shown = if label == "Rejected with feedback" {
        text
    } else {
        ""
    };
    plain(label, "decision", shown)
}

/// The result view of a tool_result, knowing which tool it answers.
pub fn result_view(tool: Option<&str>, text: &str, is_error: bool) -> ResultView {
    match tool {
        Some(EXIT_PLAN_MODE_TOOL) => decision_view(text, is_error),
        Some(ASK_USER_QUESTION_TOOL) => plain("Answer", "decision", text),
        Some(TASK_TOOL) if !is_error => {
            let (md, cut) = cut(text, MAX_RESULT_CHARS);
            let html = Some(render_text(&md));
            ResultView {
                label: "Report".into(),
                tone: "ok",
                text: String::new(),
                html,
                cut,
            }
        }
        _ if is_error => plain("Error", "error", text),
        _ => plain("Result", "ok", text),
    }
}

/// Build an entry stamped with the event's time.
pub fn entry(event: &Event, n: usize, key: Option<String>, kind: EntryKind) -> Entry {
    let iso = event.created_at.clone();
    let time = iso.get(11..19).unwrap_or("").to_owned();
    let dom_id = match &key {
        Some(k) => format!("tool-{k}"),
        None => format!("ev-{}-{n}", event.id),
    };
    Entry {
        dom_id,
        key: key.unwrap_or_default(),
        iso,
        time,
        kind,
        children: Vec::new(),
        kids_html: String::new(),
        result: None,
    }
}

/// A lifecycle note. Setup output shows as output; a failed setup's note carries its tail
/// (docs/ARCHITECTURE.md §6.5).
pub fn system_entry(event: &Event, s: &SystemEvent) -> Entry {
    let message = s.message.clone().unwrap_or_default();
    let (label, text, result) = match s.subtype.as_str() {
        ENVIRONMENT_OUTPUT => (
            "setup output",
            String::new(),
            Some(plain("Output", "ok", &message)),
        ),
        ENVIRONMENT_FAILED => {
            let tail: Vec<&str> = s.data["tail"]
                .as_array()
                .map(|lines| lines.iter().filter_map(|l| l.as_str()).collect())
                .unwrap_or_default();
            let view = (!tail.is_empty())
                .then(|| plain("Last lines of output", "error", &tail.join("\n")));
            ("environment", message, view)
        }
        ENVIRONMENT_SETUP | ENVIRONMENT_READY | ENVIRONMENT_REUSED => {
            ("environment", message, None)
        }
        other => (other, message, None),
    };
    let mut entry = entry(
        event,
        0,
        None,
        EntryKind::Note {
            label: label.to_owned(),
            text,
        },
    );
    entry.result = result;
    entry
}

/// The note shown for a control request.
pub fn control_note(request: &ControlRequest) -> String {
    match request {
        ControlRequest::SetPermissionMode {
            ultraplan: true, ..
        } => "Plan mode (ultraplan): the agent reads and plans, it does not edit.".to_owned(),
        ControlRequest::SetPermissionMode { mode, .. } => {
            format!("Permission mode set to {mode:?}.")
        }
        ControlRequest::Interrupt {} => "Interrupted.".to_owned(),
    }
}

/// Blocks of an assistant message that make entries (text, thinking, tool calls).
pub fn visible(block: &ContentBlock) -> bool {
    match block {
        ContentBlock::Text { text, .. } => !text.trim().is_empty(),
        ContentBlock::Thinking { thinking, .. } => !thinking.trim().is_empty(),
        ContentBlock::ToolUse { .. } => true,
        ContentBlock::ToolResult { .. } => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_safe_for_element_ids() {
        assert_eq!(tool_key("toolu_01AB-c"), "toolu_01AB-c");
        let odd = tool_key("a\"><script>");
        assert!(odd.starts_with('h') && odd.len() == 21, "{odd}");
        assert_eq!(odd, tool_key("a\"><script>"));
    }

    #[test]
    fn summaries_describe_calls() {
        let cases = [
            (
                "Grep",
                json!({"pattern":"fn login","path":"src"}),
                "fn login  in src",
            ),
            ("Read", json!({"file_path":"src/a.rs"}), "src/a.rs"),
            (
                "Task",
                json!({"subagent_type":"explore","description":"map auth"}),
                "explore: map auth",
            ),
            ("TodoWrite", json!({"todos":[{}, {}]}), "2 items"),
            ("Other", json!({"x": 1, "q": "first\nsecond"}), "first"),
        ];
        for (name, input, want) in cases {
            assert_eq!(summary(name, &input), want);
        }
    }

    #[test]
    fn decisions_are_recognised() {
        let approved = "User has approved your plan.\n\n## Approved Plan (edited by user):\nx";
        let cases = [
            (
                result_view(Some("ExitPlanMode"), approved, false),
                "Approved (edited by you)",
                "",
            ),
            (
                result_view(Some("ExitPlanMode"), "more tests", true),
                "Rejected with feedback",
                "more tests",
            ),
            (
                result_view(
                    Some("ExitPlanMode"),
                    "__ULTRAPLAN_TELEPORT_LOCAL__\np",
                    true,
                ),
                "Sent back to the terminal",
                "",
            ),
            (result_view(Some("Grep"), "boom", true), "Error", "boom"),
            (result_view(None, "ok", false), "Result", "ok"),
        ];
        for (view, label, text) in cases {
            assert_eq!((view.label.as_str(), view.text.as_str()), (label, text));
        }
        let long = "é".repeat(MAX_RESULT_CHARS + 5);
        assert_eq!(result_view(Some("Read"), &long, false).cut, 5);
    }
}
