//! The pieces of the interactive prompt that are not IO: the rainbow keyword highlighter, the
//! notice shown under a prompt that will launch, the launch guard, and the prompt itself.

pub mod guard;
pub mod highlight;
pub mod notice;

pub use guard::{Busy, LaunchGuard};
pub use highlight::{RAINBOW, RainbowHighlighter};
pub use notice::{NoticeHinter, notice_text};

use std::borrow::Cow;

use reedline::{Prompt, PromptEditMode, PromptHistorySearch, PromptHistorySearchStatus};

/// The prompt: a plain `› `.
#[derive(Debug, Default, Clone, Copy)]
pub struct UltraplanPrompt;

impl Prompt for UltraplanPrompt {
    fn render_prompt_left(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_right(&self) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn render_prompt_indicator(&self, _mode: PromptEditMode) -> Cow<'_, str> {
        Cow::Borrowed("› ")
    }

    fn render_prompt_multiline_indicator(&self) -> Cow<'_, str> {
        Cow::Borrowed("  ")
    }

    fn render_prompt_history_search_indicator(&self, search: PromptHistorySearch) -> Cow<'_, str> {
        let prefix = match search.status {
            PromptHistorySearchStatus::Passing => "",
            PromptHistorySearchStatus::Failing => "failing ",
        };
        Cow::Owned(format!("({prefix}search: {}) ", search.term))
    }
}
