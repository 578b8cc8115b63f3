//! The notice under a prompt that will launch an ultraplan session, drawn as a reedline hint
//! (it is never inserted into the buffer).

use nu_ansi_term::{Color, Style};
use reedline::{Hinter, History};

use crate::keyword;

/// The notice for a server.
pub fn notice_text(server: &str) -> String {
    format!("This prompt will launch an ultraplan session on {server}")
}

/// Shows the notice on the line below the prompt while the text triggers.
#[derive(Debug, Clone)]
pub struct NoticeHinter {
    server: String,
}

impl NoticeHinter {
    pub fn new(server: &str) -> Self {
        Self {
            server: server.to_owned(),
        }
    }
}

impl Hinter for NoticeHinter {
    fn handle(
        &mut self,
        line: &str,
        _pos: usize,
        _history: &dyn History,
        use_ansi_coloring: bool,
        _cwd: &str,
    ) -> String {
        if !keyword::detect(line).triggered() {
            return String::new();
        }
        let text = format!("◇ {}", notice_text(&self.server));
        if use_ansi_coloring {
            format!("\n{}", Style::new().fg(Color::DarkGray).paint(text))
        } else {
            format!("\n{text}")
        }
    }

    fn complete_hint(&self) -> String {
        String::new()
    }

    fn next_hint_token(&self) -> String {
        String::new()
    }
}
