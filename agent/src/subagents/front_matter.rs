//! The small YAML subset agent definition files use in their front matter: a block between
//! two `---` lines at the top of the file holding `key: value` pairs, where a value is a plain
//! or quoted scalar, a flow list (`[a, b]`), a block list (`- a` lines), or a block scalar
//! (`|` / `>`). Comments and blank lines are skipped; anything else is a syntax error naming
//! the line.

use thiserror::Error;

/// A front-matter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Scalar(String),
    List(Vec<String>),
}

/// Why the front matter cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrontMatterError {
    #[error("the file does not start with a `---` front matter block")]
    Missing,
    #[error("the front matter block is not closed by a `---` line")]
    Unclosed,
    #[error("front matter line {line}: {reason}")]
    Syntax { line: usize, reason: String },
}

/// A parsed file: its fields in order, and the body after the front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document<'a> {
    pub fields: Vec<(String, Value)>,
    pub body: &'a str,
}

impl Document<'_> {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// Splits and parses `text`.
pub fn parse(text: &str) -> Result<Document<'_>, FrontMatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (yaml, body) = split(text)?;
    let fields = Parser { lines: yaml, at: 0 }.fields()?;
    Ok(Document { fields, body })
}

/// Front-matter lines with their line numbers in the file.
type Lines<'a> = Vec<(usize, &'a str)>;

/// The front-matter lines (numbered from 2, the line after the opening `---`) and the body.
fn split(text: &str) -> Result<(Lines<'_>, &str), FrontMatterError> {
    let mut rest = text;
    let first = take_line(&mut rest).ok_or(FrontMatterError::Missing)?;
    if first.trim_end() != "---" {
        return Err(FrontMatterError::Missing);
    }
    let mut lines = Vec::new();
    let mut number = 1;
    while let Some(line) = take_line(&mut rest) {
        number += 1;
        if matches!(line.trim_end(), "---" | "...") {
            return Ok((lines, rest));
        }
        lines.push((number, line));
    }
    Err(FrontMatterError::Unclosed)
}

/// Takes one line (without its `\n` or `\r\n`) off the front of `rest`.
fn take_line<'a>(rest: &mut &'a str) -> Option<&'a str> {
    if rest.is_empty() {
        return None;
    }
    let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
    *rest = tail;
    Some(line.strip_suffix('\r').unwrap_or(line))
}

struct Parser<'a> {
    lines: Lines<'a>,
    at: usize,
}

impl<'a> Parser<'a> {
    fn fields(mut self) -> Result<Vec<(String, Value)>, FrontMatterError> {
        let mut fields: Vec<(String, Value)> = Vec::new();
        while let Some((number, line)) = self.next_content() {
            if line.starts_with([' ', '\t']) {
                return Err(syntax(number, "unexpected indentation"));
            }
            let (key, rest) = split_key(line)
                .ok_or_else(|| syntax(number, "expected `key: value`".to_owned()))?;
            if fields.iter().any(|(k, _)| k == key) {
                return Err(syntax(number, format!("`{key}` appears twice")));
            }
            let value = self.value(number, rest)?;
            fields.push((key.to_owned(), value));
        }
        Ok(fields)
    }

    /// The next line that is neither blank nor a comment.
    fn next_content(&mut self) -> Option<(usize, &'a str)> {
        while let Some(&(number, line)) = self.lines.get(self.at) {
            self.at += 1;
            let trimmed = line.trim();
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                return Some((number, line));
            }
        }
        None
    }

    fn value(&mut self, number: usize, rest: &str) -> Result<Value, FrontMatterError> {
        let rest = rest.trim();
        match rest {
            "" => self.block_list(),
            "|" | "|-" | "|+" => Ok(Value::Scalar(self.block_scalar(false))),
            ">" | ">-" | ">+" => Ok(Value::Scalar(self.block_scalar(true))),
            _ if rest.starts_with('[') => flow_list(number, rest).map(Value::List),
            _ => scalar(number, rest).map(Value::Scalar),
        }
    }

    /// The indented `- item` lines after a bare `key:`; none gives an empty scalar.
    fn block_list(&mut self) -> Result<Value, FrontMatterError> {
        let mut items = Vec::new();
        while let Some(&(number, line)) = self.lines.get(self.at) {
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                self.at += 1;
                continue;
            }
            if !line.starts_with([' ', '\t', '-']) {
                break;
            }
            let item = trimmed
                .strip_prefix('-')
                .ok_or_else(|| syntax(number, "expected a `- item` line"))?;
            let item = scalar(number, item.trim())?;
            if !item.is_empty() {
                items.push(item);
            }
            self.at += 1;
        }
        if items.is_empty() {
            return Ok(Value::Scalar(String::new()));
        }
        Ok(Value::List(items))
    }

    /// The indented lines after `|` (kept as lines) or `>` (folded into one paragraph per
    /// blank-line-separated group).
    fn block_scalar(&mut self, folded: bool) -> String {
        let mut lines: Vec<&str> = Vec::new();
        while let Some(&(_, line)) = self.lines.get(self.at) {
            if !line.trim().is_empty() && !line.starts_with([' ', '\t']) {
                break;
            }
            lines.push(line.trim());
            self.at += 1;
        }
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        if !folded {
            return lines.join("\n");
        }
        lines
            .split(|l| l.is_empty())
            .map(|group| group.join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `key: rest` or `key:` (the colon must end the line or be followed by a space).
fn split_key(line: &str) -> Option<(&str, &str)> {
    let colon = line
        .char_indices()
        .find(|&(i, c)| c == ':' && line[i + 1..].chars().next().is_none_or(char::is_whitespace))
        .map(|(i, _)| i)?;
    let key = line[..colon].trim();
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    valid.then(|| (key, &line[colon + 1..]))
}

/// A plain or quoted scalar; a plain one loses a trailing ` # comment`.
fn scalar(number: usize, text: &str) -> Result<String, FrontMatterError> {
    match text.chars().next() {
        Some(quote @ ('"' | '\'')) => {
            let (value, rest) = quoted(number, text, quote)?;
            let rest = rest.trim();
            if !rest.is_empty() && !rest.starts_with('#') {
                return Err(syntax(number, "text after a closing quote"));
            }
            Ok(value)
        }
        _ => Ok(strip_comment(text).trim().to_owned()),
    }
}

/// Reads a quoted string starting at `text[0]`; returns it and what follows the quote.
fn quoted(number: usize, text: &str, quote: char) -> Result<(String, &str), FrontMatterError> {
    let mut value = String::new();
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            ('\'', '\'') if chars.peek().is_some_and(|&(_, n)| n == '\'') => {
                chars.next();
                value.push('\'');
            }
            ('"', '\\') => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, 't')) => value.push('\t'),
                Some((_, other)) => value.push(other),
                None => break,
            },
            (q, c) if c == q => return Ok((value, &text[i + c.len_utf8()..])),
            (_, c) => value.push(c),
        }
    }
    Err(syntax(number, "unterminated quoted string"))
}

