//! Pure, lexical path rules: which entry paths and link targets are acceptable.

use super::limits::MAX_COMPONENT_LEN;

/// Why a path (entry path or link target) was refused lexically.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathIssue {
    Empty,
    TooLong,
    Nul,
    LongComponent,
    Absolute,
    WindowsPrefix,
    Traversal,
    /// A `.git` component: repository metadata is never part of a bundle (and a nested repo
    /// would carry config the server's git could run).
    GitDir,
}

impl PathIssue {
    pub fn reason(self) -> &'static str {
        match self {
            Self::Empty => "empty path",
            Self::TooLong => "path too long",
            Self::Nul => "NUL byte in path",
            Self::LongComponent => "path component longer than 255 bytes",
            Self::Absolute => "starts with `/`",
            Self::WindowsPrefix => "Windows drive or UNC prefix",
            Self::Traversal => "`..` component",
            Self::GitDir => "`.git` component (repository metadata is not uploaded)",
        }
    }
}

/// Split a raw tar path into its normal components, dropping empty and `.` components.
///
/// Refuses absolute paths, Windows drive (`C:`) and UNC/rooted (`\`) prefixes, any `..`
/// component (also `..` between backslashes, which Windows tools would treat as one), NUL
/// bytes, over-long paths and components. An empty result means the root itself (`./`).
pub(crate) fn components(raw: &[u8], max_len: usize) -> Result<Vec<&[u8]>, PathIssue> {
    if raw.is_empty() {
        return Err(PathIssue::Empty);
    }
    if raw.len() > max_len {
        return Err(PathIssue::TooLong);
    }
    if raw.contains(&0) {
        return Err(PathIssue::Nul);
    }
    if raw[0] == b'/' {
        return Err(PathIssue::Absolute);
    }
    if raw[0] == b'\\' || (raw.len() >= 2 && raw[0].is_ascii_alphabetic() && raw[1] == b':') {
        return Err(PathIssue::WindowsPrefix);
    }
    let mut out = Vec::new();
    for comp in raw.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => return Err(PathIssue::Traversal),
            _ if comp.split(|&b| b == b'\\').any(|part| part == b"..") => {
                return Err(PathIssue::Traversal);
            }
            _ if comp.len() > MAX_COMPONENT_LEN => return Err(PathIssue::LongComponent),
            _ if comp.eq_ignore_ascii_case(b".git") => return Err(PathIssue::GitDir),
            _ => out.push(comp),
        }
    }
    Ok(out)
}

/// `true` when a raw entry path can only name a directory: it ends in `/` or in a `.`
/// component (`a/`, `a/.`, `.`). A file or link entry under such a name is refused: `a/.`
/// would otherwise become a file `a`, which GNU tar refuses to extract.
pub(crate) fn names_a_directory(raw: &[u8]) -> bool {
    raw.ends_with(b"/") || raw == b"." || raw.ends_with(b"/.")
}

/// Check a symlink target lexically, from a link whose parent directory is `depth` levels
/// below the root: it must be relative and its `..` components must never climb above the
/// root. (Whether intermediate components are themselves symlinks is checked by resolving
/// the link against the extracted tree, in `links.rs`.)
pub(crate) fn check_symlink_target(target: &[u8], depth: usize) -> Result<(), PathIssue> {
    if target.is_empty() {
        return Err(PathIssue::Empty);
    }
    if target.contains(&0) {
        return Err(PathIssue::Nul);
    }
    if target[0] == b'/' {
        return Err(PathIssue::Absolute);
    }
    if target[0] == b'\\'
        || (target.len() >= 2 && target[0].is_ascii_alphabetic() && target[1] == b':')
    {
        return Err(PathIssue::WindowsPrefix);
    }
    let mut depth = depth;
    for comp in target.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => depth = depth.checked_sub(1).ok_or(PathIssue::Traversal)?,
            _ => depth += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    type Case = (&'static [u8], Result<Vec<&'static [u8]>, PathIssue>);

    #[test]
    fn component_rules() {
        let max = 4096;
        let cases: &[Case] = &[
            (b"a/b/c.txt", Ok(vec![b"a", b"b", b"c.txt"])),
            (b"./a//b/./", Ok(vec![b"a", b"b"])),
            (b"./", Ok(vec![])),
            (b"..foo/bar..", Ok(vec![b"..foo", b"bar.."])),
            (b"", Err(PathIssue::Empty)),
            (b"/etc/passwd", Err(PathIssue::Absolute)),
            (b"../x", Err(PathIssue::Traversal)),
            (b"a/../../x", Err(PathIssue::Traversal)),
            (b"a/..", Err(PathIssue::Traversal)),
            (b"a\\..\\..\\x", Err(PathIssue::Traversal)),
            (b"C:\\evil", Err(PathIssue::WindowsPrefix)),
            (b"c:/evil", Err(PathIssue::WindowsPrefix)),
            (b"\\\\server\\share", Err(PathIssue::WindowsPrefix)),
            (b"a\0b", Err(PathIssue::Nul)),
            (b".git/config", Err(PathIssue::GitDir)),
            (b"vendor/x/.git", Err(PathIssue::GitDir)),
            (b"vendor/x/.GIT/hooks/pre-commit", Err(PathIssue::GitDir)),
            (b"a/.gitignore", Ok(vec![b"a", b".gitignore"])),
            (
                b".github/workflows/ci.yml",
                Ok(vec![b".github", b"workflows", b"ci.yml"]),
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(
                &components(raw, max),
                want,
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
        assert_eq!(components(b"abcdef", 5), Err(PathIssue::TooLong));
        let long = vec![b'x'; 256];
        assert_eq!(components(&long, max), Err(PathIssue::LongComponent));
    }

    #[test]
    fn directory_only_names() {
        let cases: &[(&[u8], bool)] = &[
            (b"a/", true),
            (b"a/.", true),
            (b".", true),
            (b"./", true),
            (b"a", false),
            (b"a/.b", false),
            (b"a.", false),
            (b"./a", false),
        ];
        for (raw, want) in cases {
            assert_eq!(
                names_a_directory(raw),
                *want,
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn symlink_target_rules() {
        let cases: &[(&[u8], usize, Result<(), PathIssue>)] = &[
            (b"file", 0, Ok(())),
            (b"./a/../b", 0, Ok(())),
            (b"..", 1, Ok(())),
            (b"../..", 1, Err(PathIssue::Traversal)),
            (b"..", 0, Err(PathIssue::Traversal)),
            (b"a/../../b", 0, Err(PathIssue::Traversal)),
            (b"a/../../b", 1, Ok(())),
            (b"/etc", 3, Err(PathIssue::Absolute)),
            (b"C:/x", 0, Err(PathIssue::WindowsPrefix)),
            (b"", 0, Err(PathIssue::Empty)),
        ];
        for (target, depth, want) in cases {
            assert_eq!(
                &check_symlink_target(target, *depth),
                want,
                "{} at depth {depth}",
                String::from_utf8_lossy(target)
            );
        }
    }
}
