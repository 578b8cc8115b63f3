//! Splitting a `git diff --binary --full-index` patch into one patch per file, with each file's
//! path, kind of change and line counts. Pure: bytes in, values out.
//!
//! Sections and the (C-quoted) names in their header lines are read by the protocol's strict
//! [`git_patch`] reader; a `diff --git` line it cannot read refuses the whole patch.

use ultraplan_protocol::git_patch::{self, lossy};
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
    /// Whether the file is a symlink after this patch (created, modified, or a mode change to
    /// `120000`).
    pub symlink: bool,
    /// A symlink's target after this patch, when the patch spells it out (one added line).
    pub link_target: Option<String>,
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
    let sections = git_patch::sections(patch);
    if sections.is_empty() {
        return if patch.iter().all(u8::is_ascii_whitespace) {
            Ok(Vec::new())
        } else {
            Err(ParseError::NotAGitPatch)
        };
    }
    sections.into_iter().map(parse_section).collect()
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
        verdict: None,
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
        .strip_prefix(git_patch::DIFF_HEADER)
        .and_then(|rest| git_patch::header_names(rest).ok())
        .map(|(a, b)| (lossy(&a), lossy(&b)))
        .ok_or_else(bad)?;
    let (mut old, mut new) = (None, None);
    let (mut rename_from, mut rename_to) = (None, None);
    let (mut added, mut deleted, mut new_mode) = (false, false, None);
    let (mut additions, mut deletions, mut binary, mut in_hunks) = (0, 0, false, false);
    let (mut file_mode, mut index_mode, mut old_mode) = (None, None, None);
    let mut added_lines: Vec<&[u8]> = Vec::new();
    for line in lines {
        if in_hunks {
            match line.first() {
                Some(b'+') => {
                    additions += 1;
                    if added_lines.len() < 2 {
                        added_lines.push(&line[1..]);
                    }
                }
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
        } else if let Some(mode) = line.strip_prefix(b"new file mode ") {
            added = true;
            file_mode = Some(lossy(mode).trim().to_owned());
        } else if let Some(rest) = line.strip_prefix(b"index ") {
            index_mode = rest
                .split(|&b| b == b' ')
                .nth(1)
                .map(|m| lossy(m).trim().to_owned());
        } else if line.starts_with(b"deleted file mode ") {
            deleted = true;
        } else if let Some(mode) = line.strip_prefix(b"old mode ") {
            old_mode = Some(lossy(mode));
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
    // Any mode line that names a symlink makes it one: the target must then be checked.
    let symlink = !deleted
        && [&file_mode, &new_mode, &index_mode, &old_mode]
            .iter()
            .any(|m| m.as_deref().is_some_and(is_link_mode));
    let link_target = match added_lines.as_slice() {
        [one] if symlink && !binary => Some(lossy(one)),
        _ => None,
    };
    Ok(FilePatch {
        path,
        from,
        change,
        additions,
        deletions,
        binary,
        new_mode,
        symlink,
        link_target,
        text: text.to_vec(),
    })
}

/// Whether a mode, read as git reads it (leading octal digits), is a symlink's.
fn is_link_mode(mode: &str) -> bool {
    let digits: String = mode
        .trim_start()
        .chars()
        .take_while(|c| ('0'..='7').contains(c))
        .collect();
    u32::from_str_radix(&digits, 8).is_ok_and(|m| m & 0o170_000 == 0o120_000)
}

/// A `---`/`+++` name: `None` for `/dev/null`, and for a name whose quoting cannot be read
/// (the section's other names stand in for it).
fn patch_name(rest: &[u8], prefix: &[u8]) -> Option<String> {
    git_patch::side_name(rest, prefix)
        .ok()
        .flatten()
        .map(|n| lossy(&n))
}

/// A `rename from`/`copy to` name: possibly quoted, no prefix.
fn plain_name(rest: &[u8]) -> Option<String> {
    git_patch::name(rest).ok().map(|n| lossy(&n))
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "parse_props.rs"]
mod props;