fn strip_comment(text: &str) -> &str {
    match text.find(" #") {
        Some(i) => &text[..i],
        None => text,
    }
}

/// `[a, "b", c]` on one line.
fn flow_list(number: usize, text: &str) -> Result<Vec<String>, FrontMatterError> {
    let inner = strip_comment(text)
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| syntax(number, "a `[` list must close with `]` on the same line"))?;
    let mut items = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let (item, tail) = match rest.chars().next() {
            Some(q @ ('"' | '\'')) => quoted(number, rest, q)?,
            _ => {
                let end = rest.find(',').unwrap_or(rest.len());
                (rest[..end].trim().to_owned(), &rest[end..])
            }
        };
        if !item.is_empty() {
            items.push(item);
        }
        let tail = tail.trim_start();
        rest = match tail.strip_prefix(',') {
            Some(after) => after.trim_start(),
            None if tail.is_empty() => tail,
            None => return Err(syntax(number, "expected `,` between list items")),
        };
    }
    Ok(items)
}

fn syntax(line: usize, reason: impl Into<String>) -> FrontMatterError {
    FrontMatterError::Syntax {
        line,
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(s: &str) -> Value {
        Value::Scalar(s.to_owned())
    }

    fn list(items: &[&str]) -> Value {
        Value::List(items.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn parses_the_supported_forms() {
        let text = "---\r\nname: auditor  # the id\r\ndescription: \"Finds \\\"bugs\\\"\"\n\
            tools: [Grep, 'Read', \"Glob\",]\ndisallowedTools:\n  - Bash\n  - 'Write'\n\n\
            # a comment\nmodel: 'it''s'\nnotes: |\n  one\n  two\n\nsummary: >\n  folded\n  \
            text\n\n  next\nempty:\n---\nBody text.\n";
        let doc = parse(text).expect("parses");
        let want = vec![
            ("name", scalar("auditor")),
            ("description", scalar("Finds \"bugs\"")),
            ("tools", list(&["Grep", "Read", "Glob"])),
            ("disallowedTools", list(&["Bash", "Write"])),
            ("model", scalar("it's")),
            ("notes", scalar("one\ntwo")),
            ("summary", scalar("folded text\nnext")),
            ("empty", scalar("")),
        ];
        let got: Vec<(&str, Value)> = doc
            .fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(doc.body, "Body text.\n");
        assert_eq!(doc.get("model"), Some(&scalar("it's")));
    }

    #[test]
    fn reports_what_is_wrong_and_where() {
        let cases = [
            ("no front matter", FrontMatterError::Missing.to_string()),
            ("---\nname: x\n", FrontMatterError::Unclosed.to_string()),
            ("---\nname x\n---\n", "line 2: expected `key: value`".into()),
            (
                "---\nname: a\nname: b\n---\n",
                "line 3: `name` appears twice".into(),
            ),
            (
                "---\n  name: a\n---\n",
                "line 2: unexpected indentation".into(),
            ),
            (
                "---\ntools: [a, b\n---\n",
                "line 2: a `[` list must close".into(),
            ),
            (
                "---\nname: \"open\n---\n",
                "line 2: unterminated quoted string".into(),
            ),
            (
                "---\nname: \"a\" b\n---\n",
                "line 2: text after a closing quote".into(),
            ),
            (
                "---\ntools: [\"a\" b]\n---\n",
                "line 2: expected `,`".into(),
            ),
        ];
        for (text, want) in cases {
            let err = parse(text).expect_err(text);
            assert!(err.to_string().contains(&want), "{text:?}: {err}");
        }
    }

    #[test]
    fn keys_need_a_separating_colon() {
        assert_eq!(split_key("url: http://x"), Some(("url", " http://x")));
        assert_eq!(split_key("a:b"), None);
        assert_eq!(split_key("two words: x"), None);
        assert_eq!(split_key("maxTurns:"), Some(("maxTurns", "")));
    }
}
