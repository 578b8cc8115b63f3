//! Property tests of the frame codec:
//! - random agent and server frames (events with arbitrary JSON tool inputs, model requests and
//!   responses, any text) encode to exactly one line and decode to the same frame;
//! - random bytes, and valid lines cut or with a byte changed, never panic the decoder, and
//!   whatever it accepts re-encodes to a frame that decodes the same;
//! - the size cap holds at its exact boundary, whichever characters fill the frame;
//! - any `u32` protocol version decodes as sent (the handshake compares it), any other value is
//!   refused.
//!
//! `PROPTEST_CASES=N` runs more cases (see fuzz/README.md).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use super::{
    AgentFrame, AgentMode, FrameError, ServerFrame, StartSettings, decode_frame, encode_frame,
};
use crate::constants::MAX_FRAME_BYTES;
use crate::events::{ContentBlock, EventBody};
use crate::model::{
    Message, ModelError, ModelErrorKind, ModelRequest, ModelResponse, StopReason, SystemBlock,
    ToolDefinition, Usage,
};
use crate::session::PromptVariant;

fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Text with the characters JSON escapes (quotes, backslashes, controls, newlines) and
/// non-ASCII, including astral-plane characters.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,40}",
        prop::collection::vec(
            prop::sample::select(vec![
                "a", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1f}", "\u{7f}", "é", "\u{2028}",
                "🚀", "\u{feff}", " ", "}", "{",
            ]),
            0..20,
        )
        .prop_map(|parts| parts.concat()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        // Floats that JSON can carry (finite); serde_json prints the shortest exact form.
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn block() -> impl Strategy<Value = ContentBlock> {
    prop_oneof![
        text().prop_map(ContentBlock::text),
        (text(), text(), json_value()).prop_map(|(id, name, input)| {
            // `input` of a tool_use is an object on the wire.
            let input = match input {
                Value::Object(_) => input,
                other => json!({ "value": other }),
            };
            ContentBlock::tool_use(id, name, input)
        }),
        (text(), prop::option::of(text())).prop_map(|(thinking, signature)| {
            ContentBlock::Thinking {
                thinking,
                signature,
            }
        }),
    ]
}

fn event() -> impl Strategy<Value = EventBody> {
    prop_oneof![
        text().prop_map(EventBody::user_text),
        (text(), text(), any::<bool>()).prop_map(|(id, t, e)| EventBody::tool_result(&id, t, e)),
        prop::collection::vec(block(), 0..4).prop_map(EventBody::assistant),
    ]
}

fn usage() -> impl Strategy<Value = Usage> {
    any::<[u64; 4]>().prop_map(|[a, b, c, d]| Usage {
        input_tokens: a,
        output_tokens: b,
        cache_read_input_tokens: c,
        cache_creation_input_tokens: d,
    })
}

fn request() -> impl Strategy<Value = ModelRequest> {
    (
        prop::option::of(text()),
        any::<u32>(),
        prop::collection::vec(text().prop_map(SystemBlock::text), 0..2),
        prop::collection::vec(prop::collection::vec(block(), 0..3), 0..3),
        prop::option::of(-10.0f32..10.0),
        prop::collection::vec((text(), json_value()), 0..2),
    )
        .prop_map(
            |(model, max_tokens, system, messages, temperature, tools)| ModelRequest {
                model,
                max_tokens,
                system,
                messages: messages
                    .into_iter()
                    .map(|content| Message {
                        role: crate::events::Role::Assistant,
                        content,
                    })
                    .collect(),
                tools: tools
                    .into_iter()
                    .map(|(name, input_schema)| ToolDefinition {
                        description: name.clone(),
                        name,
                        input_schema,
                        cache_control: None,
                    })
                    .collect(),
                temperature,
            },
        )
}

fn agent_frame() -> impl Strategy<Value = AgentFrame> {
    prop_oneof![
        (any::<u32>(), text()).prop_map(|(protocol_version, agent_version)| AgentFrame::Hello {
            protocol_version,
            agent_version
        }),
        event().prop_map(|event| AgentFrame::Event { event }),
        (text(), request()).prop_map(|(request_id, request)| AgentFrame::ModelRequest {
            request_id,
            request
        }),
        Just(AgentFrame::Heartbeat {}),
        text().prop_map(|diff| AgentFrame::Patch { diff }),
        usage().prop_map(|usage| AgentFrame::Done { usage }),
    ]
}

fn server_frame() -> impl Strategy<Value = ServerFrame> {
    let stop = prop::sample::select(vec![
        None,
        Some(StopReason::EndTurn),
        Some(StopReason::ToolUse),
        Some(StopReason::MaxTokens),
        Some(StopReason::Refusal),
    ]);
    let kind = prop::sample::select(vec![
        ModelErrorKind::PromptTooLong,
        ModelErrorKind::BudgetExhausted,
        ModelErrorKind::Unavailable,
        ModelErrorKind::InvalidRequest,
    ]);
    prop_oneof![
        any::<u32>().prop_map(|protocol_version| ServerFrame::Hello { protocol_version }),
        (
            text(),
            any::<bool>(),
            any::<u32>(),
            prop::option::of(text()),
            prop::collection::vec(event(), 0..3),
        )
            .prop_map(|(session_id, exec, max_turns, draft_plan, transcript)| {
                ServerFrame::Start {
                    settings: StartSettings {
                        session_id,
                        mode: if exec {
                            AgentMode::Execute
                        } else {
                            AgentMode::Plan
                        },
                        prompt_variant: PromptVariant::VisualPlan,
                        model: "offline".to_owned(),
                        max_turns,
                        draft_plan,
                    },
                    transcript,
                }
            }),
        (
            text(),
            text(),
            prop::collection::vec(block(), 0..3),
            stop,
            usage()
        )
            .prop_map(|(request_id, id, content, stop_reason, usage)| {
                ServerFrame::ModelResponse {
                    request_id,
                    response: ModelResponse {
                        id,
                        model: "m".to_owned(),
                        content,
                        stop_reason,
                        usage,
                    },
                }
            }),
        (text(), kind, text()).prop_map(|(request_id, kind, message)| ServerFrame::ModelError {
            request_id,
            error: ModelError { kind, message },
        }),
        event().prop_map(|event| ServerFrame::UserEvent { event }),
        text().prop_map(|reason| ServerFrame::Stop { reason }),
    ]
}

/// One line, newline-terminated, that decodes to `frame`.
fn round_trips<T>(frame: &T) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bytes = encode_frame(frame).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(bytes.last(), Some(&b'\n'));
    prop_assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
    let back: T = decode_frame(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, frame);
    Ok(())
}

