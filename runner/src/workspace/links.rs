//! Which symlinks an execution patch may carry: only those that stay inside the repository
//! and out of `.git`, judged the way a checkout would resolve them.
//!
//! Pure logic over a map of the tree's symlinks; the walk that builds the map and the removal
//! of refused links live in `symlinks.rs`.

use std::collections::HashMap;

use ultraplan_protocol::patch::LeftOutReason;

/// Most symlinks followed while resolving one target (the kernel gives up at 40 too).
const MAX_HOPS: usize = 40;

/// The tree's symlinks: `/`-separated path relative to the root → target, both raw bytes.
pub type Links = HashMap<Vec<u8>, Vec<u8>>;

/// Why the symlink at `path` (relative to the root) with `target` must stay out of a patch,
/// or `None` when it resolves inside the tree. Targets are resolved relative to the link's
/// directory, following the other symlinks in `links` as the kernel would.
pub fn classify(path: &[u8], target: &[u8], links: &Links) -> Option<LeftOutReason> {
    if split(path).any(is_dotgit) {
        return Some(LeftOutReason::SymlinkIntoGit);
    }
    if is_absolute(target) {
        return Some(LeftOutReason::SymlinkAbsolute);
    }
    let mut dir: Vec<&[u8]> = split(path).collect();
    dir.pop();
    // Lexically first (a checkout without symlink support, or a tool that normalises paths,
    // reads it that way), then as the kernel would, through the other links.
    let lexical = Links::new();
    resolve(dir.clone(), target, &lexical)
        .and_then(|()| resolve(dir, target, links))
        .err()
}

/// Walk `target` from `dir`, following symlinks; `Err` with the reason it is refused.
fn resolve<'a>(
    mut dir: Vec<&'a [u8]>,
    target: &'a [u8],
    links: &'a Links,
) -> Result<(), LeftOutReason> {
    let mut pending: Vec<&[u8]> = split(target).collect();
    pending.reverse();
    let mut hops = 0;
    while let Some(component) = pending.pop() {
        match component {
            b"." => {}
            b".." => {
                dir.pop().ok_or(LeftOutReason::SymlinkEscapes)?;
            }
            _ if is_dotgit(component) => return Err(LeftOutReason::SymlinkIntoGit),
            _ => {
                dir.push(component);
                let Some(next) = links.get(&dir.join(&b'/')) else {
                    continue;
                };
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(LeftOutReason::SymlinkLoops);
                }
                if is_absolute(next) {
                    return Err(LeftOutReason::SymlinkEscapes);
                }
                dir.pop();
                pending.extend(split(next).collect::<Vec<_>>().into_iter().rev());
            }
        }
    }
    Ok(())
}

/// Non-empty components of a path, split at `/` and at `\` (a Windows checkout would).
fn split(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|b| matches!(b, b'/' | b'\\'))
        .filter(|c| !c.is_empty())
}

/// Absolute on any platform a checkout may land on: `/x`, `\x`, `C:…`.
fn is_absolute(target: &[u8]) -> bool {
    matches!(target.first(), Some(b'/' | b'\\'))
        || (target.len() >= 2 && target[0].is_ascii_alphabetic() && target[1] == b':')
}

/// Whether a path component names `.git` in any spelling a filesystem may fold to it: any
/// case, trailing dots and spaces (Windows), ignorable code points (HFS+), the 8.3 short
/// name `git~1`, and NTFS stream suffixes (`.git::$INDEX_ALLOCATION`).
pub fn is_dotgit(component: &[u8]) -> bool {
    let text = String::from_utf8_lossy(component);
    let folded: String = text
        .chars()
        .filter(|c| !is_hfs_ignorable(*c))
        .collect::<String>()
        .to_ascii_lowercase();
    let name = folded.split(':').next().unwrap_or_default();
    let name = name.trim_end_matches(['.', ' ']);
    name == ".git" || name == "git~1"
}

/// Code points HFS+ ignores when comparing names (the list git itself checks).
fn is_hfs_ignorable(c: char) -> bool {
    matches!(c as u32, 0x200C..=0x200F | 0x202A..=0x202E | 0x206A..=0x206F | 0xFEFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    use LeftOutReason::{SymlinkAbsolute, SymlinkEscapes, SymlinkIntoGit, SymlinkLoops};

    fn links(pairs: &[(&str, &str)]) -> Links {
        pairs
            .iter()
            .map(|(p, t)| (p.as_bytes().to_vec(), t.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn targets_are_classified() {
        let others = links(&[
            ("up", ".."),
            ("sub/deep", "../../outside"),
            ("abs", "/etc"),
            ("ok", "src"),
            ("loop1", "loop2"),
            ("loop2", "loop1"),
            ("d/inner", "x/y"),
        ]);
        let cases: &[(&str, &str, Option<LeftOutReason>)] = &[
            ("link", "README.md", None),
            ("src/link", "../README.md", None),
            ("a/b/c", "../../x", None),
            ("a/b/c", "./.././../x/./y", None),
            ("missing", "does/not/exist", None),
            ("self", ".", None),
            ("docs/root", "..", None),
            ("via_ok", "ok/lib.rs", None),
            ("leak", "/etc/shadow", Some(SymlinkAbsolute)),
            ("win", "C:\\Windows", Some(SymlinkAbsolute)),
            ("unc", "\\\\server\\share", Some(SymlinkAbsolute)),
            ("x", "../../outside", Some(SymlinkEscapes)),
            ("x", "..", Some(SymlinkEscapes)),
            ("a/x", "../../y", Some(SymlinkEscapes)),
            ("a/x", "b\\..\\..\\..\\y", Some(SymlinkEscapes)),
            ("docs/assets", "../.git", Some(SymlinkIntoGit)),
            ("hooks", ".git/hooks", Some(SymlinkIntoGit)),
            ("h", ".GIT/hooks", Some(SymlinkIntoGit)),
            ("h", ".git./hooks", Some(SymlinkIntoGit)),
            ("h", ".git /hooks", Some(SymlinkIntoGit)),
            ("h", "GIT~1/hooks", Some(SymlinkIntoGit)),
            ("h", ".g\u{200c}it", Some(SymlinkIntoGit)),
            ("h", ".git::$INDEX_ALLOCATION/hooks", Some(SymlinkIntoGit)),
            ("sub/.Git/x", "y", Some(SymlinkIntoGit)),
            ("via_up", "up/secret", Some(SymlinkEscapes)),
            ("via_deep", "sub/deep", Some(SymlinkEscapes)),
            ("via_abs", "abs/passwd", Some(SymlinkEscapes)),
            ("to_abs", "abs", Some(SymlinkEscapes)),
            ("d/through", "inner/../../..", Some(SymlinkEscapes)),
            ("d/fine", "inner/..", None),
            ("spin", "loop1", Some(SymlinkLoops)),
        ];
        for (path, target, want) in cases {
            assert_eq!(
                classify(path.as_bytes(), target.as_bytes(), &others),
                *want,
                "{path} -> {target}"
            );
        }
    }

    #[test]
    fn dotgit_spellings() {
        let cases: &[(&[u8], bool)] = &[
            (b".git", true),
            (b".GiT", true),
            (b".git...", true),
            (b"git~1", true),
            (b".git:stream", true),
            (b".gitignore", false),
            (b".github", false),
            (b"git", false),
            (b"x.git", false),
            (b"\xff.git", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_dotgit(name), *want, "{}", String::from_utf8_lossy(name));
        }
    }
}
