//! Splitting a `git diff --binary --full-index` patch into one patch per file, with each file's
//! path, kind of change and line counts. Pure: bytes in, values out.
//!
//! A file's patch starts at a line beginning with `diff --git `. That is unambiguous: hunk lines
//! start with ` `, `+`, `-` or `\`, and the base85 lines of a binary patch never hold a space.

use ultraplan_protocol::patch::{FileChange, PatchFile, PatchSummary};

/// The patch of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// Repository-relative path, `/`-separated: the new path, or the old one for a deletion.
    pub path: String,
    /// The path before a rename or copy.
    pub from: Option<String>,
    pub change: FileChange,
    /// Lines added (0 for binary files).
    pub additions: u64,
    /// Lines removed (0 for binary files).
    pub deletions: u64,
    pub binary: bool,
    /// The mode a mode change sets (`100755`, `100644`).
    pub new_mode: Option<String>,
    /// This file's part of the patch, `diff --git` line included: `git apply` input.
    pub text: Vec<u8>,
}

impl FilePatch {
    /// Every path this patch reads or writes.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.path.as_str()).chain(self.from.as_deref())
    }
}

/// Why a patch cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Text that holds no `diff --git` section.
    #[error("the server's answer is not a git patch (no `diff --git` line)")]
    NotAGitPatch,
    /// A section whose file name cannot be read.
    #[error("cannot read the file name in patch line {line:?}")]
    BadHeader { line: String },
}

/// Splits a patch into per-file patches, in order. Blank input is an empty patch.
pub fn split(patch: &[u8]) -> Result<Vec<FilePatch>, ParseError> {
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in patch.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b"diff --git ") {
            starts.push(offset);
        }
        offset += line.len();
    }
    let Some(&first) = starts.first() else {
        return if patch.iter().all(u8::is_ascii_whitespace) {
            Ok(Vec::new())
        } else {
            Err(ParseError::NotAGitPatch)
        };
    };
    let ends = starts.iter().skip(1).copied().chain([patch.len()]);
    let mut files = Vec::with_capacity(starts.len());
    for (start, end) in std::iter::once(first)
        .chain(starts.iter().skip(1).copied())
        .zip(ends)
    {
        files.push(parse_section(&patch[start..end])?);
    }
    Ok(files)
}

/// The summary of parsed files, as the server describes a patch.
pub fn summary(files: &[FilePatch], bytes: usize) -> PatchSummary {
    PatchSummary {
        files: files
            .iter()
            .map(|f| PatchFile {
                path: f.path.clone(),
                change: f.change,
                additions: f.additions,
                deletions: f.deletions,
                binary: f.binary,
            })
            .collect(),
        additions: files.iter().map(|f| f.additions).sum(),
        deletions: files.iter().map(|f| f.deletions).sum(),
        bytes: bytes as u64,
        base_commit: None,
        left_out: Vec::new(),
    }
}

/// One `diff --git` section.
fn parse_section(text: &[u8]) -> Result<FilePatch, ParseError> {
    let mut lines = text.split(|&b| b == b'\n');
    let header = lines.next().unwrap_or_default();
    let bad = || ParseError::BadHeader {
        line: String::from_utf8_lossy(header).into_owned(),
    };
    let names = header
        .strip_prefix(b"diff --git ")
        .and_then(header_names)
        .ok_or_else(bad)?;
    let (mut old, mut new) = (None, None);
    let (mut rename_from, mut rename_to) = (None, None);
    let (mut added, mut deleted, mut new_mode) = (false, false, None);
    let (mut additions, mut deletions, mut binary, mut in_hunks) = (0, 0, false, false);
    for line in lines {
        if in_hunks {
            match line.first() {
                Some(b'+') => additions += 1,
                Some(b'-') => deletions += 1,
                _ => {}
            }
            continue;
        }
        if line.starts_with(b"@@") {
            in_hunks = true;
        } else if line.starts_with(b"GIT binary patch") || line.starts_with(b"Binary files ") {
            binary = true;
            break;
        } else if let Some(rest) = line.strip_prefix(b"--- ") {
            old = Some(patch_name(rest, b"a/"));
        } else if let Some(rest) = line.strip_prefix(b"+++ ") {
            new = Some(patch_name(rest, b"b/"));
        } else if let Some(rest) = line
            .strip_prefix(b"rename from ")
            .or_else(|| line.strip_prefix(b"copy from "))
        {
            rename_from = Some(plain_name(rest).ok_or_else(bad)?);
        } else if let Some(rest) = line
            .strip_prefix(b"rename to ")
            .or_else(|| line.strip_prefix(b"copy to "))
        {
            rename_to = Some(plain_name(rest).ok_or_else(bad)?);
        } else if line.starts_with(b"new file mode ") {
            added = true;
        } else if line.starts_with(b"deleted file mode ") {
            deleted = true;
        } else if let Some(mode) = line.strip_prefix(b"new mode ") {
            new_mode = Some(lossy(mode).trim().to_owned());
        }
    }
    // `---`/`+++` name `/dev/null` for an added or deleted file: `None` here.
    let old = old.flatten().or(rename_from.clone()).or(Some(names.0));
    let new = new.flatten().or(rename_to).or(Some(names.1));
    let path = if deleted { old.clone() } else { new.clone() }.ok_or_else(bad)?;
    let from = old.filter(|o| !added && !deleted && *o != path);
    let change = if added {
        FileChange::Added
    } else if deleted {
        FileChange::Deleted
    } else if new_mode.is_some() && !in_hunks && !binary && from.is_none() {
        FileChange::TypeChanged
    } else {
        FileChange::Modified
    };
    Ok(FilePatch {
        path,
        from,
        change,
        additions,
        deletions,
        binary,
        new_mode,
        text: text.to_vec(),
    })
}