/// Decoding never panics; an accepted frame is stable under re-encoding.
fn decodes_soundly(line: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(frame) = decode_frame::<AgentFrame>(line) {
        round_trips(&frame)?;
    }
    if let Ok(frame) = decode_frame::<ServerFrame>(line) {
        round_trips(&frame)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn agent_frames_round_trip(frame in agent_frame()) {
        round_trips(&frame)?;
    }

    #[test]
    fn server_frames_round_trip(frame in server_frame()) {
        round_trips(&frame)?;
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        decodes_soundly(&bytes)?;
    }

    #[test]
    fn damaged_lines_never_panic(
        frame in agent_frame(),
        cut in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut bytes = encode_frame(&frame).map_err(|e| TestCaseError::fail(e.to_string()))?;
        decodes_soundly(&bytes[..cut.index(bytes.len() + 1)])?;
        let i = at.index(bytes.len());
        bytes[i] = byte;
        decodes_soundly(&bytes)?;
    }

    #[test]
    fn any_u32_version_decodes_as_sent(version in any::<u32>()) {
        let line = format!(r#"{{"type":"hello","protocol_version":{version},"agent_version":"x"}}"#);
        let frame: AgentFrame = decode_frame(line.as_bytes())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(frame, AgentFrame::Hello {
            protocol_version: version,
            agent_version: "x".to_owned(),
        });
        let line = format!(r#"{{"type":"hello","protocol_version":{version}}}"#);
        let frame: ServerFrame = decode_frame(line.as_bytes())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(frame, ServerFrame::Hello { protocol_version: version });
    }

    #[test]
    fn versions_outside_u32_are_refused(
        version in prop_oneof![
            (u32::MAX as u64 + 1..=u64::MAX).prop_map(|n| n.to_string()),
            (i64::MIN..0).prop_map(|n| n.to_string()),
            (0.5f64..1e6).prop_map(|f| format!("{f:?}")),
            "\"[0-9]{1,4}\"",
            Just("null".to_owned()),
        ],
    ) {
        let line = format!(r#"{{"type":"hello","protocol_version":{version}}}"#);
        prop_assert!(matches!(
            decode_frame::<ServerFrame>(line.as_bytes()),
            Err(FrameError::Malformed(_))
        ), "{}", line);
    }
}

/// The size cap at its exact boundary. Each case builds 8 MiB frames, so this runs a fixed 12
/// cases whatever `PROPTEST_CASES` says (the `proptest!` macro would apply it).
#[test]
fn the_size_cap_holds_at_its_boundary() {
    let config = Config {
        cases: 12,
        failure_persistence: None,
        ..Config::default()
    };
    let strategy = (
        prop::sample::select(vec!["a", "é", "\"", "\n", "\u{1}", "🚀"]),
        -3i64..=3,
    );
    let result = TestRunner::new(config).run(&strategy, |(fill, delta)| {
        let overhead = encode_frame(&AgentFrame::Patch {
            diff: String::new(),
        })
        .map_err(|e| TestCaseError::fail(e.to_string()))?
        .len()
            - 1;
        let per = serde_json::to_string(fill).unwrap_or_default().len() - 2;
        let target = MAX_FRAME_BYTES as i64 + delta * per as i64;
        let count = usize::try_from((target - overhead as i64) / per as i64).unwrap_or(0);
        let frame = AgentFrame::Patch {
            diff: fill.repeat(count),
        };
        let size = overhead + count * per;
        match encode_frame(&frame) {
            Ok(bytes) => {
                prop_assert!(size <= MAX_FRAME_BYTES, "{} bytes encoded", size);
                prop_assert_eq!(bytes.len(), size + 1);
                let back: AgentFrame =
                    decode_frame(&bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(back, frame);
            }
            Err(FrameError::TooLarge { size: got, max }) => {
                prop_assert!(size > MAX_FRAME_BYTES, "{} bytes refused", size);
                prop_assert_eq!((got, max), (size, MAX_FRAME_BYTES));
                // The decoder refuses the same line on its length alone.
                let mut line = serde_json::to_vec(&frame).unwrap_or_default();
                let refused = matches!(
                    decode_frame::<AgentFrame>(&line),
                    Err(FrameError::TooLarge { .. })
                );
                prop_assert!(refused, "a line of {} bytes decoded", line.len());
                line.push(b'\n');
                let refused = matches!(
                    decode_frame::<AgentFrame>(&line),
                    Err(FrameError::TooLarge { .. })
                );
                prop_assert!(refused, "a line of {} bytes decoded", line.len());
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
