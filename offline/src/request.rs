//! Reading the conversation: the user's request, the tools on offer, the calls made so far with
//! their results, and what became of each submitted plan.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::constants::EXIT_PLAN_MODE_TOOL;
use ultraplan_protocol::events::Role;
use ultraplan_protocol::model::{Message, ModelRequest};
use ultraplan_protocol::plan_text::extract_teleport_plan;

const REMINDER_OPEN: &str = "<system-reminder>";
const REMINDER_CLOSE: &str = "</system-reminder>";

/// Tags that may wrap a draft plan given with the request.
const DRAFT_TAGS: [&str; 3] = ["draft_plan", "draft-plan", "plan"];

/// What the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct UserRequest {
    /// The request itself, without system reminders or the draft plan.
    pub(super) text: String,
    /// A draft plan to refine, when the request carried one.
    pub(super) draft: Option<String>,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) text: String,
    pub(super) is_error: bool,
}

/// One tool_use of an earlier assistant turn.
#[derive(Debug, Clone)]
pub(super) struct Call<'a> {
    pub(super) name: &'a str,
    pub(super) input: &'a Value,
    /// How many ExitPlanMode calls came before this one: 0 while exploring for the first plan,
    /// `n` after the `n`-th plan was reviewed.
    pub(super) cycle: usize,
    pub(super) result: Option<Outcome>,
}

impl Call<'_> {
    /// A string field of the input.
    pub(super) fn input_str(&self, field: &str) -> Option<&str> {
        self.input.get(field).and_then(Value::as_str)
    }
}

/// The review of a submitted plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// No tool_result yet.
    Pending,
    Approved,
    Teleported,
    Rejected {
        feedback: String,
    },
}

/// The conversation so far, as the offline planner needs it.
#[derive(Debug, Clone)]
pub(super) struct Conversation<'a> {
    pub(super) request: UserRequest,
    /// Later user messages (answers, steering), reminders removed.
    pub(super) notes: Vec<String>,
    pub(super) offered: BTreeSet<&'a str>,
    /// Assistant messages so far.
    pub(super) assistant_turns: usize,
    /// Assistant messages since the last one that submitted a plan (all of them if none did).
    pub(super) turns_in_cycle: usize,
    /// Assistant messages before the first one that submitted a plan (all of them if none did).
    pub(super) first_cycle_turns: usize,
    /// Every tool call except ExitPlanMode, oldest first.
    pub(super) calls: Vec<Call<'a>>,
    /// The verdict on each ExitPlanMode call, oldest first.
    pub(super) verdicts: Vec<Verdict>,
}

impl<'a> Conversation<'a> {
    /// Reads `request`.
    pub(super) fn read(request: &'a ModelRequest) -> Self {
        let results = tool_results(&request.messages);
        let (request_index, user_request) = find_request(&request.messages);
        let mut convo = Conversation {
            request: user_request,
            notes: Vec::new(),
            offered: request.tools.iter().map(|t| t.name.as_str()).collect(),
            assistant_turns: 0,
            turns_in_cycle: 0,
            first_cycle_turns: 0,
            calls: Vec::new(),
            verdicts: Vec::new(),
        };
        for (index, message) in request.messages.iter().enumerate() {
            match message.role {
                Role::Assistant => convo.add_assistant(message, &results),
                Role::User if Some(index) > request_index => {
                    let note = user_text(message);
                    if !note.is_empty() {
                        convo.notes.push(note);
                    }
                }
                Role::User => {}
            }
        }
        if convo.verdicts.is_empty() {
            convo.first_cycle_turns = convo.assistant_turns;
        }
        convo
    }

    fn add_assistant(&mut self, message: &'a Message, results: &BTreeMap<&str, Outcome>) {
        if self.verdicts.is_empty() {
            self.first_cycle_turns = self.assistant_turns;
        }
        self.assistant_turns += 1;
        self.turns_in_cycle += 1;
        let cycle = self.verdicts.len();
        for block in &message.content {
            let ContentBlock::ToolUse {
                id, name, input, ..
            } = block
            else {
                continue;
            };
            let result = results.get(id.as_str()).cloned();
            if name == EXIT_PLAN_MODE_TOOL {
                self.verdicts.push(verdict(result));
                self.turns_in_cycle = 0;
            } else {
                self.calls.push(Call {
                    name,
                    input,
                    cycle,
                    result,
                });
            }
        }
    }

