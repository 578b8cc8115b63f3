//! Plays the server for a real `ultraplan-agent` process: writes server frames to its stdin,
//! reads agent frames from its stdout, and keeps every event it emitted. Timeouts are hang
//! guards only; no test asserts on timing.

#![allow(dead_code)]
// Test support: failing loudly is the point.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;
use ultraplan_protocol::events::{ControlRequest, ControlRequestEvent, PermissionMode};
use ultraplan_protocol::frames::{AgentFrame, AgentMode, ServerFrame, StartSettings};
use ultraplan_protocol::model::{
    Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse, StopReason, Usage,
};
use ultraplan_protocol::session::PromptVariant;
use ultraplan_protocol::{ContentBlock, EventBody};

/// Longest wait for anything; reaching it means the agent hangs.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// A repository bundle with project instructions and a little code.
pub fn bundle() -> TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: [(&str, &str); 4] = [
        (
            "CLAUDE.md",
            "# Project rules\n\nRun `cargo test` before committing. Keep functions short.\n",
        ),
        (
            "src/auth.rs",
            "pub fn login(user: &str) -> bool {\n    !user.is_empty()\n}\n",
        ),
        ("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n"),
        ("README.md", "A demo service.\n"),
    ];
    for (path, text) in files {
        let full = dir.path().join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(full, text).expect("write");
    }
    dir
}

/// Start settings for a plan session.
pub fn settings(variant: PromptVariant, draft_plan: Option<&str>) -> StartSettings {
    StartSettings {
        session_id: "sess_it".into(),
        mode: AgentMode::Plan,
        prompt_variant: variant,
        model: "anthropic:test".into(),
        max_turns: 40,
        draft_plan: draft_plan.map(str::to_owned),
    }
}

/// The transcript of a new session.
pub fn new_session(prompt: &str) -> Vec<EventBody> {
    vec![
        EventBody::ControlRequest(ControlRequestEvent {
            request_id: Some("ctl_1".into()),
            request: ControlRequest::SetPermissionMode {
                mode: PermissionMode::Plan,
                ultraplan: true,
            },
        }),
        EventBody::user_text(prompt),
    ]
}

/// A model response.
pub fn response(content: Vec<ContentBlock>, stop: StopReason) -> ModelResponse {
    ModelResponse {
        id: "msg_it".into(),
        model: "test-model".into(),
        content,
        stop_reason: Some(stop),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            ..Usage::default()
        },
    }
}

/// A response calling one tool.
pub fn call(id: &str, name: &str, input: Value) -> ModelResponse {
    response(
        vec![ContentBlock::tool_use(id, name, input)],
        StopReason::ToolUse,
    )
}

/// A response with text that ends the turn.
pub fn say(text: &str, stop: StopReason) -> ModelResponse {
    response(vec![ContentBlock::text(text)], stop)
}

/// A model error of `kind`.
pub fn model_error(kind: ModelErrorKind, message: &str) -> ModelError {
    ModelError {
        kind,
        message: message.into(),
    }
}

/// The text blocks and tool_results of a message, as one string.
pub fn message_text(message: &Message) -> String {
    message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text, .. } => text.clone(),
            ContentBlock::ToolResult { content, .. } => content.text(),
            ContentBlock::ToolUse { name, .. } => format!("<tool_use {name}>"),
            ContentBlock::Thinking { .. } => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A running agent process.
pub struct AgentProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    stderr_thread: Option<std::thread::JoinHandle<()>>,
    /// Every event the agent emitted, in order.
    pub events: Vec<EventBody>,
    _tmp: TempDir,
}

impl AgentProcess {
    /// Starts the agent in `bundle` with extra environment variables.
    pub fn spawn(bundle: &Path, env: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut command = Command::new(env!("CARGO_BIN_EXE_ultraplan-agent"));
        command
            .current_dir(bundle)
            .env("ULTRAPLAN_WORKSPACE", bundle)
            .env("ULTRAPLAN_LOG", "debug")
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn agent");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let stderr_thread = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Ok(mut log) = sink.lock() {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
        let stdin = child.stdin.take();
        AgentProcess {
            child,
            stdin,
            lines,
            stderr: log,
            stderr_thread: Some(stderr_thread),
            events: Vec::new(),
            _tmp: tmp,
        }
    }

