//! Reads the event log once, in order, and keeps what the page needs: timeline operations
//! (and, for a full page, the timeline tree), the latest todo list, the question waiting for
//! an answer, the last `result`, the model.

use std::collections::HashMap;

use serde_json::Value;
use ultraplan_protocol::constants::{ASK_USER_QUESTION_TOOL, EXIT_PLAN_MODE_TOOL};
use ultraplan_protocol::events::{
    AssistantEvent, ContentBlock, Event, EventBody, UserContent, UserEvent,
};

use super::markdown::render_text;
use super::reads::Reads;
use super::timeline::{
    Entry, EntryKind, Item, Op, Place, ResultView, TASK_TOOL, TODO_TOOL, control_note, entry,
    pretty, result_view, summary, tool_key, visible,
};

/// One item of the agent's todo list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Todo {
    pub text: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

impl Todo {
    /// The mark shown before the item.
    pub fn glyph(&self) -> &'static str {
        match self.status.as_str() {
            "completed" => "✓",
            "in_progress" => "◐",
            _ => "○",
        }
    }

    /// The status in words, for screen readers.
    pub fn status_text(&self) -> &'static str {
        match self.status.as_str() {
            "completed" => "done",
            "in_progress" => "in progress",
            _ => "to do",
        }
    }
}

/// An AskUserQuestion call waiting for its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub tool_use_id: String,
    pub text: String,
    pub options: Vec<String>,
}

/// What the log says so far.
#[derive(Debug, Default)]
pub struct Digest {
    tools: HashMap<String, String>,
    revisions: u32,
    pub todos: Vec<Todo>,
    pub question: Option<Question>,
    /// Subtype of the newest `result` event.
    pub last_result: Option<String>,
    pub last_event_id: i64,
    pub model: Option<String>,
    /// What the agent and its subagents read (`Read` calls, `Grep` matches).
    pub reads: Reads,
    tree: Option<Tree>,
}

/// The timeline as nested entries.
#[derive(Debug, Default)]
struct Tree {
    entries: Vec<Entry>,
    /// Tool key → position (root index, child index).
    index: HashMap<String, (usize, Option<usize>)>,
}

impl Tree {
    fn apply(&mut self, op: Op) {
        match (op.place, op.item) {
            (Place::Children(parent), Item::Entry(e)) => match self.index.get(&parent) {
                Some(&(i, None)) => {
                    let kids = &mut self.entries[i].children;
                    if !e.key.is_empty() {
                        self.index.insert(e.key.clone(), (i, Some(kids.len())));
                    }
                    kids.push(*e);
                }
                _ => self.push(*e),
            },
            (Place::Result(key), Item::Result(r)) => {
                let slot = match self.index.get(&key) {
                    Some(&(i, None)) => self.entries.get_mut(i),
                    Some(&(i, Some(c))) => {
                        self.entries.get_mut(i).and_then(|e| e.children.get_mut(c))
                    }
                    None => None,
                };
                match slot {
                    Some(e) => e.result = Some(r),
                    None => self.orphan(r),
                }
            }
            (_, Item::Entry(e)) => self.push(*e),
            (_, Item::Result(r)) => self.orphan(r),
        }
    }

    fn push(&mut self, e: Entry) {
        if !e.key.is_empty() {
            self.index.insert(e.key.clone(), (self.entries.len(), None));
        }
        self.entries.push(e);
    }

    fn orphan(&mut self, r: ResultView) {
        let kind = EntryKind::Note {
            label: "tool result".into(),
            text: String::new(),
        };
        let mut e = Entry {
            dom_id: format!("orphan-{}", self.entries.len()),
            key: String::new(),
            iso: String::new(),
            time: String::new(),
            kind,
            children: Vec::new(),
            kids_html: String::new(),
            result: None,
        };
        e.result = Some(r);
        self.entries.push(e);
    }
}

fn todos(input: &Value) -> Vec<Todo> {
    let items = input.get("todos").and_then(Value::as_array);
    items
        .into_iter()
        .flatten()
        .filter_map(|item| {
            let text = item.get("content").and_then(Value::as_str)?;
            let status = item
                .get("status")
                .and_then(Value::as_str)
                .unwrap_or("pending");
            Some(Todo {
                text: text.to_owned(),
                status: status.to_owned(),
            })
        })
        .collect()
}

impl Digest {
    /// A digest that also keeps the timeline tree (for a full page).
    pub fn with_tree() -> Self {
        Digest {
            tree: Some(Tree::default()),
            ..Digest::default()
        }
    }

    /// The timeline entries (empty without a tree).
    pub fn into_entries(self) -> Vec<Entry> {
        self.tree.map(|t| t.entries).unwrap_or_default()
    }

