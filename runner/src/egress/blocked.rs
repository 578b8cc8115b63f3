//! The record of refused egress attempts (docs/ARCHITECTURE.md §6.5). Pure.

use std::collections::HashMap;

/// How many distinct `(host, port)` pairs [`BlockedLog`] keeps; attempts at further pairs are
/// only counted (see [`BlockedLog::overflow`]).
pub const MAX_BLOCKED_DISTINCT: usize = 200;

/// Refused attempts at one `(host, port)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedAttempt {
    /// Lowercase, without a trailing dot; IPv6 without brackets.
    pub host: String,
    pub port: u16,
    pub attempts: u32,
}

/// Distinct refused `(host, port)` pairs in first-seen order, at most
/// [`MAX_BLOCKED_DISTINCT`] of them.
#[derive(Debug, Default)]
pub(crate) struct BlockedLog {
    entries: Vec<BlockedAttempt>,
    index: HashMap<(String, u16), usize>,
    overflow: u64,
}

impl BlockedLog {
    pub(crate) fn record(&mut self, host: &str, port: u16) {
        if let Some(&at) = self.index.get(&(host.to_owned(), port)) {
            if let Some(entry) = self.entries.get_mut(at) {
                entry.attempts = entry.attempts.saturating_add(1);
            }
            return;
        }
        if self.entries.len() >= MAX_BLOCKED_DISTINCT {
            self.overflow = self.overflow.saturating_add(1);
            return;
        }
        self.index
            .insert((host.to_owned(), port), self.entries.len());
        self.entries.push(BlockedAttempt {
            host: host.to_owned(),
            port,
            attempts: 1,
        });
    }

    pub(crate) fn entries(&self) -> Vec<BlockedAttempt> {
        self.entries.clone()
    }

    /// Refused attempts at pairs beyond the first [`MAX_BLOCKED_DISTINCT`] (every attempt
    /// counts, repeated pairs included).
    pub(crate) fn overflow(&self) -> u64 {
        self.overflow
    }
}

#[cfg(test)]
#[path = "blocked_tests.rs"]
mod tests;
