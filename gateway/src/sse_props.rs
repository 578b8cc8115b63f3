//! Property tests of the SSE decoder and both providers' stream assemblers:
//! - any byte stream (random bytes rich in `\r`, `\n`, `:`, field names and split UTF-8) decodes
//!   to the same events whatever the chunking, and never panics;
//! - a valid Anthropic or OpenAI stream for a random response (text, thinking, tool calls with
//!   arbitrary JSON input, usage), with its text and JSON split into random deltas, pings and
//!   comments, `\n` or `\r\n` lines, cut into random chunks (inside UTF-8 characters and CRLF
//!   pairs too), assembles to exactly that response;
//! - random event sequences never panic either assembler.
//!
//! `PROPTEST_CASES=N` runs more cases (see fuzz/README.md).

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::Config;
use serde_json::{Value, json};
use ultraplan_protocol::model::ModelResponse;

use super::AnthropicStream;
use crate::openai_stream::OpenAiStream;
use crate::retry::Failure;
use crate::sse::{SseDecoder, SseEvent, StreamAssembler};
use answers::{answer, anthropic_events, anthropic_expected, openai_events, openai_expected};

#[path = "sse_props_answers.rs"]
mod answers;

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

/// `bytes` cut at `cuts` (any byte offsets).
fn chunks<'a>(bytes: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.windows(2).map(|w| &bytes[w[0]..w[1]]).collect()
}

fn decode(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, Failure> {
    let mut decoder = SseDecoder::default();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(decoder.push(chunk)?);
    }
    events.extend(decoder.finish());
    Ok(events)
}

/// What `read_stream` does with decoded events.
fn assemble<A: StreamAssembler>(
    mut assembler: A,
    events: &[SseEvent],
) -> Result<ModelResponse, Failure> {
    for event in events {
        if assembler.on_event(event)? {
            break;
        }
    }
    assembler.finish()
}

/// `text` split at random char boundaries into non-empty pieces (none when it is empty).
fn pieces(text: &str, cuts: &[Index]) -> Vec<String> {
    let bounds: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    let mut at: Vec<usize> = cuts.iter().map(|c| *c.get(&bounds)).collect();
    at.push(0);
    at.push(text.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| text[w[0]..w[1]].to_owned()).collect()
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,30}",
        prop::collection::vec(
            prop::sample::select(vec![
                "a", " ", "\n", "\r\n", "\r", "\"", "\\", "é", "日本", "🚀", "data: x", ":",
                "\u{0}", "\u{2028}", "event: y",
            ]),
            0..12,
        )
        .prop_map(|p| p.concat()),
    ]
}

fn json_object() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        text().prop_map(Value::String),
    ];
    let value = leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop::collection::btree_map(text(), value, 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// How the events become bytes: line ends, comments and where the byte stream is cut.
#[derive(Debug, Clone)]
struct Wire {
    crlf: Vec<bool>,
    comments: Vec<bool>,
    cuts: Vec<Index>,
}

fn wire() -> impl Strategy<Value = Wire> {
    (
        prop::collection::vec(any::<bool>(), 1..8),
        prop::collection::vec(prop::bool::weighted(0.15), 1..8),
        prop::collection::vec(any::<Index>(), 0..24),
    )
        .prop_map(|(crlf, comments, cuts)| Wire {
            crlf,
            comments,
            cuts,
        })
}

/// SSE bytes for `(event name, data)` pairs.
fn to_bytes(events: &[(Option<&str>, String)], wire: &Wire) -> Vec<u8> {
    let mut out = String::new();
    for (i, (name, data)) in events.iter().enumerate() {
        let eol = if wire.crlf[i % wire.crlf.len()] {
            "\r\n"
        } else {
            "\n"
        };
        if wire.comments[i % wire.comments.len()] {
            out.push_str(&format!(": keep-alive{eol}{eol}"));
        }
        if let Some(name) = name {
            out.push_str(&format!("event: {name}{eol}"));
        }
        out.push_str(&format!("data: {data}{eol}{eol}"));
    }
    out.into_bytes()
}

/// Bytes rich in what the decoder looks at.
fn sse_noise() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            6 => prop::sample::select(vec![
                &b"data"[..], b"event", b"id", b"retry", b":", b": ", b" ", b"\n", b"\r\n",
                b"\r", b"x", b"{}", b"[DONE]", "é".as_bytes(), "🚀".as_bytes(),
            ])
            .prop_map(<[u8]>::to_vec),
            1 => prop::collection::vec(any::<u8>(), 1..4),
        ],
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

