//! The file walk shared by Glob and Grep: ripgrep's rules (gitignore, `.ignore`), hidden files
//! included, `.git/` excluded, symlinks not followed, one visitor per core.

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use crate::workspace::Workspace;

/// A walk builder from `start` (inside the workspace) with the tools' standard rules.
pub(crate) fn builder(workspace: &Workspace, start: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(start);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .current_dir(workspace.root())
        .threads(0)
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// Runs the walk on every core. For each regular file, `visit` is called with the entry and
/// the calling thread's own state; the per-thread states are returned when the walk ends.
pub(crate) fn for_each_file<S, V, M>(builder: &WalkBuilder, make_visitor: M) -> Vec<S>
where
    S: Default + Send,
    V: FnMut(&DirEntry, &mut S) + Send,
    M: FnMut() -> V,
{
    let states = Mutex::new(Vec::new());
    let mut visitors = Visitors {
        make_visitor,
        states: &states,
    };
    builder.build_parallel().visit(&mut visitors);
    states.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// The modification time of a walked file; the epoch when unknown.
pub(crate) fn mtime(entry: &DirEntry) -> SystemTime {
    entry
        .metadata()
        .and_then(|m| m.modified().map_err(ignore::Error::from))
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

struct Visitors<'a, S, M> {
    make_visitor: M,
    states: &'a Mutex<Vec<S>>,
}

impl<'a, S, V, M> ParallelVisitorBuilder<'a> for Visitors<'a, S, M>
where
    S: Default + Send + 'a,
    V: FnMut(&DirEntry, &mut S) + Send + 'a,
    M: FnMut() -> V,
{
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(Visitor {
            visit: (self.make_visitor)(),
            state: S::default(),
            states: self.states,
        })
    }
}

/// One thread's visitor; hands its state over when the walk drops it.
struct Visitor<'a, S: Default, V> {
    visit: V,
    state: S,
    states: &'a Mutex<Vec<S>>,
}

impl<S: Default + Send, V: FnMut(&DirEntry, &mut S) + Send> ParallelVisitor for Visitor<'_, S, V> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        match entry {
            Ok(entry) if entry.file_type().is_some_and(|t| t.is_file()) => {
                (self.visit)(&entry, &mut self.state);
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "walk: skipping an unreadable entry"),
        }
        WalkState::Continue
    }
}

impl<S: Default, V> Drop for Visitor<'_, S, V> {
    fn drop(&mut self) {
        let state = std::mem::take(&mut self.state);
        self.states
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(state);
    }
}
