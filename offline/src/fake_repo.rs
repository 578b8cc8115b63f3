//! Test support: an in-memory repository, a tool executor over it that answers in the agent's
//! formats (Glob, Grep, Read), and a driver that plays the agent's loop around `offline_turn`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Value, json};
use ultraplan_protocol::ContentBlock;
use ultraplan_protocol::constants::EXIT_PLAN_MODE_TOOL;
use ultraplan_protocol::events::{Role, ToolResultContent};
use ultraplan_protocol::model::{Message, ModelRequest, ModelResponse, ToolDefinition};

use super::offline_turn;
use super::terms::WORD_START;

/// A repository held in memory: path → content.
pub(super) struct FakeRepo {
    pub(super) files: BTreeMap<String, String>,
}

impl FakeRepo {
    pub(super) fn new(files: &[(&str, &str)]) -> Self {
        FakeRepo {
            files: files
                .iter()
                .map(|(p, c)| ((*p).to_owned(), (*c).to_owned()))
                .collect(),
        }
    }

    /// Runs a tool: `(text, is_error)`.
    pub(super) fn run(&self, name: &str, input: &Value) -> (String, bool) {
        match name {
            "Glob" => (self.glob(input), false),
            "Grep" => (self.grep(input), false),
            "Read" => self.read(input),
            other => (format!("Unknown tool `{other}`."), true),
        }
    }

    fn glob(&self, input: &Value) -> String {
        let pattern = input["pattern"].as_str().unwrap_or_default();
        let hits: Vec<&str> = self
            .files
            .keys()
            .filter(|p| glob_match(pattern, p))
            .map(String::as_str)
            .collect();
        if hits.is_empty() {
            format!("No files found matching `{pattern}`.")
        } else {
            hits.join("\n")
        }
    }

    fn grep(&self, input: &Value) -> String {
        let pattern = input["pattern"].as_str().unwrap_or_default();
        let matcher = Literals::parse(pattern, input["-i"].as_bool().unwrap_or(false));
        let mode = input["output_mode"]
            .as_str()
            .unwrap_or("files_with_matches");
        let scope = input["path"].as_str().unwrap_or_default();
        let limit = input["head_limit"]
            .as_u64()
            .map_or(usize::MAX, |n| n as usize);
        let mut per_file: Vec<(&str, Vec<(usize, &str)>)> = Vec::new();
        for (path, text) in &self.files {
            let in_scope = scope.is_empty()
                || path == scope
                || path.starts_with(&format!("{}/", scope.trim_end_matches('/')));
            let hits: Vec<(usize, &str)> = text
                .lines()
                .enumerate()
                .filter(|(_, line)| matcher.is_match(line))
                .map(|(i, line)| (i + 1, line))
                .collect();
            if in_scope && !hits.is_empty() {
                per_file.push((path, hits));
            }
        }
        if per_file.is_empty() {
            return format!("No matches found for `{pattern}`.");
        }
        let total: usize = per_file.iter().map(|(_, h)| h.len()).sum();
        match mode {
            "count" => {
                let mut out: String = per_file
                    .iter()
                    .take(limit)
                    .map(|(p, h)| format!("{p}:{}\n", h.len()))
                    .collect();
                let _ = write!(
                    out,
                    "\nFound {total} matching lines in {} files.",
                    per_file.len()
                );
                out
            }
            "content" => {
                let lines: Vec<String> = per_file
                    .iter()
                    .flat_map(|(p, h)| h.iter().map(move |(n, l)| format!("{p}:{n}:{l}")))
                    .collect();
                let mut out = lines
                    .iter()
                    .take(limit)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n");
                if lines.len() > limit {
                    let _ = write!(
                        out,
                        "\n(Output truncated after {limit} lines. In total {total} matching \
                         lines in {} files.)",
                        per_file.len()
                    );
                }
                out
            }
            _ => {
                let paths: Vec<&str> = per_file.iter().map(|(p, _)| *p).take(limit).collect();
                format!("Found {} files\n{}", per_file.len(), paths.join("\n"))
            }
        }
    }

