//! Runs a batch of tool calls, keeping their order, and spills oversized outputs to disk. In
//! plan mode (read-only tools) the calls of a batch run concurrently; when `Bash` is offered
//! (execution mode, and the verifier) they run one after another, in order, since each may
//! change the tree the next one sees. `Read` calls on a spilled file are served from the spill
//! folder (outside the repository), so the model can page through it.

use std::path::{Path, PathBuf};

use ultraplan_protocol::model::ToolDefinition;

use crate::config::AgentConfig;
use crate::context::spill::{SpillLimits, preview, spill};
use crate::conversation::ToolCall;
use crate::tools::read::{self, ReadInput};
use crate::tools::{ToolOutput, ToolRegistry};
use crate::workspace::Workspace;

/// The runtime's tool runner.
#[derive(Debug, Clone)]
pub struct ToolExec {
    registry: ToolRegistry,
    spill_dir: PathBuf,
    limits: SpillLimits,
}

impl ToolExec {
    /// A runner over `registry`'s tools, spilling as `config` says.
    pub fn new(registry: ToolRegistry, config: &AgentConfig) -> Self {
        let ctx = &config.context;
        ToolExec {
            registry,
            spill_dir: config.spill_dir.clone(),
            limits: SpillLimits {
                max_chars: ctx.spill_chars,
                preview_lines: ctx.preview_lines,
                preview_chars: ctx.preview_chars,
            },
        }
    }

    /// The definitions of the tools it runs.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.registry.definitions()
    }

    /// Kills every command still running (the session is over).
    pub fn kill_commands(&self) {
        self.registry.kill_commands();
    }

    /// Runs `calls`, concurrently or in order (see the module docs); the outputs come back in
    /// the order of the calls.
    pub async fn run_batch(&self, calls: Vec<ToolCall>) -> Vec<ToolOutput> {
        if self.registry.runs_commands() {
            return self.run_in_order(calls).await;
        }
        let handles: Vec<_> = calls
            .into_iter()
            .map(|call| {
                let exec = self.clone();
                tokio::spawn(async move { exec.run_one(call).await })
            })
            .collect();
        let mut outputs = Vec::with_capacity(handles.len());
        for handle in handles {
            outputs.push(handle.await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "tool task failed");
                ToolOutput::error("The tool failed unexpectedly; try again or another way.")
            }));
        }
        outputs
    }

    /// Runs `calls` one after another, each started once the previous one finished. Each runs
    /// in its own task (a panic becomes an error output), aborted if this future is dropped.
    async fn run_in_order(&self, calls: Vec<ToolCall>) -> Vec<ToolOutput> {
        let mut outputs = Vec::with_capacity(calls.len());
        for call in calls {
            let exec = self.clone();
            let mut task = AbortOnDrop(tokio::spawn(async move { exec.run_one(call).await }));
            let output = (&mut task.0).await;
            outputs.push(output.unwrap_or_else(|e| {
                tracing::error!(error = %e, "tool task failed");
                ToolOutput::error("The tool failed unexpectedly; try again or another way.")
            }));
        }
        outputs
    }

    async fn run_one(&self, call: ToolCall) -> ToolOutput {
        if let Some(input) = self.spilled_read(&call) {
            let dir = self.spill_dir.clone();
            let max = self.limits.max_chars;
            return tokio::task::spawn_blocking(move || read_spilled(&dir, &input, max))
                .await
                .unwrap_or_else(|_| ToolOutput::error("Reading the saved output failed."));
        }
        let output = self.registry.run(&call.name, call.input).await;
        spill(output, &call.id, &self.spill_dir, self.limits)
    }

    /// The input of a `Read` aimed at the spill folder, relative to it.
    fn spilled_read(&self, call: &ToolCall) -> Option<ReadInput> {
        if call.name != read::NAME {
            return None;
        }
        let mut input: ReadInput = serde_json::from_value(call.input.clone()).ok()?;
        let relative = Path::new(input.file_path.trim())
            .strip_prefix(&self.spill_dir)
            .ok()?
            .to_string_lossy()
            .into_owned();
        input.file_path = relative;
        Some(input)
    }
}

