//! One cgroup per sandbox, so limits hold for the agent's whole process tree: memory (swap
//! included), pids and CPU. cgroup v2 is used when the unified hierarchy has the controllers
//! in the server's own (delegated) subtree, else cgroup v1 per controller, else nothing, and
//! the server says which at start-up.
#![allow(unsafe_code)] // libc calls for cgroups, mounts, memfds and the pre-exec step.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::spec::SandboxLimits;

/// CPU quota per period: one CPU, like the Docker runner's `nano_cpus`.
pub const CPU_QUOTA_US: u64 = 100_000;
const CPU_PERIOD_US: u64 = 100_000;
/// The directory under the server's own cgroup that holds the session cgroups.
const SUBTREE: &str = "ultraplan-sandboxes";

/// How sandboxes are grouped on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupMode {
    /// cgroup v2: session cgroups are children of `parent`.
    V2 { parent: PathBuf },
    /// cgroup v1: one parent per controller (`cpu` when mounted).
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpu: Option<PathBuf>,
    },
    /// Not enforced, and why.
    None(String),
}

impl CgroupMode {
    /// What `/healthz` and the start-up log say.
    pub fn describe(&self) -> String {
        match self {
            CgroupMode::V2 { parent } => {
                format!("cgroup v2 (delegated subtree {})", parent.display())
            }
            CgroupMode::V1 { cpu, .. } => {
                if cpu.is_some() {
                    "cgroup v1 (memory, pids, cpu)".to_owned()
                } else {
                    "cgroup v1 (memory, pids)".to_owned()
                }
            }
            CgroupMode::None(reason) => format!("not enforced: {reason}"),
        }
    }

    /// The short name: `v2`, `v1` or `none`.
    pub fn short(&self) -> &'static str {
        match self {
            CgroupMode::V2 { .. } => "v2",
            CgroupMode::V1 { .. } => "v1",
            CgroupMode::None(_) => "none",
        }
    }
}

/// A mounted cgroup hierarchy: where, and its kind/controllers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub v2: bool,
    pub controllers: Vec<String>,
}

/// The cgroup mounts in `/proc/self/mountinfo` (mount point is field 5; after " - " come the
/// fs type, source and super options).
pub fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            let mut right = right.split(' ');
            let fstype = right.next()?;
            let options = right.nth(1).unwrap_or("");
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            let controllers = if v2 {
                Vec::new()
            } else {
                options
                    .split(',')
                    .filter(|o| ["memory", "pids", "cpu"].contains(o))
                    .map(str::to_owned)
                    .collect()
            };
            Some(Mount {
                point: PathBuf::from(point.replace("\\040", " ")),
                v2,
                controllers,
            })
        })
        .collect()
}

/// The process's cgroup per controller from `/proc/self/cgroup` (`0::/path` is v2's).
pub fn own_path(proc_cgroup: &str, controller: Option<&str>) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match controller {
            None => list.is_empty(),
            Some(c) => list.split(',').any(|l| l == c),
        };
        hit.then(|| path.to_owned())
    })
}

fn under(mount: &Path, path: &str) -> PathBuf {
    mount.join(path.trim_start_matches('/'))
}

/// Decide how to group sandboxes on this host, creating the parent directories.
pub fn detect() -> CgroupMode {
    let (Ok(mountinfo), Ok(own)) = (
        std::fs::read_to_string("/proc/self/mountinfo"),
        std::fs::read_to_string("/proc/self/cgroup"),
    ) else {
        return CgroupMode::None("cannot read /proc/self/mountinfo or /proc/self/cgroup".into());
    };
    let mounts = parse_mounts(&mountinfo);
    let mode = match detect_v2(&mounts, &own) {
        Ok(mode) => mode,
        Err(v2_problem) => match detect_v1(&mounts, &own) {
            Ok(mode) => mode,
            Err(v1_problem) => CgroupMode::None(format!("{v2_problem}; {v1_problem}")),
        },
    };
    let parents: Vec<&PathBuf> = match &mode {
        CgroupMode::V2 { parent } => vec![parent],
        CgroupMode::V1 { memory, pids, cpu } => [Some(memory), Some(pids), cpu.as_ref()]
            .into_iter()
            .flatten()
            .collect(),
        CgroupMode::None(_) => Vec::new(),
    };
    for parent in parents {
        sweep(parent);
    }
    mode
}

