//! The opening of the frame protocol: the agent has sent its `hello`; the server answers with
//! its own, then `start`. Anything else before `start` ends the agent with exit code 2.

use thiserror::Error;
use ultraplan_protocol::EventBody;
use ultraplan_protocol::constants::FRAME_PROTOCOL_VERSION;
use ultraplan_protocol::frames::{ServerFrame, StartSettings};

use super::frames_io::ReadError;

/// Why the handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandshakeError {
    #[error("protocol version mismatch: the server speaks {theirs}, this agent {ours}")]
    VersionMismatch { ours: u32, theirs: u32 },
    #[error("expected the server's {expected} frame, got `{got}`")]
    Unexpected { expected: &'static str, got: String },
    #[error("{0} before the start frame")]
    Read(ReadError),
    #[error("stdout closed before the start frame")]
    OutputClosed,
}

/// How the handshake ended well.
#[derive(Debug, Clone, PartialEq)]
pub enum Opened {
    Start {
        settings: StartSettings,
        transcript: Vec<EventBody>,
    },
    /// The server sent `stop` before `start`.
    Stopped,
}

/// The handshake as a state machine: feed frames until it yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Handshake {
    #[default]
    AwaitHello,
    AwaitStart,
}

impl Handshake {
    /// Takes the next frame; `Ok(None)` means "keep reading".
    pub fn feed(&mut self, frame: ServerFrame) -> Result<Option<Opened>, HandshakeError> {
        match (*self, frame) {
            (_, ServerFrame::Stop { reason }) => {
                tracing::info!(%reason, "stopped before start");
                Ok(Some(Opened::Stopped))
            }
            (Handshake::AwaitHello, ServerFrame::Hello { protocol_version }) => {
                if protocol_version != FRAME_PROTOCOL_VERSION {
                    return Err(HandshakeError::VersionMismatch {
                        ours: FRAME_PROTOCOL_VERSION,
                        theirs: protocol_version,
                    });
                }
                *self = Handshake::AwaitStart;
                Ok(None)
            }
            (
                Handshake::AwaitStart,
                ServerFrame::Start {
                    settings,
                    transcript,
                },
            ) => Ok(Some(Opened::Start {
                settings,
                transcript,
            })),
            (state, other) => Err(HandshakeError::Unexpected {
                expected: match state {
                    Handshake::AwaitHello => "hello",
                    Handshake::AwaitStart => "start",
                },
                got: frame_name(&other).to_owned(),
            }),
        }
    }
}

fn frame_name(frame: &ServerFrame) -> &'static str {
    match frame {
        ServerFrame::Hello { .. } => "hello",
        ServerFrame::Start { .. } => "start",
        ServerFrame::ModelResponse { .. } => "model_response",
        ServerFrame::ModelError { .. } => "model_error",
        ServerFrame::UserEvent { .. } => "user_event",
        ServerFrame::Stop { .. } => "stop",
    }
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::frames::AgentMode;
    use ultraplan_protocol::session::PromptVariant;

    use super::*;

    fn start() -> ServerFrame {
        ServerFrame::Start {
            settings: StartSettings {
                session_id: "s".into(),
                mode: AgentMode::Plan,
                prompt_variant: PromptVariant::SimplePlan,
                model: "offline".into(),
                max_turns: 10,
                draft_plan: None,
            },
            transcript: vec![EventBody::user_text("p")],
        }
    }

    fn hello(v: u32) -> ServerFrame {
        ServerFrame::Hello {
            protocol_version: v,
        }
    }

    fn stop() -> ServerFrame {
        ServerFrame::Stop {
            reason: "bye".into(),
        }
    }

    fn run(frames: Vec<ServerFrame>) -> Result<Option<Opened>, HandshakeError> {
        let mut state = Handshake::default();
        for frame in frames {
            if let Some(opened) = state.feed(frame)? {
                return Ok(Some(opened));
            }
        }
        Ok(None)
    }

    #[test]
    fn handshake_outcomes() {
        let ok = |r: &Result<Option<Opened>, HandshakeError>| {
            matches!(r, Ok(Some(Opened::Start { .. })))
        };
        assert!(ok(&run(vec![hello(1), start()])));
        assert_eq!(run(vec![hello(1), stop()]), Ok(Some(Opened::Stopped)));
        assert_eq!(run(vec![hello(1)]), Ok(None));
        let cases = [
            (
                vec![hello(2)],
                "protocol version mismatch: the server speaks 2, this agent 1",
            ),
            (
                vec![start()],
                "expected the server's hello frame, got `start`",
            ),
            (
                vec![hello(1), hello(1)],
                "expected the server's start frame, got `hello`",
            ),
        ];
        for (frames, want) in cases {
            let err = run(frames).expect_err("fails");
            assert_eq!(err.to_string(), want);
        }
        assert_eq!(
            HandshakeError::Read(ReadError::Eof).to_string(),
            "the server closed the agent's stdin before the start frame"
        );
    }
}
