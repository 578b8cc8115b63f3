//! Process groups of running commands, and killing them.
//!
//! Every command runs as the leader of its own process group, so one `kill(-pgid, SIGKILL)`
//! reaches everything it started: pipelines, `&` background jobs and their children (unless a
//! process deliberately moves to another group or session). A [`GroupGuard`] kills its group
//! when dropped, so a cancelled tool call leaves nothing running; [`LiveGroups`] lists the
//! groups still running so the agent can kill them all when it exits.
//!
//! This is the agent's only `unsafe` code: the `kill(2)` call, which has no memory-safety
//! preconditions.
#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};

/// Sends `signal` to every process of the group `pgid`. Group ids below 2 are refused: `-1`
/// would address every process and `0` the agent's own group.
pub fn signal_group(pgid: i32, signal: i32) -> io::Result<()> {
    if pgid < 2 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    // The negated pgid (at most -2) addresses exactly one process group.
    kill(-pgid, signal)
}

/// Sends `signal` to the process `pid` (tests use signal 0 to probe for a process).
#[cfg(test)]
pub fn signal_process(pid: i32, signal: i32) -> io::Result<()> {
    if pid < 2 {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    kill(pid, signal)
}

/// `kill(2)`: `target` is a pid, or a negated process group id. The targets that address more
/// than one process or group, or init (-1, 0, 1), are refused here as well as by the callers.
fn kill(target: i32, signal: i32) -> io::Result<()> {
    if (-1..=1).contains(&target) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    let rc = unsafe { libc::kill(target, signal) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Kills the whole group; a group already gone is not an error.
pub fn kill_group(pgid: i32) {
    match signal_group(pgid, libc::SIGKILL) {
        Ok(()) => tracing::debug!(pgid, "killed process group"),
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
        Err(e) => tracing::warn!(pgid, error = %e, "cannot kill process group"),
    }
}

/// The process groups of commands still running. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct LiveGroups(Arc<Mutex<BTreeSet<i32>>>);

impl LiveGroups {
    /// Kills every group still listed (when the agent exits).
    pub fn kill_all(&self) {
        let groups = std::mem::take(&mut *self.lock());
        for pgid in groups {
            kill_group(pgid);
        }
    }

    /// The groups listed now.
    pub fn list(&self) -> Vec<i32> {
        self.lock().iter().copied().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<i32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Owns one running group: listed while alive, killed on [`GroupGuard::kill`] or on drop.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: i32,
    live: LiveGroups,
    killed: bool,
}

impl GroupGuard {
    /// Lists `pgid` in `live` until the guard is dropped.
    pub fn new(pgid: i32, live: &LiveGroups) -> Self {
        live.lock().insert(pgid);
        GroupGuard {
            pgid,
            live: live.clone(),
            killed: false,
        }
    }

    /// Kills the group now; dropping the guard later does nothing more.
    pub fn kill(&mut self) {
        if !self.killed {
            kill_group(self.pgid);
            self.killed = true;
        }
        self.live.lock().remove(&self.pgid);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangerous_group_ids_are_refused() {
        for pgid in [-5, -1, 0, 1] {
            let err = signal_group(pgid, 0).expect_err("refused");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{pgid}");
        }
        assert!(signal_process(1, 0).is_err());
    }

    #[test]
    fn guards_list_their_group_until_killed() {
        let live = LiveGroups::default();
        // A group id that cannot exist (above any pid_max): killing it is a quiet no-op.
        let mut guard = GroupGuard::new(i32::MAX - 7, &live);
        assert_eq!(live.list(), [i32::MAX - 7]);
        guard.kill();
        assert!(live.list().is_empty());
        drop(guard);
        let _other = GroupGuard::new(i32::MAX - 8, &live);
        live.kill_all();
        assert!(live.list().is_empty());
    }
}