/// A task aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads a spilled file; the output is cut (never spilled again) at `max_chars`.
fn read_spilled(dir: &Path, input: &ReadInput, max_chars: usize) -> ToolOutput {
    let workspace = match Workspace::new(dir) {
        Ok(ws) => ws,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    let output = ToolOutput::from(read::read(&workspace, input));
    if output.content.len() <= max_chars {
        return output;
    }
    let (shown, _) = preview(&output.content, usize::MAX, max_chars);
    ToolOutput {
        content: format!(
            "{shown}\n[Output cut at {max_chars} characters; read fewer lines with a smaller limit.]"
        ),
        is_error: output.is_error,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::test_support::tree;

    fn exec(root: &Path, spill_dir: &Path) -> ToolExec {
        exec_with(
            ToolRegistry::new(Workspace::new(root).expect("workspace")),
            spill_dir,
        )
    }

    fn exec_with(registry: ToolRegistry, spill_dir: &Path) -> ToolExec {
        let mut config = AgentConfig {
            spill_dir: spill_dir.to_path_buf(),
            ..AgentConfig::default()
        };
        config.context.spill_chars = 300;
        config.context.preview_lines = 2;
        ToolExec::new(registry, &config)
    }

    fn call(id: &str, name: &str, input: serde_json::Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_keep_order_and_spill_large_outputs() {
        let big: String = (1..=200).map(|i| format!("row {i}\n")).collect();
        let repo = tree(&[("a.txt", b"alpha\n"), ("big.txt", big.as_bytes())]);
        let spill_dir = tempfile::tempdir().expect("tempdir");
        let exec = exec(repo.path(), spill_dir.path());
        let outputs = exec
            .run_batch(vec![
                call("t1", "Read", json!({"file_path": "big.txt"})),
                call("t2", "Glob", json!({"pattern": "a.*"})),
                call("t3", "Nope", json!({})),
            ])
            .await;
        assert_eq!(outputs.len(), 3);
        assert!(
            outputs[0].content.contains("[Output too large"),
            "{}",
            outputs[0].content
        );
        assert_eq!(outputs[1].content, "a.txt");
        assert!(outputs[2].is_error);

        let saved = spill_dir.path().join("t1.txt");
        let page = exec
            .run_batch(vec![call(
                "t4",
                "Read",
                json!({"file_path": saved.display().to_string(), "offset": 3, "limit": 1}),
            )])
            .await;
        assert!(!page[0].is_error, "{}", page[0].content);
        assert!(page[0].content.contains("row 3"), "{}", page[0].content);

        let whole = exec
            .run_batch(vec![call(
                "t5",
                "Read",
                json!({"file_path": saved.display().to_string()}),
            )])
            .await;
        assert!(
            whole[0].content.contains("[Output cut at 300"),
            "{}",
            whole[0].content
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writable_batches_run_in_order_and_still_spill() {
        let repo = tree(&[("a.txt", b"alpha\n")]);
        let spill_dir = tempfile::tempdir().expect("tempdir");
        let registry = ToolRegistry::writable(Workspace::new(repo.path()).expect("workspace"));
        let exec = exec_with(registry, spill_dir.path());
        let edit = |old: &str, new: &str| json!({"file_path": "n.txt", "old_string": old, "new_string": new});
        let outputs = exec
            .run_batch(vec![
                call("w", "Write", json!({"file_path": "n.txt", "content": "v1"})),
                call("e1", "Edit", edit("v1", "v2")),
                call(
                    "b",
                    "Bash",
                    json!({"command": "cat n.txt; echo; seq 1 500"}),
                ),
                call("e2", "Edit", edit("v2", "v3")),
                call("r", "Read", json!({"file_path": "n.txt"})),
            ])
            .await;
        let texts: Vec<&str> = outputs.iter().map(|o| o.content.as_str()).collect();
        assert!(outputs.iter().all(|o| !o.is_error), "{texts:?}");
        assert!(texts[2].starts_with("v2\n1\n"), "{}", texts[2]);
        assert!(texts[2].contains("[Output too large"), "{}", texts[2]);
        assert!(texts[4].contains("v3"), "{}", texts[4]);
        assert!(spill_dir.path().join("b.txt").exists());
    }
}
