//! Symlinks and hard links, and where their targets may point.
//!
//! A symlink target is checked lexically when the link is created, then resolved the way the
//! kernel would, following the symlinks actually on disk (their targets are read back with
//! `read_link`): once right after creation and once more after the whole archive is extracted,
//! since a link can be harmless when created and escape once later links fill in its path
//! (`d -> a/b/c/..` first, `a/b/c -> ../..` later).
//!
//! The resolution walks the extractor's own record of the tree (every directory and symlink
//! it created; nothing is ever replaced) instead of calling `canonicalize`: glibc's realpath
//! costs O(depth²) syscalls, which a hostile archive of deep paths and many links would turn
//! into a CPU sink. Here the work is bounded by [`MAX_RESOLVE_STEPS`] for the whole upload.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use super::error::{BundleError, display_path};
use super::extract::Extractor;
use super::paths::{self, PathIssue};
use super::tree::ROOT;

impl Extractor<'_> {
    pub(super) fn symlink(
        &mut self,
        target: &[u8],
        full: &Path,
        parent: u32,
        depth: usize,
        shown: &str,
    ) -> Result<(), BundleError> {
        check_link_target(target, depth, shown, self.limits.max_path_len)?;
        let target = Path::new(OsStr::from_bytes(target));
        std::os::unix::fs::symlink(target, full)
            .map_err(|e| self.fs_error("creating a symlink", e, shown))?;
        let name = full.file_name().map(OsStrExt::as_bytes).unwrap_or_default();
        self.symlinks.push((parent, Box::from(name)));
        self.tree.add_symlink(parent, name);
        self.files += 1;
        self.check_resolution(parent, name, shown)
    }

    pub(super) fn hard_link<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        full: &Path,
        shown: &str,
    ) -> Result<(), BundleError> {
        let target = entry.link_name_bytes().unwrap_or_default().into_owned();
        let target_shown = display_path(&target);
        let escape = |reason| BundleError::LinkEscape {
            path: shown.to_owned(),
            target: target_shown.clone(),
            reason,
        };
        let invalid = |reason| BundleError::InvalidLink {
            path: shown.to_owned(),
            target: target_shown.clone(),
            reason,
        };
        let comps = match paths::components(&target, self.limits.max_path_len) {
            Ok(comps) => comps,
            Err(
                issue @ (PathIssue::Absolute | PathIssue::WindowsPrefix | PathIssue::Traversal),
            ) => {
                return Err(escape(issue.reason()));
            }
            Err(issue) => return Err(invalid(issue.reason())),
        };
        let Some((name, dir_comps)) = comps.split_last() else {
            return Err(invalid("names the bundle root"));
        };
        // Every parent must be a directory we created; anything else is a symlink or file.
        let mut id = ROOT;
        let mut source = self.root.clone();
        for comp in dir_comps {
            source.push(OsStr::from_bytes(comp));
            match self.tree.dir(id, comp) {
                Some(child) => id = child,
                None => match fs::symlink_metadata(&source) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        return Err(escape("target goes through a symlink"));
                    }
                    _ => return Err(invalid("target is not an extracted regular file")),
                },
            }
        }
        source.push(OsStr::from_bytes(name));
        match fs::symlink_metadata(&source) {
            Ok(meta) if meta.file_type().is_file() => {}
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(invalid("target is a symlink"));
            }
            Ok(_) => return Err(invalid("target is not a regular file")),
            Err(_) => return Err(invalid("target is not an extracted regular file")),
        }
        match fs::hard_link(&source, full) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::TooManyLinks => {
                return Err(invalid("too many hard links to the target"));
            }
            Err(e) => return Err(self.fs_error("creating a hard link", e, shown)),
        }
        self.files += 1;
        Ok(())
    }

    /// With everything extracted, resolve every symlink again.
    pub fn verify_symlinks(&mut self) -> Result<(), BundleError> {
        for i in 0..self.symlinks.len() {
            let (parent, name) = self.symlinks[i].clone();
            let shown = self.tree.rel_path(parent).join(OsStr::from_bytes(&name));
            self.check_resolution(parent, &name, &shown.display().to_string())?;
        }
        Ok(())
    }

    fn check_resolution(
        &mut self,
        parent: u32,
        name: &[u8],
        shown: &str,
    ) -> Result<(), BundleError> {
        let target = self.read_target(parent, name, shown)?;
        let target_shown = display_path(&target);
        let reason = match self.resolve(parent, &target, shown)? {
            Resolution::Inside => return Ok(()),
            Resolution::Escapes => {
                return Err(BundleError::LinkEscape {
                    path: shown.to_owned(),
                    target: target_shown,
                    reason: "resolves outside the bundle through other symlinks",
                });
            }
            Resolution::TooManyLinks => "too many levels of symlinks (a loop?)",
            Resolution::TooExpensive => "the bundle's symlinks are too deeply chained to verify",
        };
        Err(BundleError::InvalidLink {
            path: shown.to_owned(),
            target: target_shown,
            reason,
        })
    }

    fn read_target(&self, parent: u32, name: &[u8], shown: &str) -> Result<Vec<u8>, BundleError> {
        let link = self
            .root
            .join(self.tree.rel_path(parent))
            .join(OsStr::from_bytes(name));
        let target =
            fs::read_link(&link).map_err(|e| self.fs_error("reading back a symlink", e, shown))?;
        Ok(target.into_os_string().into_vec())
    }

    /// Resolve `target` from directory `dir` like the kernel would (following every symlink,
    /// the last one included), against the recorded tree.
    fn resolve(&mut self, dir: u32, target: &[u8], shown: &str) -> Result<Resolution, BundleError> {
        let mut cur = dir;
        let mut follows = 0;
        // The targets read so far, and the components still to walk as (target, start, end),
        // the next one last.
        let mut texts: Vec<Vec<u8>> = Vec::new();
        let mut pending: Vec<(usize, usize, usize)> = Vec::new();
        let mut next_text = Some(target.to_vec());
        loop {
            if let Some(text) = next_text.take() {
                if text.first() == Some(&b'/') {
                    return Ok(Resolution::Escapes);
                }
                let before = pending.len();
                push_components(&mut pending, texts.len(), &text);
                texts.push(text);
                self.resolve_steps += (pending.len() - before) as u64;
            }
            let Some((text, start, end)) = pending.pop() else {
                return Ok(Resolution::Inside);
            };
            self.resolve_steps += 1;
            if self.resolve_steps > MAX_RESOLVE_STEPS {
                return Ok(Resolution::TooExpensive);
            }
            match &texts[text][start..end] {
                b"" | b"." => {}
                b".." => match self.tree.parent(cur) {
                    Some(up) => cur = up,
                    None => return Ok(Resolution::Escapes),
                },
                name => {
                    if let Some(child) = self.tree.dir(cur, name) {
                        cur = child;
                    } else if self.tree.is_symlink(cur, name) {
                        follows += 1;
                        if follows > MAX_SYMLINK_FOLLOWS {
                            return Ok(Resolution::TooManyLinks);
                        }
                        // Its target is walked from `cur`, the directory holding it.
                        next_text = Some(self.read_target(cur, name, shown)?);
                    } else {
                        // A file, or nothing: the walk ends here, inside. (Any components left
                        // would fail to resolve: ENOTDIR or ENOENT.)
                        return Ok(Resolution::Inside);
                    }
                }
            }
        }
    }
}