    fn read(&self, input: &Value) -> (String, bool) {
        let path = input["file_path"].as_str().unwrap_or_default();
        let Some(text) = self.files.get(path) else {
            return (
                format!(
                    "path `{path}` does not exist (relative paths start at the workspace root \
                     `/repo`)"
                ),
                true,
            );
        };
        let limit = input["limit"].as_u64().unwrap_or(2000) as usize;
        let lines: Vec<&str> = text.lines().collect();
        let shown: Vec<String> = lines
            .iter()
            .take(limit)
            .enumerate()
            .map(|(i, l)| format!("{:>6}\t{l}", i + 1))
            .collect();
        let mut out = shown.join("\n");
        if lines.len() > limit {
            let _ = write!(
                out,
                "\n\n(Stopped at line {limit} because of the line limit; the file continues. \
                 Read more with offset={}.)",
                limit + 1
            );
        }
        (out, false)
    }
}

/// A Grep pattern made of escaped literals joined by `|`, each maybe preceded by
/// [`WORD_START`] (all the offline model emits); anything else panics.
struct Literals {
    /// (literal, must start a word or follow `_`)
    alternatives: Vec<(String, bool)>,
    case_insensitive: bool,
}

impl Literals {
    fn parse(pattern: &str, case_insensitive: bool) -> Self {
        let mut alternatives = vec![(String::new(), false)];
        let mut rest = pattern;
        while let Some(c) = rest.chars().next() {
            let current = alternatives.len() - 1;
            if let Some(after) = rest.strip_prefix(WORD_START) {
                alternatives[current].1 = true;
                rest = after;
                continue;
            }
            rest = &rest[c.len_utf8()..];
            match c {
                '\\' => {
                    let escaped = rest.chars().next().unwrap_or('\\');
                    assert!(
                        !escaped.is_alphanumeric(),
                        "unsupported escape in {pattern}"
                    );
                    alternatives[current].0.push(escaped);
                    rest = &rest[escaped.len_utf8()..];
                }
                '|' => alternatives.push((String::new(), false)),
                c if ".+*?()[]{}^$".contains(c) => panic!("not a literal alternation: {pattern}"),
                c => alternatives[current].0.push(c),
            }
        }
        if case_insensitive {
            for (literal, _) in &mut alternatives {
                *literal = literal.to_lowercase();
            }
        }
        Literals {
            alternatives,
            case_insensitive,
        }
    }

    fn is_match(&self, line: &str) -> bool {
        let line = if self.case_insensitive {
            line.to_lowercase()
        } else {
            line.to_owned()
        };
        self.alternatives.iter().any(|(literal, word_start)| {
            line.match_indices(literal.as_str()).any(|(i, _)| {
                !word_start
                    || line[..i]
                        .chars()
                        .next_back()
                        .is_none_or(|c| !c.is_alphanumeric())
            })
        })
    }
}

/// Glob matching with `**`, `*`, `?` and one level of `{a,b}`; `*` stays within a segment.
pub(super) fn glob_match(pattern: &str, path: &str) -> bool {
    expand_braces(pattern).iter().any(|p| {
        let pattern: Vec<&str> = p.split('/').collect();
        let path: Vec<&str> = path.split('/').collect();
        match_segments(&pattern, &path)
    })
}

fn expand_braces(pattern: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (pattern.find('{'), pattern.find('}')) else {
        return vec![pattern.to_owned()];
    };
    pattern[open + 1..close]
        .split(',')
        .map(|alt| format!("{}{alt}{}", &pattern[..open], &pattern[close + 1..]))
        .collect()
}

fn match_segments(pattern: &[&str], path: &[&str]) -> bool {
    match (pattern.first(), path.first()) {
        (None, None) => true,
        (Some(&"**"), _) => {
            match_segments(&pattern[1..], path)
                || (!path.is_empty() && match_segments(pattern, &path[1..]))
        }
        (Some(p), Some(s)) => {
            match_segment(p.as_bytes(), s.as_bytes()) && match_segments(&pattern[1..], &path[1..])
        }
        _ => false,
    }
}

