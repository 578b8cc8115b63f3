//! The built-in subagent types: `explore`, `plan`, `critique` and `general`. Prompt texts are
//! written for this project; the product's name never appears in them.

use super::definition::{AgentDefinition, Source};

pub const EXPLORE: &str = "explore";
pub const PLAN: &str = "plan";
pub const CRITIQUE: &str = "critique";
pub const GENERAL: &str = "general";

/// The read-only search tools.
const SEARCH_TOOLS: [&str; 3] = ["Glob", "Grep", "Read"];

/// Notes every subagent's system prompt opens with, custom ones included: a block of their
/// own, so subagents of every type share it in the prompt cache (see [`super::prefix`]).
pub const SUBAGENT_NOTES: &str = "# Working as a subagent
- Another agent started you to do one task; it sees only your final message, not your tool \
calls. End with a complete, self-contained report and no preamble.
- The repository is read-only: you cannot edit files, run commands or reach the network.
- Paths are relative to the repository root. Refer to code by path and line number \
(src/auth/session.rs:42).
- Independent lookups go in the same turn: they run in parallel.";

const EXPLORE_PROMPT: &str = "You are an exploration subagent. You answer one question about a \
repository quickly and accurately by searching and reading its code.

- Start broad with Glob and Grep, then Read only the parts that matter; read a range rather \
than a whole long file.
- Be fast: stop as soon as you can answer the question well.
- Report facts you verified, each with its path and line numbers. Say plainly what you looked \
for and did not find.
- You do not write the plan; you give its author the facts it needs.";

const PLAN_PROMPT: &str = "You are a planning subagent. You study the code a change touches \
and design how to implement it: the approach, the order of the changes, and the tests that \
prove them.

- Read the code the change touches, its callers and its tests before you propose anything.
- Prefer the smallest design that fits the code's existing conventions; say why when you \
depart from them.
- Give concrete steps naming files, functions and types, in an order that keeps the build \
working after each step.
- End your report with a section `Key files` listing the files most important to the change, \
one per line as `path: why it matters`.";

const CRITIQUE_PROMPT: &str = "You are an adversarial reviewer of an implementation plan. Your \
job is to break the plan, not to praise it. Check each of its claims against the code with \
Glob, Grep and Read, and look hard for:

- Missing files: callers, tests, configuration, migrations or documentation the change needs \
but the plan does not mention.
- Ordering errors: steps that depend on later steps, or that leave the build or the data \
broken in between.
- Untested paths: behaviour the plan changes that no planned test covers, edge cases and \
error paths.
- Risky assumptions: claims about the code that are false or unverified, APIs used wrongly, \
concurrency, compatibility, performance and security risks.

Report each problem as a numbered item: what is wrong, the evidence (path:line), and the fix. \
Put the most serious first. If part of the plan holds up under scrutiny, say so in one line; \
do not pad the report.";

const GENERAL_PROMPT: &str = "You are a general-purpose subagent. You carry out the task you \
are given thoroughly, searching and reading the repository as much as the task needs, and \
report what you found and concluded with the evidence for it.";

/// How a type's subagent starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// A fresh context holding only its prompt.
    Fresh,
    /// A copy of the caller's conversation.
    Forked,
}

/// The built-in definitions, in the order they are listed to the model.
///
/// The critic starts from a copy of the caller's conversation: it checks the draft against the
/// user's request and the evidence the caller gathered, which it reads from the prompt cache
/// entry of the caller's last request instead of having them retyped into its prompt.
pub fn definitions() -> Vec<AgentDefinition> {
    vec![
        builtin(
            EXPLORE,
            "Fast read-only search: finds files, definitions, callers and conventions and \
             answers a focused question about the code. Give it one question per call.",
            EXPLORE_PROMPT,
            Some(&SEARCH_TOOLS),
            16,
            Start::Fresh,
        ),
        builtin(
            PLAN,
            "Designs an implementation for a well-defined part of the change; ends its report \
             with the key files.",
            PLAN_PROMPT,
            None,
            24,
            Start::Fresh,
        ),
        builtin(
            CRITIQUE,
            "Adversarial review of a draft plan: hunts for missing files, ordering errors, \
             untested paths and risky assumptions. Put the complete draft in the prompt.",
            CRITIQUE_PROMPT,
            Some(&SEARCH_TOOLS),
            16,
            Start::Forked,
        ),
        builtin(
            GENERAL,
            "General-purpose research for tasks that fit no other type.",
            GENERAL_PROMPT,
            None,
            30,
            Start::Fresh,
        ),
    ]
}

fn builtin(
    name: &str,
    description: &str,
    prompt: &str,
    tools: Option<&[&str]>,
    max_turns: u32,
    start: Start,
) -> AgentDefinition {
    AgentDefinition {
        name: name.to_owned(),
        description: description.to_owned(),
        system_prompt: prompt.to_owned(),
        tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
        disallowed_tools: Vec::new(),
        model: None,
        max_turns,
        inherits_context: start == Start::Forked,
        source: Source::BuiltIn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_read_only_and_never_name_the_product() {
        for def in definitions() {
            let all = format!("{} {} {SUBAGENT_NOTES}", def.description, def.system_prompt);
            assert!(!all.to_lowercase().contains("ultraplan"), "{}", def.name);
            if def.name == EXPLORE || def.name == CRITIQUE {
                assert_eq!(
                    def.tools.as_deref(),
                    Some(&SEARCH_TOOLS.map(String::from)[..])
                );
            }
        }
        let plan = definitions().into_iter().find(|d| d.name == PLAN);
        assert!(plan.is_some_and(|p| p.system_prompt.contains("Key files")));
    }
}