    /// Take in the next event; returns the timeline operations it makes.
    pub fn ingest(&mut self, event: &Event) -> Vec<Op> {
        self.last_event_id = self.last_event_id.max(event.id);
        let ops = match &event.body {
            EventBody::Assistant(a) => self.assistant(event, a),
            EventBody::User(u) => self.user(event, u),
            EventBody::Result(r) => {
                self.last_result = Some(r.subtype.clone());
                if r.is_terminal() {
                    self.question = None;
                }
                let detail = [
                    r.num_turns.map(|n| format!("{n} turns")),
                    r.duration_ms
                        .map(|ms| format!("{:.1} s", ms as f64 / 1000.0)),
                ];
                let kind = EntryKind::Outcome {
                    ok: !r.is_terminal(),
                    subtype: r.subtype.clone(),
                    text: r.result.clone().unwrap_or_default(),
                    detail: detail.into_iter().flatten().collect::<Vec<_>>().join(" · "),
                    execution: r.patch.is_some(),
                };
                vec![root(entry(event, 0, None, kind))]
            }
            EventBody::System(s) => vec![root(super::timeline::system_entry(event, s))],
            EventBody::ControlRequest(c) => {
                let kind = EntryKind::Note {
                    label: "mode".into(),
                    text: control_note(&c.request),
                };
                vec![root(entry(event, 0, None, kind))]
            }
        };
        if let Some(tree) = self.tree.as_mut() {
            for op in &ops {
                tree.apply(op.clone());
            }
        }
        ops
    }

    fn assistant(&mut self, event: &Event, a: &AssistantEvent) -> Vec<Op> {
        let main = a.parent_tool_use_id.is_none();
        let place = a
            .parent_tool_use_id
            .as_deref()
            .map_or(Place::Root, |p| Place::Children(tool_key(p)));
        if main && a.message.model.is_some() {
            self.model.clone_from(&a.message.model);
        }
        let blocks = a.message.content.iter().filter(|b| visible(b)).enumerate();
        blocks
            .filter_map(|(n, block)| {
                let (key, kind) = self.block(block, main)?;
                Some(Op {
                    place: place.clone(),
                    item: Item::Entry(Box::new(entry(event, n, key, kind))),
                })
            })
            .collect()
    }

    fn block(&mut self, block: &ContentBlock, main: bool) -> Option<(Option<String>, EntryKind)> {
        match block {
            ContentBlock::Text { text, .. } => Some((
                None,
                EntryKind::Text {
                    html: render_text(text),
                },
            )),
            ContentBlock::Thinking { thinking, .. } => Some((
                None,
                EntryKind::Thinking {
                    text: thinking.clone(),
                },
            )),
            ContentBlock::ToolUse {
                id, name, input, ..
            } => {
                self.tools.insert(id.clone(), name.clone());
                if name == "Read" {
                    self.reads.read_call(input);
                }
                Some((Some(tool_key(id)), self.tool_use(id, name, input, main)))
            }
            ContentBlock::ToolResult { .. } => None,
        }
    }

    fn tool_use(&mut self, id: &str, name: &str, input: &Value, main: bool) -> EntryKind {
        match name {
            EXIT_PLAN_MODE_TOOL if main => {
                self.revisions += 1;
                self.question = None;
                EntryKind::Plan {
                    revision: self.revisions,
                }
            }
            ASK_USER_QUESTION_TOOL if main => {
                let text = input
                    .get("question")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                let options = input
                    .get("options")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten();
                let options: Vec<String> = options
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect();
                self.question = Some(Question {
                    tool_use_id: id.to_owned(),
                    text: text.clone(),
                    options: options.clone(),
                });
                EntryKind::Question { text, options }
            }
            _ => {
                if main && name == TODO_TOOL {
                    self.todos = todos(input);
                }
                EntryKind::Tool {
                    name: name.to_owned(),
                    summary: summary(name, input),
                    input: pretty(input),
                    task: name == TASK_TOOL,
                }
            }
        }
    }

    fn user(&mut self, event: &Event, u: &UserEvent) -> Vec<Op> {
        let main = u.parent_tool_use_id.is_none();
        let place = u
            .parent_tool_use_id
            .as_deref()
            .map_or(Place::Root, |p| Place::Children(tool_key(p)));
        let mut ops = Vec::new();
        let text = u.message.content.text();
        if !text.trim().is_empty() {
            if main && self.question.is_some() && event.body.tool_results().is_empty() {
                self.question = None;
            }
            let kind = EntryKind::Prompt { text };
            ops.push(Op {
                place: place.clone(),
                item: Item::Entry(Box::new(entry(event, 0, None, kind))),
            });
        }
        let UserContent::Blocks(blocks) = &u.message.content else {
            return ops;
        };
        for block in blocks {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } = block
            {
                if main
                    && self
                        .question
                        .as_ref()
                        .is_some_and(|q| &q.tool_use_id == tool_use_id)
                {
                    self.question = None;
                }
                let tool = self.tools.get(tool_use_id).map(String::as_str);
                let text = content.text();
                if tool == Some("Grep") && !is_error.unwrap_or(false) {
                    self.reads.grep_result(&text);
                }
                let view = result_view(tool, &text, is_error.unwrap_or(false));
                ops.push(Op {
                    place: Place::Result(tool_key(tool_use_id)),
                    item: Item::Result(view),
                });
            }
        }
        ops
    }
}

fn root(e: Entry) -> Op {
    Op {
        place: Place::Root,
        item: Item::Entry(Box::new(e)),
    }
}

#[cfg(test)]
#[path = "digest_tests.rs"]
mod tests;
