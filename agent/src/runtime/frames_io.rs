//! Frames over the agent's stdin and stdout, each on its own OS thread so the async loop never
//! blocks on a pipe: a reader that decodes server frames into a channel, and a writer that
//! writes and flushes each agent frame in order.

use std::io::{BufRead, Read as _, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;

use thiserror::Error;
use tokio::sync::mpsc::UnboundedSender;
use ultraplan_protocol::constants::MAX_FRAME_BYTES;
use ultraplan_protocol::frames::{AgentFrame, FrameError, ServerFrame, decode_frame, encode_frame};

use super::Incoming;

/// Why no frame could be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReadError {
    #[error("the server closed the agent's stdin")]
    Eof,
    #[error("frame over {max} bytes")]
    TooLarge { max: usize },
    #[error("malformed frame: {0}")]
    Malformed(String),
    #[error("cannot read stdin: {0}")]
    Io(String),
}

/// Reads one line of at most `max` bytes (newline excluded); `None` at end of input.
pub fn read_line_limited<R: BufRead>(
    reader: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, ReadError> {
    let mut line = Vec::new();
    let read = reader
        .by_ref()
        .take(max as u64 + 2)
        .read_until(b'\n', &mut line)
        .map_err(|e| ReadError::Io(e.to_string()))?;
    if read == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    if line.len() > max {
        return Err(ReadError::TooLarge { max });
    }
    Ok(Some(line))
}

/// Reads the next frame, skipping blank lines.
pub fn read_frame<R: BufRead>(reader: &mut R, max: usize) -> Result<ServerFrame, ReadError> {
    loop {
        let line = read_line_limited(reader, max)?.ok_or(ReadError::Eof)?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return decode_frame(&line).map_err(|e| match e {
            FrameError::TooLarge { max, .. } => ReadError::TooLarge { max },
            FrameError::Malformed(e) => ReadError::Malformed(e.to_string()),
        });
    }
}

/// Reads frames on a thread until the first error (end of input included), which is the last
/// thing sent.
pub fn spawn_reader<R: BufRead + Send + 'static>(mut reader: R, tx: UnboundedSender<Incoming>) {
    std::thread::spawn(move || {
        loop {
            let frame = read_frame(&mut reader, MAX_FRAME_BYTES);
            let last = frame.is_err();
            if tx.send(Incoming::Frame(frame)).is_err() || last {
                break;
            }
        }
    });
}

enum WriterMsg {
    Bytes(Vec<u8>),
    Close,
}

/// Sends frames to the writer thread. Cheap to clone.
#[derive(Clone)]
pub struct FrameSender(mpsc::Sender<WriterMsg>);

impl FrameSender {
    /// Queues a frame; a frame that cannot be encoded (over the size limit) is logged and
    /// dropped. Returns whether it was queued.
    pub fn send(&self, frame: &AgentFrame) -> bool {
        match encode_frame(frame) {
            Ok(bytes) => self.0.send(WriterMsg::Bytes(bytes)).is_ok(),
            Err(e) => {
                tracing::error!(error = %e, "dropping a frame that cannot be encoded");
                false
            }
        }
    }
}

/// The writer thread.
pub struct FrameWriter {
    sender: FrameSender,
    thread: JoinHandle<()>,
}

impl FrameWriter {
    /// Starts writing to `output`. On a write error, `Incoming::OutputClosed` goes to `tx`.
    pub fn spawn<W: Write + Send + 'static>(mut output: W, tx: UnboundedSender<Incoming>) -> Self {
        let (send, recv) = mpsc::channel::<WriterMsg>();
        let thread = std::thread::spawn(move || {
            while let Ok(WriterMsg::Bytes(bytes)) = recv.recv() {
                if let Err(e) = output.write_all(&bytes).and_then(|()| output.flush()) {
                    tracing::error!(error = %e, "cannot write to stdout");
                    let _ = tx.send(Incoming::OutputClosed);
                    break;
                }
            }
        });
        FrameWriter {
            sender: FrameSender(send),
            thread,
        }
    }

    /// A handle to queue frames.
    pub fn sender(&self) -> FrameSender {
        self.sender.clone()
    }

    /// Writes what is queued, then stops the thread.
    pub fn close(self) {
        let _ = self.sender.0.send(WriterMsg::Close);
        if self.thread.join().is_err() {
            tracing::error!("the frame writer panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// (input, limit, expected line)
    type Case = (
        &'static [u8],
        usize,
        Result<Option<&'static [u8]>, ReadError>,
    );

    #[test]
    fn lines_are_read_within_the_limit() {
        let cases: [Case; 5] = [
            (b"abc\nrest", 3, Ok(Some(b"abc"))),
            (b"abc", 3, Ok(Some(b"abc"))),
            (b"", 3, Ok(None)),
            (b"abcd\n", 3, Err(ReadError::TooLarge { max: 3 })),
            (b"abcdefgh", 3, Err(ReadError::TooLarge { max: 3 })),
        ];
        for (input, max, want) in cases {
            let got = read_line_limited(&mut Cursor::new(input), max);
            assert_eq!(got, want.map(|o| o.map(<[u8]>::to_vec)), "{input:?}");
        }
    }

    #[test]
    fn frames_decode_or_fail_with_a_reason() {
        let mut input =
            Cursor::new(b"\n{\"type\":\"hello\",\"protocol_version\":1}\nnot json\n".to_vec());
        assert_eq!(
            read_frame(&mut input, 1000),
            Ok(ServerFrame::Hello {
                protocol_version: 1
            })
        );
        assert!(matches!(
            read_frame(&mut input, 1000),
            Err(ReadError::Malformed(_))
        ));
        assert_eq!(read_frame(&mut input, 1000), Err(ReadError::Eof));
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writer_writes_frames_in_order_then_closes() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let out = Shared::default();
        let writer = FrameWriter::spawn(out.clone(), tx);
        let sender = writer.sender();
        assert!(sender.send(&AgentFrame::Heartbeat {}));
        assert!(sender.send(&AgentFrame::Patch { diff: "d".into() }));
        writer.close();
        let text = String::from_utf8(out.0.lock().expect("lock").clone()).expect("utf8");
        assert_eq!(
            text,
            "{\"type\":\"heartbeat\"}\n{\"type\":\"patch\",\"diff\":\"d\"}\n"
        );
        assert!(
            !sender.send(&AgentFrame::Heartbeat {}),
            "closed writer refuses"
        );
    }
}
