//! Summary compaction: one model call summarizes the conversation so far; the summary then
//! replaces the older history (the first user message and a short recent tail are kept).

use ultraplan_protocol::model::Message;

use super::snip::{replace_middle, tail_start};
use crate::conversation::user_text;

/// The request appended to the history to obtain the summary.
pub const SUMMARY_INSTRUCTION: &str = "<system-reminder>\nContext is running low. Stop the task \
for a moment and write a summary of the conversation so far that will replace it. You will \
continue from the summary alone, so include everything needed to finish the task:\n\
1. The user's request and every later instruction or answer, quoting feedback on rejected \
plans verbatim.\n\
2. What you explored: files (with paths), the relevant functions and types, and findings with \
line numbers. When implementing: every file changed so far, and the commands run with their \
results.\n\
3. Decisions made and why, and approaches ruled out.\n\
4. The current todo list and the state of the plan (quote the latest plan draft, or the \
approved plan being implemented, verbatim).\n\
5. What remains to do next.\n\
Reply with the summary as plain text only. Do not call any tool.\n</system-reminder>";

/// The history sent for the summary call: `view` followed by the summary request.
pub fn summary_request(mut view: Vec<Message>) -> Vec<Message> {
    view.push(user_text(SUMMARY_INSTRUCTION));
    view
}

/// The message that carries the summary into the new history.
pub fn summary_message(summary: &str) -> Message {
    user_text(format!(
        "<system-reminder>\nThe earlier part of this conversation was summarized to save \
         context. Summary:\n\n{}\n\nContinue the task from where it stands. Re-read files when \
         you need exact details.\n</system-reminder>",
        summary.trim()
    ))
}

/// The history after compaction: first message, summary, then the recent tail that fits
/// `keep_tokens` (cut without separating tool_use from tool_result).
pub fn apply_summary(messages: &[Message], summary: &str, keep_tokens: usize) -> Vec<Message> {
    if messages.is_empty() {
        return vec![summary_message(summary)];
    }
    let start = tail_start(messages, keep_tokens).max(1);
    replace_middle(messages, summary_message(summary), start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tests::tool_rounds;
    use crate::conversation::{safe_cuts, text_of};

    #[test]
    fn summary_replaces_all_but_head_and_tail() {
        // (rounds, keep tokens, expected length after compaction)
        let cases = [
            (0, 100, 2),
            (1, 0, 4),
            (6, 250, 4),
            (6, 450, 6),
            (6, 100_000, 14),
        ];
        for (rounds, keep, want_len) in cases {
            let messages = tool_rounds(rounds, &["Grep"], 800);
            let out = apply_summary(&messages, " the summary ", keep);
            assert_eq!(out.len(), want_len, "{rounds} rounds keep {keep}");
            assert_eq!(out[0], messages[0]);
            assert!(text_of(&out[1]).contains("Summary:\n\nthe summary\n"));
            assert!(safe_cuts(&out)[2], "tail keeps pairs together");
            assert_eq!(&out[2..], &messages[messages.len() + 2 - want_len..]);
        }
        assert_eq!(apply_summary(&[], "s", 10).len(), 1);
    }

    #[test]
    fn summary_request_ends_with_the_instruction() {
        let messages = summary_request(tool_rounds(1, &["Grep"], 800));
        assert_eq!(messages.len(), 4);
        assert_eq!(text_of(&messages[3]), SUMMARY_INSTRUCTION);
        assert!(SUMMARY_INSTRUCTION.contains("Do not call any tool"));
    }
}
