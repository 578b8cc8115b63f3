//! A tree as its manifest: every file (mode, size, BLAKE3 of its bytes) and symlink (target)
//! by path. The manifest's canonical bytes name the tree: a bundle materialised from it has
//! the id [`TreeManifest::bundle_id`], the sha256 of those bytes, so the id says exactly which
//! tree it is, whoever built it.

use std::collections::{BTreeMap, HashMap, HashSet};

use sha2::{Digest as _, Sha256};
use ultraplan_protocol::api::ManifestEntry;

use crate::error::{BundleError, display_path};
use crate::extract::path_error;
use crate::limits::BundleLimits;
use crate::links::check_link_target;
use crate::paths;

/// A BLAKE3 digest of a file's bytes.
pub type Digest = [u8; 32];

/// What the canonical bytes start with (and what the bundle id is domain-separated by).
const MAGIC: &[u8] = b"ultraplan-tree-v1\n";

/// One path of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File {
        executable: bool,
        size: u64,
        blake3: Digest,
    },
    Symlink {
        target: String,
    },
}

/// A tree, path by path (paths in byte order: the canonical order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeManifest {
    pub(crate) entries: BTreeMap<String, Node>,
}

/// What a checked manifest holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Files and symlinks.
    pub files: u64,
    /// Bytes of the files.
    pub bytes: u64,
}

impl TreeManifest {
    pub fn entries(&self) -> impl Iterator<Item = (&String, &Node)> {
        self.entries.iter()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Add `path` as `node`; a path given twice is refused.
    pub(crate) fn insert(&mut self, path: String, node: Node) -> Result<(), BundleError> {
        if self.entries.contains_key(&path) {
            return Err(BundleError::PathConflict {
                path: display_path(path.as_bytes()),
                reason: "already exists in the bundle (duplicate entry)",
            });
        }
        self.entries.insert(path, node);
        Ok(())
    }

    /// The manifest of the wire entries (a whole tree): each entry well-formed and no path
    /// twice. The tree rules are [`check`](Self::check)'s.
    pub fn from_wire(entries: Vec<ManifestEntry>) -> Result<Self, BundleError> {
        let mut manifest = Self::default();
        for entry in entries {
            let (path, node) = node_of(entry)?;
            manifest.insert(path, node)?;
        }
        Ok(manifest)
    }

    /// Every rule a bundle's tree meets that can be judged without building it: each path
    /// canonical and lexically safe (no absolute path, `..`, `.git`), no path under a file or
    /// symlink, symlink targets relative and inside, one size per content, and the entry and
    /// byte limits (directories count as entries, as when an archive is unpacked).
    pub fn check(&self, limits: &BundleLimits) -> Result<Totals, BundleError> {
        let shown = |path: &str| display_path(path.as_bytes());
        // Paths are in byte order, so everything under a directory comes in one run: its
        // directories are new exactly past the part a path shares with the one before.
        let mut dirs: HashSet<&str> = HashSet::new();
        let mut sizes: HashMap<&Digest, u64> = HashMap::new();
        let (mut bytes, mut count, mut previous) = (0u64, 0u64, "");
        for (path, node) in &self.entries {
            let depth = check_path(path, limits)?;
            let shared = common_prefix(previous, path);
            for (i, _) in path.match_indices('/').filter(|(i, _)| *i >= shared) {
                dirs.insert(&path[..i]);
                count += 1;
            }
            previous = path;
            count += 1;
            if count > limits.max_files {
                return Err(BundleError::TooManyFiles {
                    path: shown(path),
                    max: limits.max_files,
                });
            }
            match node {
                Node::File { size, blake3, .. } => {
                    if *sizes.entry(blake3).or_insert(*size) != *size {
                        return Err(BundleError::InvalidManifest(format!(
                            "{:?}: content {} is given two sizes",
                            shown(path),
                            hex::encode(blake3)
                        )));
                    }
                    bytes = bytes.saturating_add(*size);
                    if bytes > limits.max_unpacked_bytes {
                        return Err(BundleError::TooLarge {
                            path: shown(path),
                            max: limits.max_unpacked_bytes,
                        });
                    }
                }
                Node::Symlink { target } => {
                    check_link_target(target.as_bytes(), depth, &shown(path), limits.max_path_len)?;
                }
            }
        }
        // An entry that is also a directory: name the first path under it.
        if let Some(file) = self.entries.keys().find(|p| dirs.contains(p.as_str())) {
            let under = format!("{file}/");
            let child = self
                .entries
                .range(under.clone()..)
                .next()
                .map_or(under, |(p, _)| p.clone());
            return Err(BundleError::PathConflict {
                path: shown(&child),
                reason: "a parent of this entry is not a directory",
            });
        }
        Ok(Totals {
            files: self.entries.len() as u64,
            bytes,
        })
    }

    /// The canonical bytes: what the bundle id hashes and what a stored manifest is.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAGIC.len() + self.entries.len() * 96);
        out.extend_from_slice(MAGIC);
        for (path, node) in &self.entries {
            match node {
                Node::File {
                    executable,
                    size,
                    blake3,
                } => {
                    out.push(if *executable { b'x' } else { b'f' });
                    put_bytes(&mut out, path.as_bytes());
                    out.extend_from_slice(&size.to_be_bytes());
                    out.extend_from_slice(blake3);
                }
                Node::Symlink { target } => {
                    out.push(b'l');
                    put_bytes(&mut out, path.as_bytes());
                    put_bytes(&mut out, target.as_bytes());
                }
            }
        }
        out
    }