    /// Whether the request offers the tool `name`.
    pub(super) fn offers(&self, name: &str) -> bool {
        self.offered.contains(name)
    }

    /// The calls made in `cycle`.
    pub(super) fn calls_in(&self, cycle: usize) -> impl Iterator<Item = &Call<'a>> {
        self.calls.iter().filter(move |c| c.cycle == cycle)
    }
}

fn verdict(result: Option<Outcome>) -> Verdict {
    let Some(Outcome { text, is_error }) = result else {
        return Verdict::Pending;
    };
    if is_error && extract_teleport_plan(&text).is_some() {
        Verdict::Teleported
    } else if is_error {
        Verdict::Rejected { feedback: text }
    } else {
        // An approval carries the `## Approved Plan` marker; a non-error result without it is
        // still not a rejection, so it ends the planning too.
        Verdict::Approved
    }
}

/// Every tool_result in the conversation, by tool_use id (the last one wins).
fn tool_results(messages: &[Message]) -> BTreeMap<&str, Outcome> {
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.content)
        .filter_map(ContentBlock::as_tool_result)
        .map(|(tool_use_id, text, is_error)| (tool_use_id, Outcome { text, is_error }))
        .collect()
}

/// The first user message with text outside system reminders, and the request it holds.
fn find_request(messages: &[Message]) -> (Option<usize>, UserRequest) {
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .find_map(|(index, m)| {
            let text = user_text(m);
            (!text.is_empty()).then(|| (Some(index), split_draft(&text)))
        })
        .unwrap_or_default()
}

