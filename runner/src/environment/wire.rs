//! Environments across the runner link (docs/ARCHITECTURE.md §5.3, §6.5): what the server
//! sends of a [`Wanted`] and how a runner rebuilds it on its own base, and setup reports and
//! snapshots in their wire shapes, checked on the way in by whichever side receives them.
//! Pure.

use std::time::Duration;

use ultraplan_protocol::runner_environment::{
    BlockedHost, LockDigest, RunEnd, RunReport, SnapshotInfo,
};

use super::cache::{SnapshotMeta, plain_key};
use super::output::{Redactor, TAIL_LINES};
use super::{FileError, SetupEnd, SetupReport, Wanted, base, file, key};
use crate::egress::{BlockedAttempt, MAX_BLOCKED_DISTINCT};

/// The longest scope (an owner's id, or `shared`) a runner takes.
const MAX_SCOPE_BYTES: usize = 256;
/// The longest host name a refused-host report keeps.
const MAX_HOST_BYTES: usize = 255;

impl Wanted {
    /// The environment's TOML, as keyed.
    pub fn definition(&self) -> &str {
        &self.text
    }

    /// Who may reuse the snapshot.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The lock files as keyed, for the runner link.
    pub fn lock_digests(&self) -> Vec<LockDigest> {
        self.locks
            .iter()
            .map(|(path, digest)| LockDigest {
                path: path.clone(),
                sha256: digest.map(hex::encode),
            })
            .collect()
    }

    /// What a server sent, keyed on this machine's own base. The definition is parsed and
    /// checked again, and the lock files must be exactly those it names, in its order.
    pub fn from_wire(
        definition: &str,
        locks: &[LockDigest],
        scope: &str,
    ) -> Result<Wanted, FileError> {
        let refuse = |why: &str| FileError(why.to_owned());
        if definition.len() as u64 > file::MAX_FILE_BYTES {
            return Err(refuse("the definition is too large"));
        }
        if scope.is_empty() || scope.len() > MAX_SCOPE_BYTES || scope.chars().any(char::is_control)
        {
            return Err(refuse("the snapshot's scope is not a plain name"));
        }
        let parsed = file::parse(definition)?;
        let named: Vec<&str> = locks.iter().map(|l| l.path.as_str()).collect();
        if named != parsed.lock_files {
            return Err(refuse(
                "the lock files sent are not those the definition names",
            ));
        }
        let mut digests = Vec::with_capacity(locks.len());
        for lock in locks {
            let digest = match &lock.sha256 {
                None => None,
                Some(text) => Some(digest_of(text).ok_or_else(|| {
                    refuse(&format!("{}: the digest is not 64 hex digits", lock.path))
                })?),
            };
            digests.push((lock.path.clone(), digest));
        }
        let key = key::environment_key(&key::KeyInputs {
            file: definition.as_bytes(),
            lock_files: &digests,
            base: &base(),
            scope,
        });
        Ok(Wanted {
            file: parsed,
            key,
            text: definition.to_owned(),
            locks: digests,
            scope: scope.to_owned(),
        })
    }
}

fn digest_of(text: &str) -> Option<[u8; 32]> {
    let lower = text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let bytes = hex::decode(text).ok().filter(|_| lower)?;
    bytes.try_into().ok()
}

impl SetupReport {
    /// The report in its wire shape.
    pub fn to_wire(&self) -> RunReport {
        let end = match &self.end {
            SetupEnd::Succeeded => RunEnd::Succeeded,
            SetupEnd::TimedOut => RunEnd::TimedOut,
            SetupEnd::Failed {
                exit_code,
                description,
            } => RunEnd::Failed {
                exit_code: *exit_code,
                description: description.clone(),
            },
        };
        RunReport {
            end,
            duration_ms: u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
            blocked: blocked_to_wire(&self.blocked),
            blocked_beyond: self.blocked_beyond,
            tail: self.tail.clone(),
        }
    }

    /// A runner's report, taken as untrusted: the tail keeps its last [`TAIL_LINES`] lines,
    /// each masked and capped again by `redactor`, and the refused hosts are capped.
    pub fn from_wire(report: RunReport, redactor: &Redactor) -> SetupReport {
        let end = match report.end {
            RunEnd::Succeeded => SetupEnd::Succeeded,
            RunEnd::TimedOut => SetupEnd::TimedOut,
            RunEnd::Failed {
                exit_code,
                description,
            } => SetupEnd::Failed {
                exit_code,
                description: redactor.line(description.as_bytes()),
            },
        };
        let skip = report.tail.len().saturating_sub(TAIL_LINES);
        SetupReport {
            end,
            duration: Duration::from_millis(report.duration_ms),
            blocked: blocked_from_wire(report.blocked),
            blocked_beyond: report.blocked_beyond,
            tail: report
                .tail
                .iter()
                .skip(skip)
                .map(|line| redactor.line(line.as_bytes()))
                .collect(),
        }
    }
}

/// Refused hosts in their wire shape.
pub fn blocked_to_wire(blocked: &[BlockedAttempt]) -> Vec<BlockedHost> {
    blocked
        .iter()
        .map(|b| BlockedHost {
            host: b.host.clone(),
            port: b.port,
            attempts: b.attempts,
        })
        .collect()
}

/// Refused hosts a runner reported: at most [`MAX_BLOCKED_DISTINCT`], each name printable
/// and capped.
pub fn blocked_from_wire(blocked: Vec<BlockedHost>) -> Vec<BlockedAttempt> {
    blocked
        .into_iter()
        .take(MAX_BLOCKED_DISTINCT)
        .map(|b| BlockedAttempt {
            host: b
                .host
                .chars()
                .filter(char::is_ascii_graphic)
                .take(MAX_HOST_BYTES)
                .collect(),
            port: b.port,
            attempts: b.attempts,
        })
        .collect()
}

/// A leased snapshot in its wire shape.
pub fn snapshot_info(meta: &SnapshotMeta, base_image: Option<String>) -> SnapshotInfo {
    SnapshotInfo {
        key: meta.key.clone(),
        built_at_ms: meta.built_at_ms,
        setup_ms: meta.setup_ms,
        generation: meta.generation,
        base_image,
    }
}

/// What a runner said of its snapshot; `None` unless its key is a plain key.
pub fn meta_from_wire(info: &SnapshotInfo) -> Option<SnapshotMeta> {
    plain_key(&info.key).then(|| SnapshotMeta {
        key: info.key.clone(),
        built_at_ms: info.built_at_ms,
        setup_ms: info.setup_ms,
        generation: info.generation,
        maintained_at_ms: None,
    })
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
