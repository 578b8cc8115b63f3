//! A session's events as a timeline: each event becomes zero or more [`Record`]s (the stable
//! shape `ultraplan logs --json` prints, one per line), and a record becomes one terminal line.
//!
//! Records are built sanitised: `text` keeps newlines and tabs only, every other field is one
//! clean line. Events nobody reads in a timeline (control requests, thinking, ordinary tool
//! results) give no record.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;
use ultraplan_protocol::constants::{
    EXIT_PLAN_MODE_TOOL, TASK_FINISHED, TASK_STARTED, TELEPORT_SENTINEL,
};
use ultraplan_protocol::events::{
    AssistantEvent, ContentBlock, Event, EventBody, ResultEvent, SystemEvent, UserContent,
    UserEvent,
};

use crate::sanitize;

/// The tool that writes the agent's todo list.
const TODO_TOOL: &str = "TodoWrite";

/// Longest tool input summary, in characters.
const MAX_SUMMARY_CHARS: usize = 100;

/// Input fields that say what a tool call is about, most telling first.
const SUMMARY_KEYS: [&str; 10] = [
    "file_path",
    "pattern",
    "path",
    "command",
    "query",
    "url",
    "description",
    "question",
    "prompt",
    "subagent_type",
];

/// What a record is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A user message: the prompt, an answer, steering.
    UserMessage,
    /// Text the agent wrote.
    AssistantText,
    /// A tool call (`tool` names it, `text` summarises its input).
    ToolCall,
    /// The agent's todo list changed (`text` summarises it).
    TodoUpdate,
    /// A subagent started (`subagent` is its Task call's id).
    SubagentStart,
    /// A subagent ended (`is_error` when it failed or was stopped).
    SubagentEnd,
    /// The agent submitted a plan for review (`text` is the plan).
    Plan,
    /// A plan was decided: `text` is `approved`, `teleported` or `rejected: <feedback>`.
    Decision,
    /// The end of a turn (`success`) or of the session (`is_error`).
    Result,
    /// Another lifecycle note from the harness.
    System,
}

/// One timeline entry: the stable `logs --json` shape (every key always present).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    /// The event's id (several records may share one event).
    pub id: i64,
    /// When the server stored the event (RFC 3339).
    pub created_at: String,
    pub kind: Kind,
    /// The Task tool_use id of the subagent this belongs to; `null` for the main agent.
    pub subagent: Option<String>,
    /// The tool's name, for `tool_call` and `todo_update`.
    pub tool: Option<String>,
    pub text: String,
    pub is_error: bool,
}

/// Turns events into records, remembering which tool calls were plans.
#[derive(Debug, Default)]
pub struct Timeline {
    plan_calls: HashSet<String>,
}

impl Timeline {
    pub fn new() -> Self {
        Self::default()
    }

    /// The records of one event, in order.
    pub fn records(&mut self, event: &Event) -> Vec<Record> {
        let entries = match &event.body {
            EventBody::Assistant(a) => self.assistant(a),
            EventBody::User(u) => self.user(u),
            EventBody::Result(r) => vec![result(r)],
            EventBody::System(s) => vec![system(s)],
            EventBody::ControlRequest(_) => Vec::new(),
        };
        let subagent = event.body.parent_tool_use_id().map(sanitize::line);
        entries
            .into_iter()
            .map(|e| Record {
                id: event.id,
                created_at: sanitize::line(&event.created_at),
                kind: e.kind,
                subagent: e.subagent.or_else(|| subagent.clone()),
                tool: e.tool.map(|t| sanitize::line(&t)),
                text: sanitize::text(&e.text),
                is_error: e.is_error,
            })
            .collect()
    }

