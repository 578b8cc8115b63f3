//! The IO layer: frames on stdin/stdout, the handshake, heartbeats, and the loop that feeds
//! the [`crate::lifecycle::Agent`] state machine and carries out its effects.

mod driver;
pub mod frames_io;
pub mod handshake;
mod setup;
mod tool_exec;

use std::path::PathBuf;

use ultraplan_protocol::frames::ServerFrame;

pub use driver::run;
pub use tool_exec::ToolExec;

use crate::tools::ToolOutput;
use crate::workspace_copy::WorkspaceCopy;
use frames_io::ReadError;

/// What reaches the loop.
#[derive(Debug)]
pub enum Incoming {
    /// A frame from the server, or why none could be read (always the last one).
    Frame(Result<ServerFrame, ReadError>),
    /// A tool batch finished.
    Tools {
        batch: u64,
        outputs: Vec<ToolOutput>,
    },
    /// Stdout cannot be written any more.
    OutputClosed,
    /// The workspace copy for the verifier is ready, or why it is not; with the workspace's
    /// stamps taken just before (`None` when it could not be read whole).
    Copied(
        Result<WorkspaceCopy, String>,
        Option<crate::workspace_stamps::Stamps>,
    ),
    /// What changed in the workspace since the copy (see [`crate::workspace_stamps`]).
    Checked(Vec<String>),
}

/// Where the agent runs.
#[derive(Debug, Clone)]
pub struct RunEnv {
    /// The unpacked bundle.
    pub workspace: PathBuf,
    /// Sent in the `hello` frame.
    pub agent_version: String,
    /// Where the verifier's throw-away copy of the workspace is made (the sandbox's `/tmp`).
    pub copy_base: PathBuf,
}

impl RunEnv {
    /// `ULTRAPLAN_WORKSPACE`, else the current directory; copies go to the temporary
    /// directory (`TMPDIR`).
    pub fn from_process(agent_version: &str) -> Self {
        let workspace = std::env::var_os("ULTRAPLAN_WORKSPACE")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        RunEnv {
            workspace,
            agent_version: agent_version.to_owned(),
            copy_base: std::env::temp_dir(),
        }
    }
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Process exit code: 0 after `done`, 1 when the session could not be set up or stdout
    /// closed, 2 on a protocol violation by the server.
    pub code: u8,
    /// One line for stderr when the agent ended abnormally.
    pub reason: Option<String>,
}

impl Outcome {
    fn ok() -> Self {
        Outcome {
            code: 0,
            reason: None,
        }
    }

    fn failed(code: u8, reason: impl Into<String>) -> Self {
        Outcome {
            code,
            reason: Some(reason.into()),
        }
    }
}
