//! The built-in `verifier` type: a read-only subagent the agent starts itself when an execution
//! that changed something ends. It runs in a throw-away copy of the workspace with Read, Grep,
//! Glob and Bash, runs the project's tests, reviews the change against the approved plan and
//! ends its report with `VERDICT: PASS | FAIL | PARTIAL`. The model cannot start one (it is
//! not in the catalog): a verifier started from the live workspace could change the patch.
//!
//! Its system prompt is two blocks, like every subagent's (see [`super::prefix`]), but its
//! first block is its own: the notes other subagents share say they cannot run commands.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use ultraplan_protocol::constants::{HARNESS_STARTED_BY, VERIFIER_SUBAGENT_TYPE};
use ultraplan_protocol::events::CacheControl;
use ultraplan_protocol::model::{SystemBlock, ToolDefinition};

use super::definition::{AgentDefinition, Source};
use crate::context::Prefix;

/// The type's name, as in the Task tool_use input and the task events.
pub const NAME: &str = VERIFIER_SUBAGENT_TYPE;

/// The tools it may use; Bash runs in the copy.
pub const TOOLS: [&str; 4] = ["Glob", "Grep", "Read", "Bash"];

/// Most assistant turns it may take (its own budget, apart from the main agent's).
pub const MAX_TURNS: u32 = 30;

/// The label of the harness's Task tool_use.
pub const DESCRIPTION: &str = "Verify the execution against the approved plan";

/// The follow-up when its report has no verdict line.
pub const VERDICT_NUDGE: &str =
    "End your report with one line: VERDICT: PASS, VERDICT: FAIL or VERDICT: PARTIAL.";

/// Its first system block, in place of the notes other subagents share.
pub const NOTES: &str = "# Working as a verification subagent
- Another agent implemented a change and started you to check it; it sees only your final \
message, not your tool calls. End with a complete, self-contained report and no preamble.
- You work in a throw-away copy of the repository made for you: Bash runs there, from its \
root. The copy has no git history, so read files instead of asking git for a diff.
- Paths are relative to the repository root. Refer to code by path and line number \
(src/auth/session.rs:42).
- Independent lookups go in the same turn.";

/// Its own prompt, the second block.
pub const PROMPT: &str = "You are a verification subagent. An engineer has just implemented \
an approved plan in this repository; you check the result independently and report what you \
find. You never fix anything.

# What to do
1. Find the project's test commands. If `.ultraplan/environment.toml` exists, Read it: the \
commands listed under `[verify] commands` are the ones to run, in their order. Otherwise work \
them out from the README, the CI configuration (.github/workflows, .gitlab-ci.yml, …) and the \
build files (Cargo.toml, package.json, pyproject.toml, Makefile, …).
2. Run them with Bash and note each command's exit code. When one fails, find the failing \
tests by name in its output.
3. Review the change against the approved plan, step by step: Read the files each step \
concerns and decide whether the step was done, done in part, or not done. Start from the \
changed files your brief lists; Bash commands may have changed others.

# Rules
- Never modify files: do not write, edit, delete, move or reformat files with Bash, and do \
not install packages or commit. Output that builds and tests write themselves is fine.
- There is no network.
- Do not guess: a test that could not run has not passed.

# Your final message
Give your evidence first: each command you ran with its exit code, the failing tests by name \
with the key lines of their failure, and the plan steps not done or done in part, each with \
what is missing. Then end with one last line, exactly one of:
VERDICT: PASS (every test command passed and every plan step was done)
VERDICT: FAIL (a test fails, or the change does not do what the plan says)
VERDICT: PARTIAL (part of the plan was done, or the tests could not all run)";

/// What an execution changed, from its own calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Paths given to successful Write and Edit calls.
    pub files: BTreeSet<String>,
    /// A Bash call succeeded (it may have changed files no call names).
    pub bash: bool,
}

impl Changes {
    /// Whether the execution changed anything.
    pub fn any(&self) -> bool {
        self.bash || !self.files.is_empty()
    }

    /// Records a call that succeeded.
    pub fn record(&mut self, tool: &str, input: &Value) {
        match tool {
            "Write" | "Edit" => {
                if let Some(path) = input.get("file_path").and_then(Value::as_str) {
                    self.files.insert(path.trim().to_owned());
                }
            }
            "Bash" => self.bash = true,
            _ => {}
        }
    }
}

/// The definition (not offered to the model).
pub fn definition() -> AgentDefinition {
    AgentDefinition {
        name: NAME.to_owned(),
        description: DESCRIPTION.to_owned(),
        system_prompt: PROMPT.to_owned(),
        tools: Some(TOOLS.iter().map(|s| (*s).to_owned()).collect()),
        disallowed_tools: Vec::new(),
        model: None,
        max_turns: MAX_TURNS,
        inherits_context: false,
        source: Source::BuiltIn,
    }
}

/// Its request prefix: `offered` narrowed to `allowed`, then [`NOTES`] and [`PROMPT`], each
/// ending at a cache breakpoint.
pub fn prefix(offered: &[ToolDefinition], allowed: &[String]) -> Prefix {
    let mut prefix = super::prefix(&definition(), offered, allowed);
    let mut notes = SystemBlock::text(NOTES);
    notes.cache_control = Some(CacheControl::ephemeral());
    if let Some(first) = prefix.system.first_mut() {
        *first = notes;
    }
    prefix
}

/// Its first user message: the approved plan and what the execution changed.
pub fn brief(plan: Option<&str>, changes: &Changes) -> String {
    let plan = plan
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or("(The approved plan could not be found in the conversation.)");
    let mut files: String = changes.files.iter().map(|f| format!("- {f}\n")).collect();
    if files.is_empty() {
        files = "- (none)\n".to_owned();
    }
    let bash = if changes.bash {
        "\nIt also ran Bash commands, which may have changed files this list does not name.\n"
    } else {
        ""
    };
    format!(
        "Verify the implementation of this approved plan.\n\n<approved_plan>\n{plan}\n\
         </approved_plan>\n\nFiles the implementation changed with Write or Edit:\n{files}{bash}\n\
         Run the project's tests, review the change against each plan step, then give your \
         evidence. {VERDICT_NUDGE}"
    )
}

/// The input of the Task tool_use the harness emits to start it.
pub fn task_input(prompt: &str) -> Value {
    json!({
        "description": DESCRIPTION,
        "prompt": prompt,
        "subagent_type": NAME,
        "started_by": HARNESS_STARTED_BY,
    })
}

#[cfg(test)]
#[path = "verifier_tests.rs"]
mod tests;