    fn assistant(&mut self, a: &AssistantEvent) -> Vec<Entry> {
        let main = a.parent_tool_use_id.is_none();
        a.message
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text { text, .. } if !text.trim().is_empty() => {
                    Some(Entry::new(Kind::AssistantText, text.trim_end()))
                }
                ContentBlock::ToolUse {
                    id, name, input, ..
                } => Some(self.tool_use(main, id, name, input)),
                _ => None,
            })
            .collect()
    }

    fn tool_use(&mut self, main: bool, id: &str, name: &str, input: &Value) -> Entry {
        if main && name == EXIT_PLAN_MODE_TOOL {
            self.plan_calls.insert(id.to_owned());
            let plan = input.get("plan").and_then(Value::as_str).unwrap_or("");
            return Entry::new(Kind::Plan, plan.trim());
        }
        let (kind, text) = if name == TODO_TOOL {
            (Kind::TodoUpdate, todo_summary(input))
        } else {
            (Kind::ToolCall, input_summary(input))
        };
        Entry {
            tool: Some(name.to_owned()),
            ..Entry::new(kind, &text)
        }
    }

    fn user(&mut self, u: &UserEvent) -> Vec<Entry> {
        match &u.message.content {
            UserContent::Text(text) => vec![Entry::new(Kind::UserMessage, text.trim_end())],
            UserContent::Blocks(blocks) => blocks
                .iter()
                .filter_map(|block| match block {
                    ContentBlock::Text { text, .. } => {
                        Some(Entry::new(Kind::UserMessage, text.trim_end()))
                    }
                    _ => {
                        let (id, text, is_error) = block.as_tool_result()?;
                        let decision =
                            u.parent_tool_use_id.is_none() && self.plan_calls.contains(id);
                        decision.then(|| decision_entry(&text, is_error))
                    }
                })
                .collect(),
        }
    }
}

/// A record before it is stamped with its event.
struct Entry {
    kind: Kind,
    subagent: Option<String>,
    tool: Option<String>,
    text: String,
    is_error: bool,
}

impl Entry {
    fn new(kind: Kind, text: &str) -> Self {
        Self {
            kind,
            subagent: None,
            tool: None,
            text: text.to_owned(),
            is_error: false,
        }
    }
}

fn decision_entry(text: &str, is_error: bool) -> Entry {
    let said = if !is_error {
        "approved".to_owned()
    } else if text.starts_with(TELEPORT_SENTINEL) {
        "teleported".to_owned()
    } else {
        format!("rejected: {}", text.trim())
    };
    Entry::new(Kind::Decision, &said)
}

fn result(r: &ResultEvent) -> Entry {
    let mut text = r.subtype.clone();
    if let Some(said) = r.result.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        text = format!("{text}: {said}");
    }
    Entry {
        is_error: r.is_terminal() || r.is_error,
        ..Entry::new(Kind::Result, &text)
    }
}

fn system(s: &SystemEvent) -> Entry {
    let message = s.message.as_deref().unwrap_or("").trim();
    let task_id = s.data.get("task_id").and_then(Value::as_str);
    match s.subtype.as_str() {
        TASK_STARTED | TASK_FINISHED => {
            let started = s.subtype == TASK_STARTED;
            let text = match (message, s.data.get("description").and_then(Value::as_str)) {
                ("", Some(description)) => description.to_owned(),
                ("", None) => s.subtype.clone(),
                (message, _) => message.to_owned(),
            };
            let status = s.data.get("status").and_then(Value::as_str);
            Entry {
                subagent: task_id.map(sanitize::line),
                is_error: !started && status.is_some_and(|st| st != "completed"),
                ..Entry::new(
                    if started {
                        Kind::SubagentStart
                    } else {
                        Kind::SubagentEnd
                    },
                    &text,
                )
            }
        }
        subtype if message.is_empty() => Entry::new(Kind::System, subtype),
        subtype => Entry::new(Kind::System, &format!("{subtype}: {message}")),
    }
}

