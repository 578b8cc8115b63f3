//! Byte plumbing between the orchestrator and an agent process: frames in, frames out, and
//! the tail of stderr. Each runs as its own task so the session loop only reads channels
//! (which are cancel-safe).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use ultraplan_protocol::constants::MAX_FRAME_BYTES;
use ultraplan_protocol::frames::{AgentFrame, ServerFrame, decode_frame, encode_frame};

use crate::runner::{AgentInput, AgentOutput};

/// Bytes of stderr kept for error reports.
const STDERR_TAIL_BYTES: usize = 4096;

/// Read frames from the agent's stdout until EOF or the first bad frame.
pub fn read_frames(stdout: AgentOutput) -> mpsc::Receiver<Result<AgentFrame, String>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut reader = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            let limit = u64::try_from(MAX_FRAME_BYTES + 1).unwrap_or(u64::MAX);
            let read = (&mut reader).take(limit).read_until(b'\n', &mut line).await;
            let frame = match read {
                Ok(0) => return,
                Ok(_) if !line.ends_with(b"\n") && line.len() > MAX_FRAME_BYTES => Err(format!(
                    "the agent sent a frame over {MAX_FRAME_BYTES} bytes"
                )),
                Ok(_) => decode_frame::<AgentFrame>(&line)
                    .map_err(|e| format!("the agent sent a bad frame: {e}")),
                Err(e) => Err(format!("reading the agent's output failed: {e}")),
            };
            let bad = frame.is_err();
            if tx.send(frame).await.is_err() || bad {
                return;
            }
        }
    });
    rx
}

/// Write frames to the agent's stdin in order; stops when the channel closes or the pipe
/// breaks.
pub fn write_frames(mut stdin: AgentInput) -> mpsc::UnboundedSender<ServerFrame> {
    let (tx, mut rx) = mpsc::unbounded_channel::<ServerFrame>();
    tokio::spawn(async move {
        while let Some(frame) = rx.recv().await {
            let bytes = match encode_frame(&frame) {
                Ok(bytes) => bytes,
                Err(error) => {
                    tracing::error!(%error, "cannot encode a frame for the agent");
                    continue;
                }
            };
            if let Err(error) = stdin.write_all(&bytes).await {
                tracing::debug!(%error, "agent stdin closed");
                return;
            }
            if stdin.flush().await.is_err() {
                return;
            }
        }
    });
    tx
}

/// Keep the last few KiB of the agent's stderr (its logs) for crash reports, and forward
/// each line to the server's log at debug level.
pub fn tail_stderr(stderr: AgentOutput, session_id: String) -> Arc<Mutex<String>> {
    let tail = Arc::new(Mutex::new(String::new()));
    let keep = tail.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(session_id = %session_id, agent = %line, "agent log");
            let mut tail = keep.lock().unwrap_or_else(|e| e.into_inner());
            tail.push_str(&line);
            tail.push('\n');
            if tail.len() > STDERR_TAIL_BYTES {
                let mut cut = tail.len() - STDERR_TAIL_BYTES;
                while !tail.is_char_boundary(cut) {
                    cut += 1;
                }
                tail.drain(..cut);
            }
        }
    });
    tail
}
