//! The extractor's record of what it created: every directory and symlink, by (parent
//! directory id, name). Nothing in the staging tree is ever replaced, so this record is exact.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Id of the bundle root.
pub(crate) const ROOT: u32 = 0;

#[derive(Clone, Copy)]
enum Node {
    Dir(u32),
    Symlink,
}

#[derive(Default)]
pub(crate) struct Tree {
    /// Directory `id` is `dirs[id - 1]`: (parent id, name).
    dirs: Vec<(u32, Box<[u8]>)>,
    children: HashMap<u32, HashMap<Box<[u8]>, Node>>,
}

impl Tree {
    fn node(&self, parent: u32, name: &[u8]) -> Option<Node> {
        self.children.get(&parent)?.get(name).copied()
    }

    /// The id of directory `name` in directory `parent`, if we created it.
    pub fn dir(&self, parent: u32, name: &[u8]) -> Option<u32> {
        match self.node(parent, name)? {
            Node::Dir(id) => Some(id),
            Node::Symlink => None,
        }
    }

    /// Did we create a symlink `name` in directory `parent`?
    pub fn is_symlink(&self, parent: u32, name: &[u8]) -> bool {
        matches!(self.node(parent, name), Some(Node::Symlink))
    }

    pub fn add_dir(&mut self, parent: u32, name: &[u8]) -> u32 {
        // Ids start at 1. There are at most `max_files` directories, so u32 is plenty.
        let id = u32::try_from(self.dirs.len() + 1).unwrap_or(u32::MAX);
        self.dirs.push((parent, Box::from(name)));
        self.children
            .entry(parent)
            .or_default()
            .insert(Box::from(name), Node::Dir(id));
        id
    }

    pub fn add_symlink(&mut self, parent: u32, name: &[u8]) {
        self.children
            .entry(parent)
            .or_default()
            .insert(Box::from(name), Node::Symlink);
    }

    /// The parent of directory `id`; `None` for the root.
    pub fn parent(&self, id: u32) -> Option<u32> {
        let index = usize::try_from(id).ok()?.checked_sub(1)?;
        self.dirs.get(index).map(|(parent, _)| *parent)
    }

    /// Path of directory `id` relative to the root.
    pub fn rel_path(&self, mut id: u32) -> PathBuf {
        let mut names = Vec::new();
        while let Some(index) = usize::try_from(id).ok().and_then(|i| i.checked_sub(1)) {
            let Some((parent, name)) = self.dirs.get(index) else {
                break;
            };
            names.push(OsStr::from_bytes(name));
            id = *parent;
        }
        names.iter().rev().collect()
    }
}