/// The two names of a `diff --git a/X b/Y` line (prefixes removed). Unquoted names with spaces
/// are split where both halves name the same file, as git does.
fn header_names(rest: &[u8]) -> Option<(String, String)> {
    if rest.first() == Some(&b'"') {
        let (a, tail) = unquote(rest)?;
        let tail = tail.strip_prefix(b" ")?;
        let b = if tail.first() == Some(&b'"') {
            unquote(tail)?.0
        } else {
            tail.to_vec()
        };
        return Some((strip(&a, b"a/")?, strip(&b, b"b/")?));
    }
    let body = rest.strip_prefix(b"a/")?;
    // `NAME b/NAME`: the same name twice.
    if body.len() >= 4 && (body.len() - 3).is_multiple_of(2) {
        let n = (body.len() - 3) / 2;
        if &body[n..n + 3] == b" b/" && body[..n] == body[n + 3..] {
            let name = lossy(&body[..n]);
            return Some((name.clone(), name));
        }
    }
    let at = find(body, b" b/").or_else(|| find(body, b" \"b/"))?;
    let b = &body[at + 1..];
    let b = if b.first() == Some(&b'"') {
        strip(&unquote(b)?.0, b"b/")?
    } else {
        lossy(&b[2..])
    };
    Some((lossy(&body[..at]), b))
}

/// A `---`/`+++` name: `None` for `/dev/null`. git ends a name holding a space with a tab.
fn patch_name(rest: &[u8], prefix: &[u8]) -> Option<String> {
    let rest = rest.strip_suffix(b"\t").unwrap_or(rest);
    if rest == b"/dev/null" {
        return None;
    }
    let name = if rest.first() == Some(&b'"') {
        unquote(rest)?.0
    } else {
        rest.to_vec()
    };
    Some(match name.strip_prefix(prefix) {
        Some(stripped) => lossy(stripped),
        None => lossy(&name),
    })
}

/// A `rename from`/`copy to` name: possibly quoted, no prefix.
fn plain_name(rest: &[u8]) -> Option<String> {
    if rest.first() == Some(&b'"') {
        Some(lossy(&unquote(rest)?.0))
    } else {
        Some(lossy(rest))
    }
}

