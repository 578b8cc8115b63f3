//! What the agent (and its subagents) read, from its `Read` calls and `Grep` results: the
//! evidence that tells a citation it checked from one it only asserted.

use serde_json::Value;

/// Lines the agent saw of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The path as the agent named it (often absolute inside the sandbox).
    pub path: String,
    /// First and last line (1-based, inclusive).
    pub lines: (u32, u32),
}

/// Everything the agent read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    seen: Vec<Seen>,
}

/// Lines a `Read` without `limit` returns (the agent's Read tool reads up to this many).
const READ_DEFAULT_LINES: u32 = 2000;

/// Most reads kept (a runaway log cannot grow the page's memory without bound).
const MAX_READS: usize = 20_000;

fn as_line(v: Option<&Value>) -> Option<u32> {
    let n = v?.as_u64().or_else(|| v?.as_str()?.trim().parse().ok())?;
    u32::try_from(n).ok()
}

/// Whether `seen` (as the agent named it) is the bundle file `cited`: equal, or ending in
/// `/cited` (the sandbox mounts the bundle under some directory).
fn same_file(seen: &str, cited: &str) -> bool {
    let seen = seen.strip_prefix("./").unwrap_or(seen);
    seen == cited
        || seen
            .strip_suffix(cited)
            .is_some_and(|head| head.ends_with('/'))
}

impl Reads {
    fn push(&mut self, seen: Seen) {
        if self.seen.len() < MAX_READS && !seen.path.is_empty() {
            self.seen.push(seen);
        }
    }

    /// A `Read` call's input: `file_path`, and `offset` (first line, 1-based) and `limit`
    /// (lines; the tool's default when absent).
    pub fn read_call(&mut self, input: &Value) {
        let Some(path) = input.get("file_path").and_then(Value::as_str) else {
            return;
        };
        let first = as_line(input.get("offset")).unwrap_or(1).max(1);
        let limit = as_line(input.get("limit"))
            .unwrap_or(READ_DEFAULT_LINES)
            .max(1);
        self.push(Seen {
            path: path.to_owned(),
            lines: (first, first.saturating_add(limit - 1)),
        });
    }

    /// A `Grep` result's text: each `path:line:match` line shows that line of that file. A
    /// list of file names alone shows no content, so it counts for nothing.
    pub fn grep_result(&mut self, text: &str) {
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(path), Some(n), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
                continue;
            };
            if let Ok(n) = n.parse::<u32>() {
                self.push(Seen {
                    path: path.to_owned(),
                    lines: (n, n),
                });
            }
        }
    }

    /// Whether the agent saw any of lines `first..=last` of bundle file `path`.
    pub fn covers(&self, path: &str, first: u32, last: u32) -> bool {
        self.seen
            .iter()
            .any(|s| same_file(&s.path, path) && s.lines.0 <= last && first <= s.lines.1)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn read_calls_cover_their_range() {
        let mut reads = Reads::default();
        reads.read_call(&json!({"file_path": "/workspace/src/auth.rs"}));
        reads.read_call(&json!({"file_path": "/workspace/src/db.rs", "offset": 10, "limit": 5}));
        reads.read_call(&json!({"file_path": "lib/util.rs", "offset": "40"}));
        reads.read_call(&json!({"file_path": "/w/head.rs", "limit": 3}));
        reads.read_call(&json!({"path": "/w/ignored.rs"}));
        let cases: [(&str, u32, u32, bool); 17] = [
            ("src/auth.rs", 12, 12, true),
            ("src/auth.rs", 1, 900, true),
            ("src/auth.rs", 2000, 2000, true),
            ("src/auth.rs", 2001, 3000, false),
            ("auth.rs", 1, 1, true),
            ("rc/auth.rs", 1, 1, false),
            ("src/db.rs", 10, 10, true),
            ("src/db.rs", 14, 14, true),
            ("src/db.rs", 15, 15, false),
            ("src/db.rs", 1, 9, false),
            ("src/db.rs", 5, 12, true),
            ("lib/util.rs", 39, 39, false),
            ("lib/util.rs", 2039, 2039, true),
            ("lib/util.rs", 2040, 2040, false),
            ("head.rs", 3, 3, true),
            ("head.rs", 4, 4, false),
            ("w/ignored.rs", 1, 1, false),
        ];
        for (path, first, last, want) in cases {
            assert_eq!(
                reads.covers(path, first, last),
                want,
                "{path}:{first}-{last}"
            );
        }
        assert_eq!(reads.seen.len(), 4);
    }

    #[test]
    fn grep_lines_with_numbers_count_and_file_lists_do_not() {
        let mut reads = Reads::default();
        reads.grep_result(
            "/workspace/src/auth.rs:12:fn check() {\nsrc/api.rs\n/workspace/src/x.rs:a:b\n\
             /workspace/src/db.rs:7:  let x = 1: u8;",
        );
        let cases: [(&str, u32, u32, bool); 6] = [
            ("src/auth.rs", 12, 12, true),
            ("src/auth.rs", 10, 14, true),
            ("src/auth.rs", 13, 13, false),
            ("src/api.rs", 1, 1, false),
            ("src/x.rs", 1, 1, false),
            ("src/db.rs", 7, 7, true),
        ];
        for (path, first, last, want) in cases {
            assert_eq!(
                reads.covers(path, first, last),
                want,
                "{path}:{first}-{last}"
            );
        }
    }
}
