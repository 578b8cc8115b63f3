//! Server-side syntax highlighting with syntect's bundled syntaxes: each source line becomes
//! self-contained HTML (spans opened on an earlier line are reopened, and every span is
//! closed at the line's end) with `hl-` prefixed classes, so the page needs no inline styles
//! and `web/static/app.css` colours them in light and dark.

use std::sync::OnceLock;

use syntect::html::{ClassStyle, line_tokens_to_classed_spans};
use syntect::parsing::{ParseState, ScopeStack, SyntaxReference, SyntaxSet};

/// The class prefix of highlighted tokens.
pub const STYLE: ClassStyle = ClassStyle::SpacedPrefixed { prefix: "hl-" };

/// Files longer than this are shown plain: highlighting is linear but not cheap.
const MAX_HIGHLIGHT_BYTES: usize = 512 * 1024;

fn syntaxes() -> &'static SyntaxSet {
    static SET: OnceLock<SyntaxSet> = OnceLock::new();
    SET.get_or_init(SyntaxSet::load_defaults_newlines)
}

fn syntax_for<'a>(set: &'a SyntaxSet, path: &str, first_line: &str) -> &'a SyntaxReference {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.').map_or(name, |(_, ext)| ext);
    set.find_syntax_by_extension(ext)
        .or_else(|| set.find_syntax_by_extension(name))
        .or_else(|| set.find_syntax_by_first_line(first_line))
        .unwrap_or_else(|| set.find_syntax_plain_text())
}

/// The escaped HTML of a line with no highlighting.
pub fn escape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn open_tags(stack: &ScopeStack) -> String {
    let mut out = String::new();
    for scope in stack.as_slice() {
        let classes: Vec<String> = scope
            .build_string()
            .split('.')
            .map(|atom| format!("hl-{atom}"))
            .collect();
        out.push_str(&format!("<span class=\"{}\">", escape(&classes.join(" "))));
    }
    out
}

/// The lines of `text` (a file named `path`) as HTML, one string per line, without line
/// ends. Every character is escaped; highlighting that fails falls back to plain lines.
pub fn lines(path: &str, text: &str) -> Vec<String> {
    let plain = || text.lines().map(escape).collect();
    if text.len() > MAX_HIGHLIGHT_BYTES {
        return plain();
    }
    let set = syntaxes();
    let syntax = syntax_for(set, path, text.lines().next().unwrap_or(""));
    let mut state = ParseState::new(syntax);
    let mut stack = ScopeStack::new();
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        let Ok(ops) = state.parse_line(line, set) else {
            return plain();
        };
        let open = open_tags(&stack);
        let depth = stack.len() as isize;
        let Ok((html, delta)) = line_tokens_to_classed_spans(line, &ops, STYLE, &mut stack) else {
            return plain();
        };
        // The line end is the only newline in the line's HTML; a `\r` before it goes too.
        let mut html = format!("{open}{html}").replacen('\n', "", 1);
        if line.ends_with("\r\n")
            && let Some(at) = html.rfind('\r')
        {
            html.remove(at);
        }
        html.push_str(&"</span>".repeat(usize::try_from(depth + delta).unwrap_or(0)));
        out.push(html);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced(html: &str) -> bool {
        html.matches("<span").count() == html.matches("</span>").count()
    }

    #[test]
    fn every_line_is_self_contained_and_escaped() {
        let src = "/* a comment\n   over <two> lines */\nfn main() { let s = \"<&>\"; }\n";
        let lines = lines("src/main.rs", src);
        assert_eq!(lines.len(), 3);
        for line in &lines {
            assert!(balanced(line), "{line}");
            assert!(!line.contains('<') || line.contains("<span"), "{line}");
        }
        assert!(lines[1].contains("hl-comment"), "{}", lines[1]);
        assert!(lines[1].contains("&lt;two&gt;"), "{}", lines[1]);
        assert!(lines[2].contains("hl-keyword") || lines[2].contains("hl-storage"));
        assert!(lines[2].contains("&lt;&amp;&gt;"), "{}", lines[2]);
    }

    #[test]
    fn crlf_line_ends_are_dropped() {
        let lines = lines("a.py", "x = 1\r\ny = '\r'\r\n");
        assert_eq!(lines.len(), 2);
        assert!(
            lines
                .iter()
                .all(|l| !l.ends_with('\r') && !l.contains('\n')),
            "{lines:?}"
        );
    }

    #[test]
    fn unknown_files_are_plain_escaped_text() {
        let lines = lines("notes.unknownext", "<script>alert(1)</script>\nsecond");
        assert_eq!(lines.len(), 2);
        assert!(lines[0].contains("&lt;script&gt;"), "{}", lines[0]);
        assert!(!lines[0].contains("<script"));
    }

    #[test]
    fn app_css_colours_the_classes_in_light_and_dark() {
        let css = include_str!("../../../../web/static/app.css");
        for class in [".hl-comment", ".hl-string", ".hl-keyword"] {
            assert!(css.matches(class).count() >= 2, "{class} in light and dark");
        }
    }
}