fn strip(name: &[u8], prefix: &[u8]) -> Option<String> {
    name.strip_prefix(prefix).map(lossy)
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A C-quoted name as git writes it (`"a/caf\303\251 \"x\""`): the bytes, and what follows the
/// closing quote.
fn unquote(s: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            b'"' => return Some((out, &s[i + 1..])),
            b'\\' => {
                let c = *s.get(i + 1)?;
                i += 2;
                match c {
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b't' => out.push(b'\t'),
                    b'n' => out.push(b'\n'),
                    b'v' => out.push(11),
                    b'f' => out.push(12),
                    b'r' => out.push(b'\r'),
                    b'0'..=b'3' => {
                        let digits = s.get(i - 1..i + 2)?;
                        let mut value: u8 = 0;
                        for d in digits {
                            if !(b'0'..=b'7').contains(d) {
                                return None;
                            }
                            value = value.checked_mul(8)?.checked_add(d - b'0')?;
                        }
                        out.push(value);
                        i += 2;
                    }
                    other => out.push(other),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODIFY: &str = "diff --git a/src/lib.rs b/src/lib.rs\n\
        index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644\n\
        --- a/src/lib.rs\n\
        +++ b/src/lib.rs\n\
        @@ -1,3 +1,3 @@\n \
        keep\n\
        --- old line that starts with dashes\n\
        +new\n\
        +++ also new\n\
        \\ No newline at end of file\n";

    const BINARY: &str = "diff --git a/logo.png b/logo.png\n\
        new file mode 100644\n\
        index 0000000000000000000000000000000000000000..88768efdf77ec78c9a995f94881793be6a41752b\n\
        GIT binary patch\n\
        literal 5\n\
        McmZQzOv=my00M6TI{*Lx\n\
        \n\
        literal 0\n\
        HcmV?d00001\n\
        \n";

    #[test]
    fn sections_paths_kinds_and_counts() {
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<&'a str>,
            FileChange,
            u64,
            u64,
            bool,
        );
        let cases: &[Case<'_>] = &[
            (
                MODIFY,
                "src/lib.rs",
                None,
                FileChange::Modified,
                2,
                1,
                false,
            ),
            (BINARY, "logo.png", None, FileChange::Added, 0, 0, true),
            (
                "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex 1..0\n\
                 --- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
                "gone.txt",
                None,
                FileChange::Deleted,
                0,
                1,
                false,
            ),
            (
                "diff --git a/new b/new\nnew file mode 100644\nindex 0..1\n--- /dev/null\n\
                 +++ b/new\n@@ -0,0 +1,2 @@\n+a\n+b\n",
                "new",
                None,
                FileChange::Added,
                2,
                0,
                false,
            ),
            (
                "diff --git a/empty b/empty\nnew file mode 100644\nindex 0..e69\n",
                "empty",
                None,
                FileChange::Added,
                0,
                0,
                false,
            ),
            (
                "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
                "run.sh",
                None,
                FileChange::TypeChanged,
                0,
                0,
                false,
            ),
            (
                "diff --git a/old name.txt b/new name.txt\nsimilarity index 90%\n\
                 rename from old name.txt\nrename to new name.txt\nindex 1..2 100644\n\
                 --- a/old name.txt\t\n+++ b/new name.txt\t\n@@ -1 +1 @@\n-x\n+y\n",
                "new name.txt",
                Some("old name.txt"),
                FileChange::Modified,
                1,
                1,
                false,
            ),
            (
                "diff --git a/a b/c.txt b/a b/c.txt\nindex 1..2 100644\n--- a/a b/c.txt\t\n\
                 +++ b/a b/c.txt\t\n@@ -1 +1 @@\n-x\n+y\n",
                "a b/c.txt",
                None,
                FileChange::Modified,
                1,
                1,
                false,
            ),
            (
                "diff --git a/x b/x b/x b/x\nold mode 100644\nnew mode 100755\n",
                "x b/x",
                None,
                FileChange::TypeChanged,
                0,
                0,
                false,
            ),
            (
                "diff --git \"a/caf\\303\\251 \\\"q\\\".txt\" \"b/caf\\303\\251 \\\"q\\\".txt\"\n\
                 new file mode 100644\nindex 0..e69\n",
                "café \"q\".txt",
                None,
                FileChange::Added,
                0,
                0,
                false,
            ),
            (
                "diff --git a/tab\\there b/tab\\there\nindex 1..2\n--- \"a/tab\\there\"\n\
                 +++ \"b/tab\\there\"\n@@ -1 +1 @@\n-x\n+y\n",
                "tab\there",
                None,
                FileChange::Modified,
                1,
                1,
                false,
            ),
        ];
        for (text, path, from, change, additions, deletions, binary) in cases {
            let files = split(text.as_bytes()).unwrap();
            assert_eq!(files.len(), 1, "{text}");
            let f = &files[0];
            assert_eq!(f.path, *path, "{text}");
            assert_eq!(f.from.as_deref(), *from, "{text}");
            assert_eq!(f.change, *change, "{text}");
            assert_eq!(
                (f.additions, f.deletions),
                (*additions, *deletions),
                "{text}"
            );
            assert_eq!(f.binary, *binary, "{text}");
            assert_eq!(f.text, text.as_bytes(), "{text}");
            let mode_change = text.contains("new mode 100755");
            assert_eq!(
                f.new_mode.as_deref() == Some("100755"),
                mode_change,
                "{text}"
            );
        }
    }

    #[test]
    fn a_patch_splits_at_each_diff_git_line_and_keeps_every_byte() {
        let patch = format!("{BINARY}{MODIFY}");
        let files = split(patch.as_bytes()).unwrap();
        let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["logo.png", "src/lib.rs"]);
        let joined: Vec<u8> = files.iter().flat_map(|f| f.text.clone()).collect();
        assert_eq!(joined, patch.as_bytes());
        let summary = summary(&files, patch.len());
        assert_eq!(summary.headline(), "2 files changed, +2 −1");
        assert_eq!(summary.bytes, patch.len() as u64);
    }

    #[test]
    fn empty_garbage_and_bad_headers() {
        assert_eq!(split(b""), Ok(Vec::new()));
        assert_eq!(split(b" \n\n"), Ok(Vec::new()));
        assert_eq!(
            split(b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"),
            Err(ParseError::NotAGitPatch)
        );
        assert!(matches!(
            split(b"diff --git nonsense\n"),
            Err(ParseError::BadHeader { .. })
        ));
    }

    #[test]
    fn unquoting() {
        type Unquoted<'a> = Option<(&'a [u8], &'a [u8])>;
        let cases: &[(&[u8], Unquoted<'_>)] = &[
            (b"\"a b\" rest", Some((b"a b", b" rest"))),
            (b"\"\\\\\\\"\\t\\n\"", Some((b"\\\"\t\n", b""))),
            (b"\"\\303\\251\"", Some(("é".as_bytes(), b""))),
            (b"\"open", None),
            (b"\"\\39\"", None),
        ];
        for (input, want) in cases {
            let got = unquote(input);
            assert_eq!(
                got.as_ref().map(|(a, b)| (a.as_slice(), *b)),
                *want,
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
