//! Live rainbow highlighting of every keyword trigger in the prompt being typed.

use nu_ansi_term::{Color, Style};
use reedline::{Highlighter, StyledText};

use crate::keyword;

/// The rainbow, one colour per letter, cycling.
pub const RAINBOW: [(u8, u8, u8); 7] = [
    (235, 95, 87),
    (245, 139, 87),
    (250, 195, 95),
    (145, 200, 130),
    (130, 170, 220),
    (155, 130, 200),
    (200, 130, 180),
];

/// Colours each character of each trigger with the next rainbow colour.
#[derive(Debug, Default, Clone, Copy)]
pub struct RainbowHighlighter;

impl Highlighter for RainbowHighlighter {
    fn highlight(&self, line: &str, _cursor: usize) -> StyledText {
        let mut styled = StyledText::new();
        let mut at = 0;
        for trigger in keyword::detect(line).triggers {
            if trigger.start > at {
                styled.push((Style::new(), line[at..trigger.start].to_owned()));
            }
            for (i, c) in line[trigger.start..trigger.end].chars().enumerate() {
                let (r, g, b) = RAINBOW[i % RAINBOW.len()];
                styled.push((Style::new().bold().fg(Color::Rgb(r, g, b)), c.to_string()));
            }
            at = trigger.end;
        }
        if at < line.len() {
            styled.push((Style::new(), line[at..].to_owned()));
        }
        styled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_are_painted_letter_by_letter_and_text_is_kept() {
        let line = "please ultraplan it, not ultraplan.md";
        let styled = RainbowHighlighter.highlight(line, 0);
        assert_eq!(styled.raw_string(), line);
        let coloured: Vec<_> = styled
            .buffer
            .iter()
            .filter(|(style, _)| style.foreground.is_some())
            .collect();
        assert_eq!(coloured.len(), "ultraplan".len());
        assert_eq!(coloured[0].0.foreground, Some(Color::Rgb(235, 95, 87)));
        assert_eq!(coloured[7].0.foreground, Some(Color::Rgb(235, 95, 87)));
        let plain = RainbowHighlighter.highlight("/ultraplan cmd", 0);
        assert!(plain.buffer.iter().all(|(s, _)| s.foreground.is_none()));
    }
}