/// Event data that walks deep into the assemblers: known shapes with random indices and
/// kinds, broken JSON, and random text.
fn assembler_event() -> impl Strategy<Value = SseEvent> {
    let kind = prop::sample::select(vec![
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
        "other",
    ]);
    let delta = prop::sample::select(vec![
        json!({"type": "text_delta", "text": "t"}),
        json!({"type": "input_json_delta", "partial_json": "{\"a\""}),
        json!({"type": "input_json_delta", "partial_json": "}"}),
        json!({"type": "thinking_delta", "thinking": "h"}),
        json!({"type": "signature_delta", "signature": "s"}),
        json!({"type": "mystery"}),
        json!(7),
    ]);
    let block = prop::sample::select(vec![
        json!({"type": "text", "text": "x"}),
        json!({"type": "tool_use", "id": "t", "name": "n", "input": {"k": 1}}),
        json!({"type": "tool_use", "id": "t", "name": "n"}),
        json!({"type": "thinking", "thinking": ""}),
        json!({"type": "server_tool_use"}),
        json!(null),
    ]);
    let shaped = (kind, 0usize..4, delta, block, any::<bool>()).prop_map(
        |(kind, index, delta, block, openai)| {
            let data = if openai {
                json!({"id": "c", "choices": [{"index": index % 2, "delta": {"content": "x",
                    "tool_calls": [{"index": index, "id": kind, "function":
                        {"name": "f", "arguments": delta.to_string()}}]},
                    "finish_reason": if index == 3 { json!("length") } else { Value::Null }}],
                    "usage": if index == 2 { json!({"prompt_tokens": 1}) } else { Value::Null }})
            } else {
                json!({"type": kind, "index": index, "delta": delta, "content_block": block,
                    "message": {"id": "m", "model": "x", "usage": {"input_tokens": index}},
                    "usage": {"output_tokens": index}, "error": {"type": "overloaded_error"}})
            };
            data.to_string()
        },
    );
    prop_oneof![
        6 => shaped,
        1 => Just("[DONE]".to_owned()),
        1 => text(),
    ]
    .prop_map(|data| SseEvent { event: None, data })
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn decoding_ignores_chunking(bytes in sse_noise(), cuts in prop::collection::vec(any::<Index>(), 0..12)) {
        let whole = decode(&[&bytes]);
        let split = decode(&chunks(&bytes, &cuts));
        let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        let bytewise = decode(&one_by_one);
        prop_assert_eq!(format!("{whole:?}"), format!("{split:?}"));
        prop_assert_eq!(format!("{whole:?}"), format!("{bytewise:?}"));
    }

    #[test]
    fn random_bytes_never_panic_the_decoder(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        cuts in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let events = decode(&chunks(&bytes, &cuts));
        prop_assert!(events.is_ok());
    }

    #[test]
    fn anthropic_streams_assemble_whatever_the_splits(a in answer(), wire in wire()) {
        let bytes = to_bytes(&anthropic_events(&a), &wire);
        let events = decode(&chunks(&bytes, &wire.cuts)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = assemble(AnthropicStream::default(), &events)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, anthropic_expected(&a));
    }

    #[test]
    fn openai_streams_assemble_whatever_the_splits(a in answer(), wire in wire()) {
        let bytes = to_bytes(&openai_events(&a), &wire);
        let events = decode(&chunks(&bytes, &wire.cuts)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = assemble(OpenAiStream::default(), &events)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, openai_expected(&a));
    }

    #[test]
    fn random_event_sequences_never_panic_the_assemblers(
        events in prop::collection::vec(assembler_event(), 0..16),
    ) {
        // Errors are fine (and expected for most sequences); panics are not.
        let _ = assemble(AnthropicStream::default(), &events);
        let _ = assemble(OpenAiStream::default(), &events);
    }
}