fn match_segment(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            match_segment(&pattern[1..], name)
                || (!name.is_empty() && match_segment(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => match_segment(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) => p == n && match_segment(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The agent's tool definitions (names and minimal schemas) for the tools named.
pub(super) fn tools(names: &[&str]) -> Vec<ToolDefinition> {
    names
        .iter()
        .map(|name| ToolDefinition {
            name: (*name).to_owned(),
            description: format!("{name} tool"),
            input_schema: json!({"type": "object"}),
            cache_control: None,
        })
        .collect()
}

/// A request holding `messages`, offering `tools`.
pub(super) fn request(messages: Vec<Message>, tools: Vec<ToolDefinition>) -> ModelRequest {
    ModelRequest {
        model: None,
        max_tokens: 8192,
        system: Vec::new(),
        messages,
        tools,
        temperature: None,
    }
}

/// A user message with one text block.
pub(super) fn user_text(text: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::text(text)],
    }
}

/// A user message with one tool_result block.
pub(super) fn tool_result(id: &str, text: &str, is_error: bool) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.to_owned(),
            content: ToolResultContent::Text(text.to_owned()),
            is_error: is_error.then_some(true),
            cache_control: None,
        }],
    }
}

/// The agent's loop: a conversation, the tools it offers, and the repository they work on.
pub(super) struct Agent<'r> {
    pub(super) repo: &'r FakeRepo,
    pub(super) tools: Vec<ToolDefinition>,
    pub(super) messages: Vec<Message>,
    /// Every response, in order.
    pub(super) responses: Vec<ModelResponse>,
}

impl<'r> Agent<'r> {
    pub(super) fn new(repo: &'r FakeRepo, tool_names: &[&str], first: Vec<ContentBlock>) -> Self {
        Agent {
            repo,
            tools: tools(tool_names),
            messages: vec![Message {
                role: Role::User,
                content: first,
            }],
            responses: Vec::new(),
        }
    }

    /// Asks the model for one turn and records it (checking determinism on the way).
    pub(super) fn step(&mut self) -> ModelResponse {
        let req = request(self.messages.clone(), self.tools.clone());
        let response = offline_turn(&req);
        assert_eq!(offline_turn(&req), response, "same request, same response");
        self.messages.push(Message {
            role: Role::Assistant,
            content: response.content.clone(),
        });
        self.responses.push(response.clone());
        response
    }

    /// Runs the model until it calls ExitPlanMode or ends its turn; returns the plan (if any)
    /// and its tool_use id. Panics past `max_turns`.
    pub(super) fn run_until_plan(&mut self, max_turns: usize) -> Option<(String, String)> {
        for _ in 0..max_turns {
            let response = self.step();
            let mut results = Vec::new();
            for block in &response.content {
                let ContentBlock::ToolUse {
                    id, name, input, ..
                } = block
                else {
                    continue;
                };
                if name == EXIT_PLAN_MODE_TOOL {
                    let plan = input["plan"].as_str().unwrap_or_default().to_owned();
                    return Some((plan, id.clone()));
                }
                let (text, is_error) = self.repo.run(name, input);
                results.push(ContentBlock::ToolResult {
                    tool_use_id: id.clone(),
                    content: ToolResultContent::Text(text),
                    is_error: is_error.then_some(true),
                    cache_control: None,
                });
            }
            if results.is_empty() {
                return None;
            }
            self.messages.push(Message {
                role: Role::User,
                content: results,
            });
        }
        panic!("no plan after {max_turns} turns");
    }

    /// Answers the pending ExitPlanMode call.
    pub(super) fn decide(&mut self, id: &str, text: &str, is_error: bool) {
        self.messages.push(tool_result(id, text, is_error));
    }

    /// The tool calls of the `n`-th response: `(id, name, input)`.
    pub(super) fn calls(&self, n: usize) -> Vec<(String, String, Value)> {
        self.responses[n]
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse {
                    id, name, input, ..
                } => Some((id.clone(), name.clone(), input.clone())),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn fake_glob_matches_like_globset() {
    let cases = [
        ("**/*.rs", "src/a.rs", true),
        ("**/*.rs", "a.rs", true),
        ("*.rs", "src/a.rs", false),
        ("**/{Cargo.toml,go.mod}", "crates/x/Cargo.toml", true),
        ("**/{Cargo.toml,go.mod}", "go.mod", true),
        ("**/*.{rs,ts}", "web/src/a.ts", true),
        ("src/**/a?.rs", "src/x/y/ab.rs", true),
        ("src/**/a?.rs", "src/x/y/abc.rs", false),
    ];
    for (pattern, path, want) in cases {
        assert_eq!(glob_match(pattern, path), want, "{pattern} {path}");
    }
}
