//! Snipping the middle of a long history.
//!
//! The first user message (instructions and the task) and the most recent messages that fit a
//! token budget are kept; what lies between is replaced by a one-line note. A cut never
//! separates a tool_use from its tool_result.

use ultraplan_protocol::model::Message;

use crate::conversation::{message_chars, safe_cuts, user_text};

/// Where the kept tail starts: the earliest cut (≥ 1) at which the tail fits `keep_tokens`
/// and no tool_result loses its tool_use. When no tail fits, the shortest valid tail.
pub fn tail_start(messages: &[Message], keep_tokens: usize) -> usize {
    let len = messages.len();
    if len <= 2 {
        return len.min(1);
    }
    let safe = safe_cuts(messages);
    let mut suffix_chars = vec![0usize; len + 1];
    for i in (0..len).rev() {
        suffix_chars[i] = suffix_chars[i + 1] + message_chars(&messages[i]);
    }
    let fits = (1..len).find(|&s| safe[s] && suffix_chars[s] / 4 <= keep_tokens);
    fits.or_else(|| (1..len).rev().find(|&s| safe[s]))
        .unwrap_or(1)
}

/// The note that replaces `count` snipped messages.
pub fn snip_note(count: usize) -> String {
    format!(
        "[Earlier conversation snipped: {count} messages were removed to save context. \
         Re-read files if you need details from that part.]"
    )
}

/// The history with its middle snipped so the tail fits `keep_tokens`; unchanged when
/// nothing would be removed.
pub fn snip_middle(messages: &[Message], keep_tokens: usize) -> Vec<Message> {
    let start = tail_start(messages, keep_tokens);
    if start <= 1 {
        return messages.to_vec();
    }
    replace_middle(messages, user_text(snip_note(start - 1)), start)
}

/// The first message, then `note` in place of `messages[1..start]`, then the tail from `start`
/// (`messages` must not be empty, and `start` is at least 1).
pub fn replace_middle(messages: &[Message], note: Message, start: usize) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len() - start + 2);
    out.extend(messages.first().cloned());
    out.push(note);
    out.extend_from_slice(&messages[start..]);
    out
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::ContentBlock;

    use super::*;
    use crate::context::tests::tool_rounds;
    use crate::conversation::{assistant, text_of, tool_calls};

    #[test]
    fn tail_starts_at_valid_cuts_within_budget() {
        // Each round is ~ (4 + 25 + len) chars; with len 400 a round is ~107 tokens.
        let cases = [
            (tool_rounds(0, &["Read"], 400), 10, 1),
            (tool_rounds(1, &["Read"], 400), 10, 1),
            (tool_rounds(5, &["Read"], 400), 1_000_000, 1),
            (tool_rounds(5, &["Read"], 400), 250, 7),
            (tool_rounds(5, &["Read"], 400), 150, 9),
            (tool_rounds(5, &["Read"], 400), 0, 9),
        ];
        for (messages, keep, want) in cases {
            let start = tail_start(&messages, keep);
            assert_eq!(start, want, "{} messages keep {keep}", messages.len());
            assert!(safe_cuts(&messages)[start]);
        }
    }

    #[test]
    fn snipping_keeps_head_note_and_paired_tail() {
        let messages = tool_rounds(6, &["Read"], 400);
        let out = snip_middle(&messages, 250);
        assert_eq!(out[0], messages[0]);
        assert_eq!(text_of(&out[1]), snip_note(8));
        assert_eq!(&out[2..], &messages[9..]);
        assert!(!tool_calls(&out[2]).is_empty(), "tail starts with a call");
        assert_eq!(snip_middle(&messages, 1_000_000), messages);
    }

    #[test]
    fn steering_text_is_a_valid_cut() {
        let mut messages = tool_rounds(2, &["Read"], 4000);
        messages.push(user_text("steer"));
        messages.push(assistant(vec![ContentBlock::text("ok")]));
        let out = snip_middle(&messages, 10);
        assert_eq!(text_of(&out[2]), "steer");
    }
}
