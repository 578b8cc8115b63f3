//! Agent ↔ server frames: newline-delimited JSON on the agent's stdin and stdout.
//!
//! Each side's first frame is `hello` carrying [`FRAME_PROTOCOL_VERSION`]. No frame may exceed
//! [`MAX_FRAME_BYTES`]. [`encode_frame`] and [`decode_frame`] enforce both rules so the two
//! ends cannot drift.
//!
//! [`FRAME_PROTOCOL_VERSION`]: crate::constants::FRAME_PROTOCOL_VERSION
//! [`MAX_FRAME_BYTES`]: crate::constants::MAX_FRAME_BYTES

use serde::{Deserialize, Serialize, de::DeserializeOwned};

use crate::constants::MAX_FRAME_BYTES;
use crate::events::EventBody;
use crate::model::{ModelError, ModelRequest, ModelResponse, Usage};
use crate::session::PromptVariant;

/// What the agent runs for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentMode {
    /// Read-only exploration ending in ExitPlanMode.
    Plan,
    /// Implementation of an approved plan in a writable copy.
    Execute,
}

/// Settings the server hands the agent at start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartSettings {
    pub session_id: String,
    pub mode: AgentMode,
    pub prompt_variant: PromptVariant,
    /// `anthropic:<model>`, `openai:<model>` or `offline`.
    pub model: String,
    pub max_turns: u32,
    /// A draft plan the user asked to refine, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_plan: Option<String>,
}

/// Frames the agent writes to stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentFrame {
    Hello {
        protocol_version: u32,
        agent_version: String,
    },
    /// An event for the session log.
    Event {
        event: EventBody,
    },
    /// Ask the gateway for a completion; answered by `model_response` or `model_error` with
    /// the same `request_id`.
    ModelRequest {
        request_id: String,
        request: ModelRequest,
    },
    Heartbeat {},
    /// The final diff of an execution run.
    Patch {
        diff: String,
    },
    /// The agent is done and about to exit.
    Done {
        usage: Usage,
    },
}

/// Frames the server writes to the agent's stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    Hello {
        protocol_version: u32,
    },
    /// Settings, the prompt, and a transcript to resume from (empty for a new session).
    Start {
        settings: StartSettings,
        transcript: Vec<EventBody>,
    },
    ModelResponse {
        request_id: String,
        response: ModelResponse,
    },
    ModelError {
        request_id: String,
        error: ModelError,
    },
    /// A user event: a plan decision or a message.
    UserEvent {
        event: EventBody,
    },
    Stop {
        reason: String,
    },
}

/// Why a frame could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds the {max}-byte limit")]
    TooLarge { size: usize, max: usize },
    #[error("malformed frame: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// Serialise a frame as one JSON line (with the trailing newline).
pub fn encode_frame<T: Serialize>(frame: &T) -> Result<Vec<u8>, FrameError> {
    let mut bytes = serde_json::to_vec(frame)?;
    if bytes.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge {
            size: bytes.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    bytes.push(b'\n');
    Ok(bytes)
}

/// Parse one line (newline optional) into a frame.
pub fn decode_frame<T: DeserializeOwned>(line: &[u8]) -> Result<T, FrameError> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    if line.len() > MAX_FRAME_BYTES {
        return Err(FrameError::TooLarge {
            size: line.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    Ok(serde_json::from_slice(line)?)
}

#[cfg(test)]
#[path = "frames_props.rs"]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_as_single_lines() {
        let frames = [
            AgentFrame::Hello {
                protocol_version: 1,
                agent_version: "0.1.0".into(),
            },
            AgentFrame::Heartbeat {},
            AgentFrame::Event {
                event: EventBody::user_text("multi\nline"),
            },
        ];
        for frame in frames {
            let bytes = encode_frame(&frame).expect("encodes");
            assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
            let back: AgentFrame = decode_frame(&bytes).expect("decodes");
            assert_eq!(back, frame);
        }
    }

    /// Found by the frame property test: without serde_json's `float_roundtrip` these came
    /// back one ulp off.
    #[test]
    fn tool_input_floats_cross_frames_exactly() {
        for x in [
            963_134_604_047.533_9_f64,
            -408_228_379_941.229_55,
            0.1,
            1e-300,
        ] {
            let frame = AgentFrame::Event {
                event: EventBody::assistant(vec![crate::events::ContentBlock::tool_use(
                    "t",
                    "Read",
                    serde_json::json!({ "x": x }),
                )]),
            };
            let back: AgentFrame =
                decode_frame(&encode_frame(&frame).expect("encodes")).expect("decodes");
            assert_eq!(back, frame, "{x}");
        }
    }

    #[test]
    fn oversized_and_malformed_frames_are_refused() {
        let huge = vec![b' '; MAX_FRAME_BYTES + 1];
        assert!(matches!(
            decode_frame::<AgentFrame>(&huge),
            Err(FrameError::TooLarge { .. })
        ));
        assert!(matches!(
            decode_frame::<AgentFrame>(b"{\"type\":\"nope\"}"),
            Err(FrameError::Malformed(_))
        ));
        let big_event = AgentFrame::Event {
            event: EventBody::user_text("x".repeat(MAX_FRAME_BYTES)),
        };
        assert!(matches!(
            encode_frame(&big_event),
            Err(FrameError::TooLarge { .. })
        ));
    }
}