/// The text blocks of a user message, system reminders removed, trimmed.
fn user_text(message: &Message) -> String {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text { text, .. } => Some(strip_reminders(text)),
            _ => None,
        })
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// `text` without its `<system-reminder>…</system-reminder>` blocks (an unclosed one runs to
/// the end).
pub(super) fn strip_reminders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(REMINDER_OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + REMINDER_OPEN.len()..];
        rest = match after.find(REMINDER_CLOSE) {
            Some(end) => &after[end + REMINDER_CLOSE.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// Splits a draft plan off the request: one wrapped in `<draft_plan>`/`<plan>` tags, or one
/// that starts at a Markdown heading mentioning "plan".
pub(super) fn split_draft(text: &str) -> UserRequest {
    for tag in DRAFT_TAGS {
        let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
        let Some(start) = text.find(&open) else {
            continue;
        };
        let inner_start = start + open.len();
        let (inner, tail) = match text[inner_start..].find(&close) {
            Some(end) => (
                &text[inner_start..inner_start + end],
                &text[inner_start + end + close.len()..],
            ),
            None => (&text[inner_start..], ""),
        };
        let request = format!("{}\n{}", text[..start].trim(), tail.trim());
        return request_with_draft(request.trim(), inner.trim());
    }
    let lines: Vec<&str> = text.lines().collect();
    let heading = lines.iter().position(|line| {
        let line = line.trim_start();
        line.starts_with('#') && line.to_lowercase().contains("plan")
    });
    match heading {
        Some(i) => request_with_draft(lines[..i].join("\n").trim(), &lines[i..].join("\n")),
        None => UserRequest {
            text: text.trim().to_owned(),
            draft: None,
        },
    }
}

fn request_with_draft(request: &str, draft: &str) -> UserRequest {
    let draft = draft.trim();
    UserRequest {
        text: request.to_owned(),
        draft: (!draft.is_empty()).then(|| draft.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use ultraplan_protocol::events::ToolResultContent;

    use super::*;

    fn user(blocks: Vec<ContentBlock>) -> Message {
        Message {
            role: Role::User,
            content: blocks,
        }
    }

    fn result(id: &str, text: &str, is_error: bool) -> ContentBlock {
        ContentBlock::ToolResult {
            tool_use_id: id.to_owned(),
            content: ToolResultContent::Text(text.to_owned()),
            is_error: is_error.then_some(true),
            cache_control: None,
        }
    }

    #[test]
    fn reminders_are_removed() {
        let cases = [
            ("plain", "plain"),
            ("<system-reminder>x</system-reminder>do it", "do it"),
            (
                "a<system-reminder>x</system-reminder>b<system-reminder>y",
                "ab",
            ),
            ("<system-reminder>never closed", ""),
        ];
        for (text, want) in cases {
            assert_eq!(strip_reminders(text), want, "{text}");
        }
    }

    #[test]
    fn draft_plans_are_split_off() {
        let cases = [
            ("add caching", "add caching", None),
            (
                "refine this\n<draft_plan>\n1. a\n</draft_plan>\nthanks",
                "refine this\nthanks",
                Some("1. a"),
            ),
            ("<plan>1. a</plan>", "", Some("1. a")),
            (
                "make it faster\n\n## Draft plan\n- cache\n- index",
                "make it faster",
                Some("## Draft plan\n- cache\n- index"),
            ),
            ("# Heading only\ntext", "# Heading only\ntext", None),
        ];
        for (text, want, draft) in cases {
            let got = split_draft(text);
            assert_eq!(got.text, want, "{text:?}");
            assert_eq!(got.draft.as_deref(), draft, "{text:?}");
        }
    }

    #[test]
    fn reads_request_calls_cycles_and_verdicts() {
        let request = ModelRequest {
            model: None,
            max_tokens: 1000,
            system: Vec::new(),
            messages: vec![
                user(vec![
                    ContentBlock::text("<system-reminder>CLAUDE.md: be nice</system-reminder>"),
                    ContentBlock::text("add retries to the fetcher"),
                ]),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::text("looking"),
                        ContentBlock::tool_use("g1", "Glob", json!({"pattern": "*"})),
                    ],
                },
                user(vec![result("g1", "a.rs", false)]),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::tool_use(
                        "p1",
                        EXIT_PLAN_MODE_TOOL,
                        json!({"plan": "x"}),
                    )],
                },
                user(vec![
                    result("p1", "more tests", true),
                    ContentBlock::text("also: keep it small"),
                ]),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::tool_use(
                        "g2",
                        "Grep",
                        json!({"pattern": "a"}),
                    )],
                },
            ],
            tools: Vec::new(),
            temperature: None,
        };
        let convo = Conversation::read(&request);
        assert_eq!(convo.request.text, "add retries to the fetcher");
        assert_eq!(convo.notes, ["also: keep it small"]);
        assert_eq!(
            (
                convo.assistant_turns,
                convo.turns_in_cycle,
                convo.first_cycle_turns
            ),
            (3, 1, 1)
        );
        let calls: Vec<_> = convo
            .calls
            .iter()
            .map(|c| (c.name, c.cycle, c.result.clone().map(|r| r.text)))
            .collect();
        assert_eq!(
            calls,
            [("Glob", 0, Some("a.rs".to_owned())), ("Grep", 1, None)]
        );
        assert_eq!(
            convo.verdicts,
            [Verdict::Rejected {
                feedback: "more tests".into()
            }]
        );
    }

    #[test]
    fn verdicts_follow_the_decision_texts() {
        let cases = [
            (None, Verdict::Pending),
            (
                Some(("User has approved.\n\n## Approved Plan:\nP", false)),
                Verdict::Approved,
            ),
            (
                Some(("__ULTRAPLAN_TELEPORT_LOCAL__\nP", true)),
                Verdict::Teleported,
            ),
            (
                Some(("no", true)),
                Verdict::Rejected {
                    feedback: "no".into(),
                },
            ),
        ];
        for (result, want) in cases {
            let outcome = result.map(|(text, is_error)| Outcome {
                text: text.to_owned(),
                is_error,
            });
            assert_eq!(verdict(outcome), want);
        }
    }
}