/// What a tool call is about, in one short line.
pub fn input_summary(input: &Value) -> String {
    let picked = SUMMARY_KEYS
        .iter()
        .find_map(|key| input.get(key).and_then(Value::as_str))
        .map(str::to_owned);
    let whole = || match input {
        Value::Object(map) if map.is_empty() => String::new(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    truncate(
        &sanitize::line(&picked.unwrap_or_else(whole)),
        MAX_SUMMARY_CHARS,
    )
}

/// A todo list in one line: how many are done, and what is in progress.
pub fn todo_summary(input: &Value) -> String {
    let todos = input
        .get("todos")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    fn status(t: &Value) -> &str {
        t.get("status").and_then(Value::as_str).unwrap_or("")
    }
    let done = todos.iter().filter(|t| status(t) == "completed").count();
    let mut line = format!("{done}/{} done", todos.len());
    if let Some(doing) = todos.iter().find(|t| status(t) == "in_progress") {
        let what = ["activeForm", "content"]
            .iter()
            .find_map(|k| doing.get(k).and_then(Value::as_str))
            .unwrap_or("");
        line.push_str(&format!(" · doing: {}", sanitize::line(what)));
    }
    truncate(&line, MAX_SUMMARY_CHARS)
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

/// The label column of a record's line.
fn label(record: &Record) -> &'static str {
    match record.kind {
        Kind::UserMessage => "you",
        Kind::AssistantText => "agent",
        Kind::ToolCall => "tool",
        Kind::TodoUpdate => "todos",
        Kind::SubagentStart => "subagent+",
        Kind::SubagentEnd => "subagent-",
        Kind::Plan => "plan",
        Kind::Decision => "decision",
        Kind::Result if record.is_error => "ended",
        Kind::Result => "result",
        Kind::System => "system",
    }
}

/// Width of the label column.
const LABEL_WIDTH: usize = 9;

/// A record as terminal text: `HH:MM:SS label text`, continuation lines indented, subagent
/// records marked. Sanitised again, so a hand-made record cannot smuggle a control through.
pub fn line(record: &Record) -> String {
    let clock = clock_of(&record.created_at);
    let mut head = format!("{clock} {:<LABEL_WIDTH$} ", label(record));
    if record.subagent.is_some() && !matches!(record.kind, Kind::SubagentStart | Kind::SubagentEnd)
    {
        head.push_str("↳ ");
    }
    let body = match (&record.kind, &record.tool) {
        (Kind::Plan, _) => plan_headline(&record.text),
        (Kind::ToolCall, Some(tool)) if record.text.is_empty() => tool.clone(),
        (Kind::ToolCall, Some(tool)) => format!("{tool} {}", record.text),
        _ => record.text.clone(),
    };
    let indent = " ".repeat(9 + LABEL_WIDTH + 1);
    let body = sanitize::text(&body).replace('\n', &format!("\n{indent}"));
    sanitize::text(&format!("{head}{body}"))
}

/// `ready for review: <first line> (N lines)`.
fn plan_headline(plan: &str) -> String {
    let first = plan.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let first = first.trim().trim_start_matches('#').trim();
    format!(
        "ready for review: {} ({} lines)",
        truncate(first, MAX_SUMMARY_CHARS),
        plan.lines().count()
    )
}

/// `HH:MM:SS` of an RFC 3339 instant, or eight spaces when it does not look like one.
fn clock_of(rfc3339: &str) -> String {
    rfc3339
        .split_once('T')
        .map(|(_, t)| t.chars().take(8).collect::<String>())
        .filter(|t| t.len() == 8 && t.chars().all(|c| c.is_ascii_digit() || c == ':'))
        .unwrap_or_else(|| " ".repeat(8))
}

/// `true` when the event ends the session: a `result` of the main agent other than `success`.
pub fn ends_session(event: &Event) -> bool {
    matches!(&event.body, EventBody::Result(r) if r.is_terminal())
}

#[cfg(test)]
#[path = "timeline_tests.rs"]
mod tests;