/// Remove the empty session cgroups a killed server left behind. Only those idle for a
/// minute: a server starting beside this one may have just made one for a sandbox.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for dir in entries.filter_map(Result::ok).map(|e| e.path()) {
        let idle = std::fs::metadata(&dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(60));
        let empty = read(&dir.join("cgroup.procs")).is_some_and(|p| p.trim().is_empty());
        if dir.is_dir() && idle && empty {
            // A cgroup that is not empty after all refuses removal; nothing else happens.
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

fn detect_v2(mounts: &[Mount], own: &str) -> Result<CgroupMode, String> {
    let mount = mounts
        .iter()
        .find(|m| m.v2)
        .ok_or("no cgroup2 hierarchy is mounted")?;
    let path = own_path(own, None).ok_or("the server is in no cgroup v2")?;
    let dir = under(&mount.point, &path);
    let available = read(&dir.join("cgroup.controllers")).unwrap_or_default();
    let has = |c: &str| available.split_whitespace().any(|a| a == c);
    if !(has("memory") && has("pids")) {
        return Err(format!(
            "cgroup v2 at {} lacks the memory and pids controllers (has: {})",
            dir.display(),
            available.trim()
        ));
    }
    let parent = dir.join(SUBTREE);
    mkdir(&parent)?;
    let wanted: Vec<&str> = ["memory", "pids", "cpu"]
        .into_iter()
        .filter(|c| has(c))
        .collect();
    let enable = wanted
        .iter()
        .map(|c| format!("+{c}"))
        .collect::<Vec<_>>()
        .join(" ");
    // The server's own cgroup must delegate to its children; with the server itself inside
    // (no internal processes in v2), it moves to a leaf of its own first.
    if write(&dir.join("cgroup.subtree_control"), &enable).is_err() {
        let leaf = dir.join("ultraplan-server");
        mkdir(&leaf)?;
        write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
        write(&dir.join("cgroup.subtree_control"), &enable)?;
    }
    write(&parent.join("cgroup.subtree_control"), &enable)?;
    Ok(CgroupMode::V2 { parent })
}

fn detect_v1(mounts: &[Mount], own: &str) -> Result<CgroupMode, String> {
    let parent = |controller: &str| -> Result<PathBuf, String> {
        let mount = mounts
            .iter()
            .find(|m| !m.v2 && m.controllers.iter().any(|c| c == controller))
            .ok_or_else(|| format!("no cgroup v1 {controller} hierarchy is mounted"))?;
        let path = own_path(own, Some(controller)).unwrap_or_else(|| "/".to_owned());
        let dir = under(&mount.point, &path).join(SUBTREE);
        mkdir(&dir)?;
        Ok(dir)
    };
    let memory = parent("memory")?;
    let pids = parent("pids")?;
    Ok(CgroupMode::V1 {
        memory,
        pids,
        cpu: parent("cpu").ok(),
    })
}

/// The files to write for the limits, per cgroup directory kind (pure; unit-tested).
pub fn limit_files(
    v2: bool,
    controller: &str,
    limits: &SandboxLimits,
) -> Vec<(&'static str, String)> {
    let memory = limits.memory_bytes.to_string();
    match (v2, controller) {
        (true, _) => vec![
            ("memory.max", memory),
            ("memory.swap.max", "0".to_owned()),
            ("pids.max", limits.processes.to_string()),
            ("cpu.max", format!("{CPU_QUOTA_US} {CPU_PERIOD_US}")),
        ],
        (false, "memory") => vec![
            ("memory.limit_in_bytes", memory.clone()),
            ("memory.memsw.limit_in_bytes", memory),
        ],
        (false, "pids") => vec![("pids.max", limits.processes.to_string())],
        (false, "cpu") => vec![
            ("cpu.cfs_period_us", CPU_PERIOD_US.to_string()),
            ("cpu.cfs_quota_us", CPU_QUOTA_US.to_string()),
        ],
        _ => Vec::new(),
    }
}

/// One sandbox's cgroup (one directory per v1 controller).
#[derive(Debug)]
pub struct SessionCgroup {
    dirs: Vec<PathBuf>,
    v2: bool,
}

impl SessionCgroup {
    /// Create the cgroup `name` with the limits. A limit file the kernel lacks (swap
    /// accounting off) is skipped; any other failure removes what was made.
    pub fn create(mode: &CgroupMode, name: &str, limits: &SandboxLimits) -> Result<Self, String> {
        let (v2, parents): (bool, Vec<(&str, &PathBuf)>) = match mode {
            CgroupMode::V2 { parent } => (true, vec![("all", parent)]),
            CgroupMode::V1 { memory, pids, cpu } => {
                let mut list = vec![("memory", memory), ("pids", pids)];
                list.extend(cpu.iter().map(|c| ("cpu", c)));
                (false, list)
            }
            CgroupMode::None(reason) => return Err(reason.clone()),
        };
        let mut group = SessionCgroup {
            dirs: Vec::new(),
            v2,
        };
        for (controller, parent) in parents {
            let dir = parent.join(name);
            mkdir(&dir)?;
            group.dirs.push(dir.clone());
            for (file, value) in limit_files(v2, controller, limits) {
                let path = dir.join(file);
                if !path.exists() && file.contains("sw") {
                    continue;
                }
                if let Err(e) = write(&path, &value) {
                    group.destroy();
                    return Err(e);
                }
            }
        }
        Ok(group)
    }

    /// The directories (for tests and diagnostics).
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// `cgroup.procs` of each directory, opened for the child to join between fork and exec.
    pub fn procs_files(&self) -> Result<Vec<File>, String> {
        self.dirs
            .iter()
            .map(|d| {
                let path = d.join("cgroup.procs");
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))
            })
            .collect()
    }

    /// What the limits stopped, e.g. "memory limit: 2 OOM kills; pids limit hit 14 times".
    pub fn events(&self) -> Vec<String> {
        let mut out = Vec::new();
        for dir in &self.dirs {
            let memory = if self.v2 {
                "memory.events"
            } else {
                "memory.oom_control"
            };
            if let Some(n) = counter(&dir.join(memory), "oom_kill").filter(|n| *n > 0) {
                out.push(format!("memory limit: {n} process(es) OOM-killed"));
            }
            if let Some(n) = counter(&dir.join("pids.events"), "max").filter(|n| *n > 0) {
                out.push(format!("process limit reached {n} time(s)"));
            }
        }
        out
    }

    /// Kill whatever is still inside and remove the directories.
    pub fn destroy(&mut self) {
        for dir in std::mem::take(&mut self.dirs) {
            for _ in 0..500 {
                let members = read(&dir.join("cgroup.procs")).unwrap_or_default();
                let pids: Vec<i32> = members
                    .lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .collect();
                if pids.is_empty() && std::fs::remove_dir(&dir).is_ok() {
                    break;
                }
                if self.v2 {
                    let _ = write(&dir.join("cgroup.kill"), "1");
                }
                for pid in pids {
                    // SAFETY: kill(2) with a pid read from the cgroup; no memory is involved.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if dir.exists() {
                tracing::warn!(cgroup = %dir.display(), "cannot remove a sandbox cgroup");
            }
        }
    }
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        if !self.dirs.is_empty() {
            self.destroy();
        }
    }
}

/// A `key N` line's N in a flat-keyed cgroup file.
fn counter(path: &Path, key: &str) -> Option<u64> {
    read(path)?.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("writing {value:?} to {}: {e}", path.display()))
}

fn mkdir(path: &Path) -> Result<(), String> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot create {}: {e}", path.display())),
    }
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
