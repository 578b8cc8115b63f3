//! Dispatches tool calls by name, running the blocking work off the async runtime.

use std::sync::Arc;

use serde_json::Value;
use ultraplan_protocol::model::ToolDefinition;

use super::{ToolError, ToolOutput, glob, grep, read};
use crate::workspace::Workspace;

/// The read-only tools, bound to one workspace. Cheap to clone; calls may run concurrently.
#[derive(Debug, Clone)]
pub struct ToolRegistry {
    workspace: Arc<Workspace>,
}

/// One tool's entry point: raw input in, text or a model-facing error out.
type Runner = fn(&Workspace, Value) -> Result<String, ToolError>;

/// A tool's name, definition and entry point.
type Entry = (&'static str, fn() -> ToolDefinition, Runner);

/// The tools, in the order they are offered to the model.
const TOOLS: [Entry; 3] = [
    (glob::NAME, glob::definition, glob::run),
    (grep::NAME, grep::definition, grep::run),
    (read::NAME, read::definition, read::run),
];

impl ToolRegistry {
    /// The tools working in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        ToolRegistry {
            workspace: Arc::new(workspace),
        }
    }

    /// The workspace the tools work in.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The definitions offered to the model.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        TOOLS
            .iter()
            .map(|(_, definition, _)| definition())
            .collect()
    }

    /// Whether a tool of this name exists here.
    pub fn has(&self, name: &str) -> bool {
        runner(name).is_some()
    }

    /// Runs the tool `name` on `input` on the blocking pool. Every failure (unknown tool,
    /// invalid input, a refused path, even a panic inside the tool) becomes an error output.
    pub async fn run(&self, name: &str, input: Value) -> ToolOutput {
        let Some(run) = runner(name) else {
            return unknown_tool(name);
        };
        let workspace = Arc::clone(&self.workspace);
        match tokio::task::spawn_blocking(move || ToolOutput::from(run(&workspace, input))).await {
            Ok(output) => output,
            Err(e) => {
                tracing::error!(tool = name, error = %e, "tool task failed");
                ToolOutput::error(format!(
                    "{name} failed unexpectedly; try again or another way"
                ))
            }
        }
    }

    /// Runs the tool `name` on the current thread (for callers that are already blocking).
    pub fn run_blocking(&self, name: &str, input: Value) -> ToolOutput {
        match runner(name) {
            Some(run) => ToolOutput::from(run(&self.workspace, input)),
            None => unknown_tool(name),
        }
    }
}

fn runner(name: &str) -> Option<Runner> {
    TOOLS
        .iter()
        .find(|(tool, _, _)| *tool == name)
        .map(|(_, _, run)| *run)
}

fn unknown_tool(name: &str) -> ToolOutput {
    let known: Vec<&str> = TOOLS.iter().map(|(tool, _, _)| *tool).collect();
    ToolOutput::error(format!(
        "Unknown tool `{name}`. Available tools: {}.",
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::test_support::tree;

    fn registry() -> (tempfile::TempDir, ToolRegistry) {
        let dir = tree(&[("src/main.rs", b"fn main() {\n    println!(\"hi\");\n}\n")]);
        let ws = Workspace::new(dir.path()).expect("workspace");
        (dir, ToolRegistry::new(ws))
    }

    #[tokio::test]
    async fn dispatches_by_name_and_reports_errors() {
        let (_dir, tools) = registry();
        let cases = [
            ("Glob", json!({"pattern": "**/*.rs"}), false, "src/main.rs"),
            (
                "Grep",
                json!({"pattern": "println"}),
                false,
                "Found 1 files\nsrc/main.rs",
            ),
            (
                "Read",
                json!({"file_path": "src/main.rs"}),
                false,
                "     1\tfn main() {",
            ),
            (
                "Bash",
                json!({"command": "ls"}),
                true,
                "Unknown tool `Bash`",
            ),
            (
                "Grep",
                json!({"pattern": 1}),
                true,
                "Invalid input for Grep: field `pattern`",
            ),
            (
                "Grep",
                json!({"pattern": "x", "-C": "2"}),
                true,
                "field `-C`",
            ),
            ("Read", json!({}), true, "missing field `file_path`"),
            (
                "Read",
                json!(null),
                true,
                "an object with a `file_path` string",
            ),
            (
                "Glob",
                json!({"pattern": "*", "path": "../.."}),
                true,
                "escapes",
            ),
            ("Read", json!({"file_path": "src"}), true, "is a directory"),
        ];
        for (name, input, is_error, needle) in cases {
            let out = tools.run(name, input.clone()).await;
            assert_eq!(out.is_error, is_error, "{name} {input}: {}", out.content);
            assert!(
                out.content.contains(needle),
                "{name} {input}: {}",
                out.content
            );
            assert_eq!(tools.run_blocking(name, input), out);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tools_run_concurrently() {
        let (_dir, tools) = registry();
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let tools = tools.clone();
                tokio::spawn(async move { tools.run("Grep", json!({"pattern": "main"})).await })
            })
            .collect();
        for handle in handles {
            let out = handle.await.expect("join");
            assert!(
                !out.is_error && out.content.contains("src/main.rs"),
                "{}",
                out.content
            );
        }
    }

    #[test]
    fn definitions_have_object_schemas() {
        let (_dir, tools) = registry();
        let names: Vec<String> = tools.definitions().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["Glob", "Grep", "Read"]);
        for def in tools.definitions() {
            assert_eq!(def.input_schema["type"], "object", "{}", def.name);
            assert!(def.input_schema["required"].is_array(), "{}", def.name);
            assert!(def.description.len() > 80, "{}", def.name);
            assert!(tools.has(&def.name));
        }
    }
}
