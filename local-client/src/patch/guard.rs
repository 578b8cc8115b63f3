//! What no patch may do, whatever its source: write into `.git`, write through a symlink, or
//! leave a symlink that points outside the repository or into `.git`. Pure rules over the
//! parsed files, and the same rules against a tree (a work tree on disk, or a commit's tree)
//! through a "is this path a symlink there" question.
//!
//! Every path is judged as git would write it, component by component: a leading component
//! that is a symlink — existing, or created by the same patch — would carry the write
//! elsewhere, so it is refused.

use std::collections::{BTreeMap, HashSet};

use ultraplan_protocol::patch::FileChange;

use super::parse::FilePatch;

/// A file the patch may not touch, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub path: String,
    pub reason: String,
}

impl Refusal {
    pub fn new(path: &str, reason: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }
}

/// Whether a path component names `.git` in a spelling git or a filesystem would take for it:
/// any case, trailing dots or spaces, characters HFS+ ignores, an NTFS stream or short name.
pub fn is_dot_git(component: &str) -> bool {
    let kept: String = component.chars().filter(|c| !hfs_ignored(*c)).collect();
    let name = kept.trim_end_matches([' ', '.']).to_lowercase();
    name == ".git" || name.starts_with(".git:") || name == "git~1"
}

/// Code points HFS+ drops when it compares names.
fn hfs_ignored(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// Why a repository-relative path may not be written; `None` when it may.
pub fn path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("an empty path");
    }
    if path.starts_with('/') {
        return Some("an absolute path");
    }
    for component in path.split('/') {
        match component {
            "" => return Some("a path with an empty component"),
            "." | ".." => return Some("a path with a `.` or `..` component"),
            c if is_dot_git(c) => return Some("a path into .git"),
            _ => {}
        }
    }
    None
}

/// The leading directories of a path: `a`, `a/b` for `a/b/c`.
pub fn leading(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

/// Where a symlink's target leads, resolved lexically from the link's directory: the
/// directories it passes through, the last one being where it lands (nothing for the top).
pub fn resolve_target(link: &str, target: &str) -> Result<Vec<String>, String> {
    if target.is_empty() {
        return Err("a symlink with an empty target".to_owned());
    }
    if target.starts_with('/') {
        return Err(format!("a symlink with an absolute target ({target})"));
    }
    let mut at: Vec<&str> = link.split('/').collect();
    at.pop();
    let mut visited = Vec::new();
    for component in target.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                if at.pop().is_none() {
                    return Err(format!(
                        "a symlink whose target leaves the repository ({target})"
                    ));
                }
            }
            c if is_dot_git(c) => {
                return Err(format!("a symlink whose target is in .git ({target})"));
            }
            c => {
                at.push(c);
                visited.push(at.join("/"));
            }
        }
    }
    Ok(visited)
}

/// The rules that need no tree: paths, symlink targets, and writes through a symlink this
/// same patch creates.
pub fn check_patch(files: &[FilePatch]) -> Vec<Refusal> {
    let links: HashSet<&str> = files
        .iter()
        .filter(|f| f.symlink)
        .map(|f| f.path.as_str())
        .collect();
    let mut refusals = Vec::new();
    for file in files {
        for path in file.paths() {
            if let Some(problem) = path_problem(path) {
                refusals.push(Refusal::new(path, problem));
                continue;
            }
            if let Some(link) = leading(path).find(|p| links.contains(p)) {
                refusals.push(Refusal::new(
                    path,
                    format!("written through the symlink {link} that this patch creates"),
                ));
            }
        }
        if !file.symlink || path_problem(&file.path).is_some() {
            continue;
        }
        let Some(target) = &file.link_target else {
            refusals.push(Refusal::new(
                &file.path,
                "a symlink whose target the patch does not spell out",
            ));
            continue;
        };
        match resolve_target(&file.path, target) {
            Err(why) => refusals.push(Refusal::new(&file.path, why)),
            Ok(visited) => {
                if let Some(link) = visited.iter().find(|v| links.contains(v.as_str())) {
                    refusals.push(Refusal::new(
                        &file.path,
                        format!("a symlink whose target goes through the symlink {link} that this patch creates"),
                    ));
                }
            }
        }
    }
    merge(refusals)
}

/// The rules against a tree: `is_symlink(path)` says whether a repository-relative path is a
/// symlink there. No path may be written through one, no new symlink may point through one
/// (its real target could then be anywhere), and none may be moved or copied without its
/// target in the patch (a relative target means something else from another directory).
pub fn check_tree(files: &[FilePatch], is_symlink: &dyn Fn(&str) -> bool) -> Vec<Refusal> {
    let mut refusals = Vec::new();
    for file in files {
        for path in file.paths().filter(|p| path_problem(p).is_none()) {
            if let Some(link) = leading(path).find(|p| is_symlink(p)) {
                refusals.push(Refusal::new(
                    path,
                    format!("written through the existing symlink {link}"),
                ));
            }
        }
        if file.change != FileChange::Added
            && file.change != FileChange::Deleted
            && !file.symlink
            && path_problem(&file.path).is_none()
            && is_symlink(&file.path)
        {
            refusals.push(Refusal::new(
                &file.path,
                "changes the existing symlink without saying it is one (its new target cannot be \
                 checked)",
            ));
        }
        if let Some(from) = file.from.as_deref()
            && !file.symlink
            && path_problem(from).is_none()
            && is_symlink(from)
        {
            refusals.push(Refusal::new(
                &file.path,
                format!(
                    "moves or copies the symlink {from} without spelling out its target, which \
                     could then lead elsewhere"
                ),
            ));
        }
        let target = file.link_target.as_deref().filter(|_| file.symlink);
        if let Some(Ok(visited)) = target.map(|t| resolve_target(&file.path, t))
            && let Some(link) = visited.iter().find(|v| is_symlink(v))
        {
            refusals.push(Refusal::new(
                &file.path,
                format!("a symlink whose target goes through the existing symlink {link}"),
            ));
        }
    }
    merge(refusals)
}

/// One refusal per path, its reasons joined, in path order.
pub fn merge(refusals: Vec<Refusal>) -> Vec<Refusal> {
    let mut by_path: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in refusals {
        let reasons = by_path.entry(r.path).or_default();
        if !reasons.contains(&r.reason) {
            reasons.push(r.reason);
        }
    }
    by_path
        .into_iter()
        .map(|(path, reasons)| Refusal {
            path,
            reason: reasons.join("; "),
        })
        .collect()
}

/// "Is this a symlink" in a work tree on disk (`lstat`).
pub fn on_disk(top: &std::path::Path) -> impl Fn(&str) -> bool + '_ {
    move |rel| {
        top.join(rel)
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
    }
}

/// The symlinks of a commit's tree, from `git ls-tree -r -z --full-tree` output.
pub fn symlinks_in_listing(listing: &[u8]) -> HashSet<String> {
    listing
        .split(|&b| b == 0)
        .filter_map(|record| {
            let tab = record.iter().position(|&b| b == b'\t')?;
            let meta = &record[..tab];
            meta.starts_with(b"120000 ")
                .then(|| String::from_utf8_lossy(&record[tab + 1..]).into_owned())
        })
        .collect()
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