    /// Writes one raw line to the agent's stdin.
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let _ = stdin.write_all(line.as_bytes());
        let _ = stdin.write_all(b"\n");
        let _ = stdin.flush();
    }

    /// Writes a server frame.
    pub fn send(&mut self, frame: &ServerFrame) {
        let line = serde_json::to_string(frame).expect("encode");
        self.send_raw(&line);
    }

    /// Closes the agent's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next frame other than a heartbeat; events are recorded.
    pub fn next_frame(&mut self) -> AgentFrame {
        loop {
            let line = match self.lines.recv_timeout(HANG_GUARD) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => panic!("agent hangs; stderr:\n{}", self.stderr()),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("agent closed stdout; stderr:\n{}", self.stderr())
                }
            };
            let frame: AgentFrame =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad frame {line}: {e}"));
            match frame {
                AgentFrame::Heartbeat {} => continue,
                AgentFrame::Event { ref event } => self.events.push(event.clone()),
                _ => {}
            }
            return frame;
        }
    }

    /// Reads the agent's hello, then sends hello and start.
    pub fn open(&mut self, settings: StartSettings, transcript: Vec<EventBody>) {
        match self.next_frame() {
            AgentFrame::Hello {
                protocol_version,
                agent_version,
            } => {
                assert_eq!(protocol_version, 1);
                assert_eq!(agent_version, env!("CARGO_PKG_VERSION"));
            }
            other => panic!("expected hello, got {other:?}"),
        }
        self.send(&ServerFrame::Hello {
            protocol_version: 1,
        });
        self.send(&ServerFrame::Start {
            settings,
            transcript,
        });
    }

    /// Reads frames until a model request; returns it with the events emitted before it.
    pub fn expect_request(&mut self) -> (String, ModelRequest, Vec<EventBody>) {
        let mut events = Vec::new();
        loop {
            match self.next_frame() {
                AgentFrame::ModelRequest {
                    request_id,
                    request,
                } => return (request_id, request, events),
                AgentFrame::Event { event } => events.push(event),
                other => panic!(
                    "expected a model request, got {other:?}; stderr:\n{}",
                    self.stderr()
                ),
            }
        }
    }

    /// Reads the next frame, which must be an event.
    pub fn expect_event(&mut self) -> EventBody {
        match self.next_frame() {
            AgentFrame::Event { event } => event,
            other => panic!(
                "expected an event, got {other:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    /// Answers a model request.
    pub fn respond(&mut self, request_id: &str, response: ModelResponse) {
        self.send(&ServerFrame::ModelResponse {
            request_id: request_id.to_owned(),
            response,
        });
    }

    /// Sends a user event.
    pub fn user_event(&mut self, event: EventBody) {
        self.send(&ServerFrame::UserEvent { event });
    }

    /// Reads every frame up to and including `done`.
    pub fn until_done(&mut self) -> Vec<AgentFrame> {
        let mut frames = Vec::new();
        loop {
            let frame = self.next_frame();
            let done = matches!(frame, AgentFrame::Done { .. });
            frames.push(frame);
            if done {
                return frames;
            }
        }
    }

    /// Waits for the process to exit; returns its exit code.
    pub fn wait(&mut self) -> i32 {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("agent did not exit; stderr:\n{}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the agent wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits for the exit, then returns the exit code and everything written to stderr.
    pub fn exit_and_stderr(&mut self) -> (i32, String) {
        let code = self.wait();
        if let Some(thread) = self.stderr_thread.take() {
            let _ = thread.join();
        }
        (code, self.stderr())
    }

    /// Whether stdout has no more frames (after exit).
    pub fn stdout_closed(&mut self) -> bool {
        loop {
            match self.lines.recv_timeout(HANG_GUARD) {
                Ok(line) if line.contains("\"heartbeat\"") => continue,
                Ok(line) => panic!("unexpected frame after done: {line}"),
                Err(RecvTimeoutError::Disconnected) => return true,
                Err(RecvTimeoutError::Timeout) => return false,
            }
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
