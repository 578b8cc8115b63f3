//! Does a symbolic link stay inside the repository?
//!
//! Links are stored as links and never followed while bundling, but one that points out of the
//! repository (absolute, or climbing above the root) would let the bundle reach files the user
//! never meant to share, so it is skipped. Resolution walks the target component by component and
//! expands links met on the way (inside the repository), so `a -> sub/up/..` with
//! `sub/up -> ..` is caught even though it looks harmless lexically. Missing components are
//! taken literally (a dangling link inside the repository is harmless).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Links expanded before giving up, as the kernel does (`ELOOP`).
const MAX_HOPS: usize = 40;

/// True when the link at `link` (relative to `root`) pointing to `target` resolves inside
/// `root`.
pub fn stays_inside(root: &Path, link: &Path, target: &Path) -> bool {
    let mut resolved: Vec<OsString> = link
        .parent()
        .map(|parent| parent.components().filter_map(normal).collect())
        .unwrap_or_default();
    let mut pending: VecDeque<Part> = parts(target).collect();
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        match part {
            Part::Absolute => return false,
            Part::Parent if resolved.pop().is_none() => return false,
            Part::Parent => {}
            Part::Name(name) => {
                resolved.push(name);
                let here = root.join(resolved.iter().collect::<PathBuf>());
                let Ok(next) = std::fs::read_link(&here) else {
                    continue;
                };
                hops += 1;
                if hops > MAX_HOPS {
                    return false;
                }
                resolved.pop();
                for part in parts(&next).collect::<Vec<_>>().into_iter().rev() {
                    pending.push_front(part);
                }
            }
        }
    }
    true
}

/// An owned path component, `.` dropped.
enum Part {
    Absolute,
    Parent,
    Name(OsString),
}

fn parts(path: &Path) -> impl Iterator<Item = Part> + '_ {
    path.components().filter_map(|c| match c {
        Component::Prefix(_) | Component::RootDir => Some(Part::Absolute),
        Component::CurDir => None,
        Component::ParentDir => Some(Part::Parent),
        Component::Normal(name) => Some(Part::Name(name.to_owned())),
    })
}

fn normal(c: Component<'_>) -> Option<OsString> {
    match c {
        Component::Normal(name) => Some(name.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::Path;

    use super::stays_inside;

    #[test]
    fn lexical_cases() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        let inside =
            |link: &str, target: &str| stays_inside(root, Path::new(link), Path::new(target));
        assert!(inside("a", "b"));
        assert!(inside("a", "./b/../c"));
        assert!(inside("sub/a", "../b"));
        assert!(inside("sub/a", ".."));
        assert!(!inside("a", ".."));
        assert!(!inside("sub/a", "../../b"));
        assert!(!inside("a", "/etc/passwd"));
        assert!(!inside("a", "b/../../c"));
    }

    #[test]
    fn links_on_the_way_are_expanded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        symlink("..", root.join("sub/up")).unwrap();
        symlink("/tmp", root.join("abs")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        let inside =
            |link: &str, target: &str| stays_inside(root, Path::new(link), Path::new(target));
        assert!(inside("sub/up", ".."));
        assert!(inside("a", "sub/up/sub"));
        assert!(!inside("a", "sub/up/.."));
        assert!(!inside("a", "abs/x"));
        assert!(!inside("a", "loop"));
    }
}