    /// Parse [`to_bytes`](Self::to_bytes)' output; `None` when it is not that.
    pub fn from_bytes(mut bytes: &[u8]) -> Option<Self> {
        bytes = bytes.strip_prefix(MAGIC)?;
        let mut entries = BTreeMap::new();
        while let Some((&tag, rest)) = bytes.split_first() {
            let (path, rest) = take_text(rest)?;
            let (node, rest) = match tag {
                b'f' | b'x' => {
                    let (size, rest) = rest.split_first_chunk::<8>()?;
                    let (blake3, rest) = rest.split_first_chunk::<32>()?;
                    let node = Node::File {
                        executable: tag == b'x',
                        size: u64::from_be_bytes(*size),
                        blake3: *blake3,
                    };
                    (node, rest)
                }
                b'l' => {
                    let (target, rest) = take_text(rest)?;
                    (Node::Symlink { target }, rest)
                }
                _ => return None,
            };
            entries.insert(path, node);
            bytes = rest;
        }
        Some(Self { entries })
    }

    /// The bundle id of this tree: the sha256 of its canonical bytes, lowercase hex.
    pub fn bundle_id(&self) -> String {
        hex::encode(Sha256::digest(self.to_bytes()))
    }

    /// Each content the tree needs once, with its size and the first path that has it.
    pub fn contents(&self) -> BTreeMap<Digest, (u64, &str)> {
        let mut out = BTreeMap::new();
        for (path, node) in &self.entries {
            if let Node::File { size, blake3, .. } = node {
                out.entry(*blake3).or_insert((*size, path.as_str()));
            }
        }
        out
    }
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// A path is canonical (`a/b`: no empty, `.` or `..` parts) and passes the archive rules.
/// Returns the depth of its parent directory.
fn check_path(path: &str, limits: &BundleLimits) -> Result<usize, BundleError> {
    let shown = || display_path(path.as_bytes());
    let comps = paths::components(path.as_bytes(), limits.max_path_len)
        .map_err(|issue| path_error(issue, &shown(), limits.max_path_len))?;
    if comps.join(&b'/') != path.as_bytes() {
        return Err(BundleError::InvalidPath {
            path: shown(),
            reason: "not in canonical form (`dir/name`, no empty or `.` components)",
        });
    }
    Ok(comps.len().saturating_sub(1))
}

/// One wire entry as a node: a symlink has a target and nothing else; a file has a size and
/// a digest, and a mode that is `0o644` or `0o755` when given.
pub(crate) fn node_of(entry: ManifestEntry) -> Result<(String, Node), BundleError> {
    let shown = display_path(entry.path.as_bytes());
    let invalid = |what: &str| BundleError::InvalidManifest(format!("{shown:?}: {what}"));
    let node = match entry {
        ManifestEntry {
            target: Some(target),
            mode: None,
            size: None,
            blake3: None,
            ..
        } => Node::Symlink { target },
        ManifestEntry {
            target: Some(_), ..
        } => {
            return Err(invalid("a symlink has a target and nothing else"));
        }
        ManifestEntry {
            mode,
            size: Some(size),
            blake3: Some(blake3),
            ..
        } => Node::File {
            executable: match mode {
                None | Some(0o644) => false,
                Some(0o755) => true,
                Some(_) => return Err(invalid("a file's mode is 0o644 or 0o755")),
            },
            size,
            blake3: parse_digest(&blake3).ok_or_else(|| invalid("blake3 is not 64 hex digits"))?,
        },
        _ => return Err(invalid("a file has a size and a blake3 digest")),
    };
    Ok((entry.path, node))
}

/// 64 lowercase hex characters as a digest.
pub fn parse_digest(text: &str) -> Option<Digest> {
    if text.len() != 64 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

pub(super) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(bytes);
}

pub(super) fn take_text(bytes: &[u8]) -> Option<(String, &[u8])> {
    let (len, rest) = bytes.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
    let (text, rest) = (rest.get(..len)?, rest.get(len..)?);
    Some((String::from_utf8(text.to_vec()).ok()?, rest))
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
