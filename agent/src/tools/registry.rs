//! Dispatches tool calls by name, running the blocking work off the async runtime.

use std::sync::Arc;

use serde_json::Value;
use ultraplan_protocol::model::ToolDefinition;

use super::bash::group::LiveGroups;
use super::{ToolError, ToolOutput, bash, edit, glob, grep, read, write};
use crate::workspace::Workspace;

/// The tools of one workspace: the read-only ones, plus `Write`, `Edit` and `Bash` when the
/// registry is [writable](ToolRegistry::writable). Cheap to clone. Read-only calls may run
/// concurrently; the writable tools are meant to run one at a time, in order.
#[derive(Debug, Clone)]
pub struct ToolRegistry {
    workspace: Arc<Workspace>,
    writable: bool,
    /// Whether `Bash` is offered (always with the writable tools; alone for the verifier).
    commands: bool,
    /// Process groups of `Bash` commands still running.
    live: LiveGroups,
}

/// One tool's entry point: raw input in, text or a model-facing error out.
type Runner = fn(&Workspace, Value) -> Result<String, ToolError>;

/// A tool's name, definition and entry point.
type Entry = (&'static str, fn() -> ToolDefinition, Runner);

/// The read-only tools, in the order they are offered to the model.
const READ_TOOLS: [Entry; 3] = [
    (glob::NAME, glob::definition, glob::run),
    (grep::NAME, grep::definition, grep::run),
    (read::NAME, read::definition, read::run),
];

/// The blocking writable tools, offered after the read-only ones (then `Bash`).
const WRITE_TOOLS: [Entry; 2] = [
    (write::NAME, write::definition, write::run),
    (edit::NAME, edit::definition, edit::run),
];

impl ToolRegistry {
    /// The read-only tools working in `workspace` (plan mode).
    pub fn new(workspace: Workspace) -> Self {
        ToolRegistry {
            workspace: Arc::new(workspace),
            writable: false,
            commands: false,
            live: LiveGroups::default(),
        }
    }

    /// Every tool, the writable ones included, working in `workspace` (execution mode).
    pub fn writable(workspace: Workspace) -> Self {
        ToolRegistry {
            writable: true,
            commands: true,
            ..ToolRegistry::new(workspace)
        }
    }

    /// The read-only tools and `Bash`, without `Write` and `Edit`, working in `workspace`
    /// (the verifier, in a copy of the workspace).
    pub fn verifier(workspace: Workspace) -> Self {
        ToolRegistry {
            commands: true,
            ..ToolRegistry::new(workspace)
        }
    }

    /// The workspace the tools work in.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// Whether `Write`, `Edit` and `Bash` are offered.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Whether `Bash` is offered (calls that may change the tree then run in order).
    pub fn runs_commands(&self) -> bool {
        self.commands
    }

    /// The definitions offered to the model: Glob, Grep, Read, then Write, Edit, Bash (the
    /// verifier's: Glob, Grep, Read, Bash).
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions: Vec<ToolDefinition> = self
            .entries()
            .map(|(_, definition, _)| definition())
            .collect();
        if self.commands {
            definitions.push(bash::definition());
        }
        definitions
    }

    /// Whether a tool of this name exists here.
    pub fn has(&self, name: &str) -> bool {
        self.runner(name).is_some() || self.is_bash(name)
    }

    /// Kills every command still running (the session is over).
    pub fn kill_commands(&self) {
        self.live.kill_all();
    }

    /// Runs the tool `name` on `input`: `Bash` as a child process, the others on the blocking
    /// pool. Every failure (unknown tool, invalid input, a refused path, even a panic inside
    /// the tool) becomes an error output.
    pub async fn run(&self, name: &str, input: Value) -> ToolOutput {
        if self.is_bash(name) {
            return bash::run(&self.workspace, input, &self.live).await;
        }
        let Some(run) = self.runner(name) else {
            return self.unknown_tool(name);
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
    /// `Bash` needs the async runtime and is refused here.
    pub fn run_blocking(&self, name: &str, input: Value) -> ToolOutput {
        if self.is_bash(name) {
            return ToolOutput::error(format!("{name} cannot run from a blocking caller"));
        }
        match self.runner(name) {
            Some(run) => ToolOutput::from(run(&self.workspace, input)),
            None => self.unknown_tool(name),
        }
    }

    /// The blocking tools offered here.
    fn entries(&self) -> impl Iterator<Item = &'static Entry> {
        let writable: &'static [Entry] = if self.writable { &WRITE_TOOLS } else { &[] };
        READ_TOOLS.iter().chain(writable)
    }

    fn is_bash(&self, name: &str) -> bool {
        self.commands && name == bash::NAME
    }

    fn runner(&self, name: &str) -> Option<Runner> {
        self.entries()
            .find(|(tool, _, _)| *tool == name)
            .map(|(_, _, run)| *run)
    }

    fn unknown_tool(&self, name: &str) -> ToolOutput {
        let known: Vec<String> = self.definitions().into_iter().map(|d| d.name).collect();
        ToolOutput::error(format!(
            "Unknown tool `{name}`. Available tools: {}.",
            known.join(", ")
        ))
    }
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
        let (dir, tools) = registry();
        let names: Vec<String> = tools.definitions().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["Glob", "Grep", "Read"]);
        let writable = ToolRegistry::writable(Workspace::new(dir.path()).expect("workspace"));
        let names: Vec<String> = writable.definitions().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["Glob", "Grep", "Read", "Write", "Edit", "Bash"]);
        for registry in [&tools, &writable] {
            for def in registry.definitions() {
                assert_eq!(def.input_schema["type"], "object", "{}", def.name);
                assert!(def.input_schema["required"].is_array(), "{}", def.name);
                assert!(def.description.len() > 80, "{}", def.name);
                assert!(registry.has(&def.name));
            }
        }
        for name in ["Write", "Edit", "Bash"] {
            assert!(!tools.has(name), "{name} is not offered in plan mode");
        }
    }

    #[tokio::test]
    async fn the_writable_registry_writes_edits_and_runs() {
        let (dir, _) = registry();
        let tools = ToolRegistry::writable(Workspace::new(dir.path()).expect("workspace"));
        let cases = [
            (
                "Write",
                json!({"file_path": "n.txt", "content": "one\n"}),
                "Created n.txt",
            ),
            (
                "Edit",
                json!({"file_path": "n.txt", "old_string": "one", "new_string": "two"}),
                "Edited n.txt: 1 replacement.",
            ),
            ("Bash", json!({"command": "cat n.txt"}), "two"),
            ("Read", json!({"file_path": "n.txt"}), "     1\ttwo"),
        ];
        for (name, input, needle) in cases {
            let out = tools.run(name, input).await;
            assert!(
                !out.is_error && out.content.contains(needle),
                "{name}: {}",
                out.content
            );
        }
        let blocked = tools.run_blocking("Bash", json!({"command": "ls"}));
        assert!(blocked.is_error, "{}", blocked.content);
        let unknown = tools.run("Task", json!({})).await;
        assert!(
            unknown
                .content
                .ends_with("Glob, Grep, Read, Write, Edit, Bash."),
            "{}",
            unknown.content
        );
    }

    #[tokio::test]
    async fn the_verifier_registry_runs_commands_but_cannot_write() {
        let (dir, _) = registry();
        let tools = ToolRegistry::verifier(Workspace::new(dir.path()).expect("workspace"));
        let names: Vec<String> = tools.definitions().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["Glob", "Grep", "Read", "Bash"]);
        assert!(tools.runs_commands() && !tools.is_writable());
        let cases = [
            ("Bash", json!({"command": "pwd"}), false, ""),
            (
                "Write",
                json!({"file_path": "n.txt", "content": "x"}),
                true,
                "Unknown tool `Write`",
            ),
            (
                "Edit",
                json!({"file_path": "src/main.rs", "old_string": "a", "new_string": "b"}),
                true,
                "Unknown tool `Edit`",
            ),
        ];
        for (name, input, is_error, needle) in cases {
            let out = tools.run(name, input).await;
            assert_eq!(out.is_error, is_error, "{name}: {}", out.content);
            assert!(out.content.contains(needle), "{name}: {}", out.content);
        }
        assert!(!dir.path().join("n.txt").exists());
    }
}
