//! A small Server-Sent Events decoder (bytes in, events out) and the loop that feeds a provider's
//! stream assembler from a response body.

use std::time::Duration;

use futures_util::StreamExt;
use ultraplan_protocol::model::ModelResponse;

use super::retry::Failure;

/// Longest line accepted; a provider never sends more in one SSE line.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct SseEvent {
    /// The `event:` field, if any.
    pub(super) event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub(super) data: String,
}

/// Incremental decoder: push body chunks, get complete events. Handles `\n` and `\r\n` line
/// ends, comments, multi-line data, and chunks split anywhere (even inside a UTF-8 character).
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    buffer: Vec<u8>,
    /// Bytes of `buffer` already known to hold no newline.
    scanned: usize,
    event: Option<String>,
    data: Option<String>,
}

impl SseDecoder {
    /// Feed bytes; returns the events completed by them.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, Failure> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(offset) = self.buffer[self.scanned..].iter().position(|&b| b == b'\n') {
            let end = self.scanned + offset;
            self.scanned = 0;
            let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if let Some(event) = self.line(&String::from_utf8_lossy(&line)) {
                events.push(event);
            }
        }
        self.scanned = self.buffer.len();
        if self.buffer.len() > MAX_LINE_BYTES {
            return Err(Failure::Malformed("SSE line too long".to_owned()));
        }
        Ok(events)
    }

    /// The body ended: dispatch a last event that had no blank line after it.
    pub(super) fn finish(&mut self) -> Option<SseEvent> {
        if !self.buffer.is_empty() {
            let rest = std::mem::take(&mut self.buffer);
            self.scanned = 0;
            let line = String::from_utf8_lossy(&rest)
                .trim_end_matches('\r')
                .to_owned();
            if let Some(event) = self.line(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        let data = self.data.take()?;
        Some(SseEvent { event, data })
    }
}

/// Turns a provider's events into a [`ModelResponse`].
pub(super) trait StreamAssembler {
    /// Handle one event; `Ok(true)` when the stream is complete.
    fn on_event(&mut self, event: &SseEvent) -> Result<bool, Failure>;
    /// The assembled response, or why the stream was incomplete.
    fn finish(self) -> Result<ModelResponse, Failure>;
}

/// Read an SSE body to its end (or the assembler's completion) and assemble it. A body that
/// sends nothing for `idle` fails as a (retryable) transport failure: a provider that stalls
/// mid-stream must not hold the session until the whole-request timeout.
pub(super) async fn read_stream<A: StreamAssembler>(
    response: reqwest::Response,
    mut assembler: A,
    idle: Duration,
) -> Result<ModelResponse, Failure> {
    let mut decoder = SseDecoder::default();
    let mut body = response.bytes_stream();
    loop {
        let Ok(next) = tokio::time::timeout(idle, body.next()).await else {
            return Err(Failure::Transport(format!(
                "stream stalled: no data for {} ms",
                idle.as_millis()
            )));
        };
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| Failure::transport("stream interrupted", &e))?;
        for event in decoder.push(&chunk)? {
            if assembler.on_event(&event)? {
                return assembler.finish();
            }
        }
    }
    if let Some(event) = decoder.finish() {
        assembler.on_event(&event)?;
    }
    assembler.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    fn decode_all(input: &str) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
        let mut events = decoder.push(input.as_bytes()).unwrap();
        events.extend(decoder.finish());
        events
    }

    #[test]
    fn decodes_the_shapes_providers_send() {
        let cases = [
            ("event: ping\ndata: {}\n\n", vec![ev(Some("ping"), "{}")]),
            ("data: [DONE]\n\n", vec![ev(None, "[DONE]")]),
            ("data:no-space\r\n\r\n", vec![ev(None, "no-space")]),
            ("data: a\ndata: b\n\n", vec![ev(None, "a\nb")]),
            (": keep-alive\n\ndata: x\n\n", vec![ev(None, "x")]),
            ("event: only\n\n", vec![]),
            ("id: 7\nretry: 10\ndata: y\n\n", vec![ev(None, "y")]),
            (
                "data: tail-without-blank-line",
                vec![ev(None, "tail-without-blank-line")],
            ),
            (
                "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n",
                vec![ev(Some("a"), "1"), ev(Some("b"), "2")],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(decode_all(input), want, "{input:?}");
        }
    }

    #[test]
    fn chunk_boundaries_do_not_matter() {
        let input =
            "event: content_block_delta\r\ndata: {\"text\":\"héllo ✓\"}\r\n\r\ndata: [DONE]\n\n";
        let want = decode_all(input);
        let bytes = input.as_bytes();
        for split in 0..=bytes.len() {
            let mut decoder = SseDecoder::default();
            let mut got = decoder.push(&bytes[..split]).unwrap();
            got.extend(decoder.push(&bytes[split..]).unwrap());
            got.extend(decoder.finish());
            assert_eq!(got, want, "split at {split}");
        }
        let mut decoder = SseDecoder::default();
        let mut got = Vec::new();
        for byte in bytes {
            got.extend(decoder.push(std::slice::from_ref(byte)).unwrap());
        }
        assert_eq!(got, want);
    }
}