/// Check a symlink target lexically, for a link whose parent is `depth` levels below the root:
/// within the length limit, relative, never climbing above the root.
pub(crate) fn check_link_target(
    target: &[u8],
    depth: usize,
    shown: &str,
    max_path_len: usize,
) -> Result<(), BundleError> {
    let target_shown = display_path(target);
    if target.len() > max_path_len {
        return Err(BundleError::PathTooLong {
            path: shown.to_owned(),
            max: max_path_len,
        });
    }
    let escape = |reason| BundleError::LinkEscape {
        path: shown.to_owned(),
        target: target_shown.clone(),
        reason,
    };
    match paths::check_symlink_target(target, depth) {
        Ok(()) => Ok(()),
        Err(PathIssue::Absolute | PathIssue::WindowsPrefix) => Err(escape("absolute target")),
        Err(PathIssue::Traversal) => Err(escape("climbs above the bundle root")),
        Err(issue) => Err(BundleError::InvalidLink {
            path: shown.to_owned(),
            target: target_shown,
            reason: issue.reason(),
        }),
    }
}

/// Most symlinks followed while resolving one target (the kernel's limit is 40 too).
const MAX_SYMLINK_FOLLOWS: u32 = 40;

/// Most resolution steps (path components walked) for a whole upload. Ordinary repositories
/// need a tiny fraction of this; it only bounds hostile ones.
pub(super) const MAX_RESOLVE_STEPS: u64 = 10_000_000;

enum Resolution {
    Inside,
    Escapes,
    TooManyLinks,
    TooExpensive,
}

/// Push the components of `path` (text number `text`) onto `stack` as (text, start, end), so
/// that the first component is popped first.
fn push_components(stack: &mut Vec<(usize, usize, usize)>, text: usize, path: &[u8]) {
    let mut start = 0;
    let mut spans = Vec::new();
    for (i, &b) in path.iter().enumerate() {
        if b == b'/' {
            spans.push((text, start, i));
            start = i + 1;
        }
    }
    spans.push((text, start, path.len()));
    stack.extend(spans.into_iter().rev());
}
