//! Bounded capture of a command's output: the first bytes and a ring of the last bytes, never
//! more, however much the command prints. Rendering keeps the head and the tail of the text
//! and says how many characters were cut from the middle.

use std::collections::VecDeque;

/// Output kept from a command.
#[derive(Debug, Clone)]
pub struct Capture {
    /// Characters the rendering keeps at each end.
    keep_chars: usize,
    /// The first bytes (at most `cap`).
    head: Vec<u8>,
    /// The last bytes after the head (at most `cap`).
    tail: VecDeque<u8>,
    /// Bytes that fell out of the tail ring.
    dropped: u64,
    /// Characters seen in total (UTF-8 lead bytes; invalid bytes count one each).
    chars: u64,
    /// Byte capacity of the head and of the tail: room for `keep_chars` of any width.
    cap: usize,
}

impl Capture {
    /// A capture rendering at most `max_chars` characters (half from each end when cut).
    pub fn new(max_chars: usize) -> Self {
        let keep_chars = max_chars / 2;
        let cap = keep_chars * 4 + 4;
        Capture {
            keep_chars,
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped: 0,
            chars: 0,
            cap,
        }
    }

    /// Adds a chunk of output.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.chars += bytes.iter().filter(|&&b| !is_continuation(b)).count() as u64;
        let room = self.cap - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.cap {
            self.dropped += (self.tail.len() + bytes.len() - self.cap) as u64;
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.cap);
        self.tail.drain(..overflow);
        self.dropped += overflow as u64;
        self.tail.extend(bytes);
    }

    /// The output as text (lossy UTF-8), cut in the middle when longer than the maximum.
    pub fn render(&self) -> String {
        if self.dropped == 0 {
            let mut all = self.head.clone();
            all.extend(self.tail.iter());
            let text = String::from_utf8_lossy(&all).into_owned();
            return self.cut_middle(&text, &text);
        }
        let head = String::from_utf8_lossy(&self.head).into_owned();
        let tail_bytes: Vec<u8> = self.tail.iter().copied().collect();
        let start = tail_bytes
            .iter()
            .position(|&b| !is_continuation(b))
            .unwrap_or(tail_bytes.len());
        let tail = String::from_utf8_lossy(&tail_bytes[start..]).into_owned();
        self.cut_middle(&head, &tail)
    }

    /// `head`'s first and `tail`'s last `keep_chars` characters around a marker, or the whole
    /// text when `head` and `tail` are the same short text.
    fn cut_middle(&self, head: &str, tail: &str) -> String {
        let total = usize::try_from(self.chars).unwrap_or(usize::MAX);
        if self.dropped == 0 && head.chars().count() <= self.keep_chars * 2 {
            return head.to_owned();
        }
        let first: String = head.chars().take(self.keep_chars).collect();
        let tail_len = tail.chars().count();
        let last: String = tail
            .chars()
            .skip(tail_len.saturating_sub(self.keep_chars))
            .collect();
        let cut = total.saturating_sub(self.keep_chars * 2);
        format!("{first}\n\n[… {cut} characters of output cut here …]\n\n{last}")
    }
}

/// Whether `b` continues a multi-byte UTF-8 character.
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(chunks: &[&[u8]], max_chars: usize) -> String {
        let mut capture = Capture::new(max_chars);
        for chunk in chunks {
            capture.push(chunk);
        }
        capture.render()
    }

    #[test]
    fn short_output_is_kept_whole() {
        let cases: [(&[&[u8]], &str); 4] = [
            (&[], ""),
            (&[b"hello\n"], "hello\n"),
            (&[b"a", b"b", b"c"], "abc"),
            (&[b"caf\xc3", b"\xa9 \xff"], "café \u{fffd}"),
        ];
        for (chunks, want) in cases {
            assert_eq!(captured(chunks, 20), want);
        }
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let lines: Vec<String> = (1..=1000).map(|i| format!("{i:04}\n")).collect();
        let chunks: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        for max in [20, 100, 4000] {
            let text = captured(&chunks, max);
            let (head, rest) = text.split_once("\n\n[… ").expect("marker");
            let (marker, tail) = rest.split_once(" …]\n\n").expect("marker end");
            assert_eq!(head.chars().count(), max / 2, "{max}");
            assert_eq!(tail.chars().count(), max / 2, "{max}");
            assert!(head.starts_with("0001\n"), "{max}: {head}");
            assert!(tail.ends_with("1000\n"), "{max}: {tail}");
            assert_eq!(
                marker,
                format!("{} characters of output cut here", 5000 - max)
            );
        }
    }

    #[test]
    fn a_huge_single_chunk_is_bounded() {
        let big = "é".repeat(100_000);
        let mut capture = Capture::new(10);
        capture.push(big.as_bytes());
        assert!(capture.head.len() + capture.tail.len() <= 2 * (5 * 4 + 4));
        let text = capture.render();
        assert!(text.starts_with("ééééé\n"), "{text}");
        assert!(text.ends_with("…]\n\nééééé"), "{text}");
        assert!(text.contains("99990 characters"), "{text}");
        assert!(!text.contains('\u{fffd}'), "{text}");
    }
}
