//! Starting bubblewrap so its limits hold in aggregate: the sandbox joins its own cgroup
//! before anything runs, bwrap gets a seccomp filter and reads its arguments from a memfd
//! (no host path on any command line), and a root server runs bwrap as the unprivileged
//! sandbox uid. bwrap resolves its bind sources as that uid, so a root server first binds
//! them (from descriptors it opened) into a private `/tmp` of a mount namespace of the
//! child's own: the server's data dir need not be reachable by the sandbox uid.
#![allow(unsafe_code)] // libc calls for cgroups, mounts, memfds and the pre-exec step.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::SandboxError;
use super::cgroup::{CgroupMode, SessionCgroup};
use super::launch::{self, AgentProcess};
use super::spec::{
    BwrapLayout, SANDBOX_UID, SandboxRequest, bwrap_args, bwrap_command, nul_separated,
};

/// RLIMIT_NPROC counts every process of a host uid, all sandboxes together; where a pids
/// cgroup bounds each sandbox, the rlimit is only a backstop this high.
pub const NPROC_BACKSTOP: u64 = 8192;
/// Where a root server's child stages the bind sources (in its private mount namespace).
const STAGE_DIR: &str = "/tmp";
const STAGED_WORKSPACE: &str = "/tmp/workspace";
const STAGED_AGENT: &str = "/tmp/ultraplan-agent";
const STAGED_ENVIRONMENT: &str = "/tmp/environment";
const STAGED_EGRESS: &str = "/tmp/egress.sock";
/// The most bind sources a sandbox stages: workspace, agent, environment, egress socket.
const MAX_STAGED: usize = 4;

/// What this host lets the bwrap runner enforce (decided once per process).
#[derive(Debug)]
pub struct Host {
    pub cgroup: CgroupMode,
    /// The seccomp program, or why there is none.
    pub seccomp: Result<Vec<u8>, String>,
    /// Whether the server is root (then bwrap runs as the sandbox uid, with staged binds).
    pub root: bool,
}

/// The host's facts, detected on first use.
pub fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| Host {
        cgroup: super::cgroup::detect(),
        seccomp: super::seccomp::filter(),
        root: super::server_uid() == 0,
    })
}

fn spawn_error(reason: impl std::fmt::Display) -> SandboxError {
    SandboxError::Spawn {
        program: "bwrap".to_owned(),
        reason: reason.to_string(),
    }
}

/// An anonymous in-memory file holding `data`, positioned at its start, close-on-exec.
fn memfd(name: &str, data: &[u8]) -> Result<OwnedFd, SandboxError> {
    use std::io::{Seek, Write};
    let cname = CString::new(name).map_err(spawn_error)?;
    // SAFETY: memfd_create with a valid C string; the returned descriptor is owned below.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(spawn_error(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(data).map_err(spawn_error)?;
    file.rewind().map_err(spawn_error)?;
    Ok(file.into())
}

/// A path opened `O_PATH | O_CLOEXEC` (no permission on the object itself is needed).
fn open_path(path: &Path) -> Result<OwnedFd, SandboxError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| spawn_error(format!("{}: {e}", path.display())))
}

fn cstr(s: &str) -> Result<CString, SandboxError> {
    CString::new(s).map_err(spawn_error)
}

/// What the child does between fork and exec, prepared beforehand (nothing allocates there).
struct ChildPlan {
    cgroup_procs: Vec<RawFd>,
    stage: Option<Stage>,
    inherit: Vec<RawFd>,
    drop_to: Option<u32>,
}

/// Bind sources for a root server: `(host path, staged path, is a directory)`.
struct Stage {
    dir: CString,
    tmpfs: CString,
    options: CString,
    binds: Vec<(CString, CString, bool)>,
}

fn check(ret: libc::c_int) -> std::io::Result<()> {
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl ChildPlan {
    /// Join the cgroup, stage the binds, keep the descriptors bwrap reads, become the sandbox
    /// uid. Only async-signal-safe syscalls.
    fn enter(&self) -> std::io::Result<()> {
        // SAFETY: plain syscalls on descriptors and C strings owned by `self`, which outlives
        // the fork; no allocation and no locks.
        unsafe {
            for fd in &self.cgroup_procs {
                if libc::write(*fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(stage) = &self.stage {
                stage.enter()?;
            }
            for fd in &self.inherit {
                check(libc::fcntl(*fd, libc::F_SETFD, 0))?;
            }
            if let Some(uid) = self.drop_to {
                check(libc::setgroups(0, std::ptr::null()))?;
                check(libc::setgid(uid))?;
                check(libc::setuid(uid))?;
            }
        }
        Ok(())
    }
}

impl Stage {
    /// Called in the child only, between fork and exec (see [`ChildPlan::enter`]).
    fn enter(&self) -> std::io::Result<()> {
        let none = std::ptr::null::<libc::c_char>();
        // SAFETY: the C strings live in `self`; a private mount namespace keeps every mount
        // below from reaching the host.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            // Opened in this namespace before /tmp is covered (a source may live under it); a
            // descriptor from the server's namespace could not be bound here.
            let mut fds = [-1; MAX_STAGED];
            for ((source, _, _), fd) in self.binds.iter().zip(fds.iter_mut()) {
                *fd = libc::open(source.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
                check(*fd)?;
            }
            check(libc::mount(
                self.tmpfs.as_ptr(),
                self.dir.as_ptr(),
                self.tmpfs.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                self.options.as_ptr().cast(),
            ))?;
            for ((_, target, is_dir), fd) in self.binds.iter().zip(fds) {
                if *is_dir {
                    check(libc::mkdir(target.as_ptr(), 0o755))?;
                } else {
                    let fd = libc::open(
                        target.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o755,
                    );
                    check(fd)?;
                    libc::close(fd);
                }
                let mut path = [0u8; 32];
                fd_path(fd, &mut path);
                check(libc::mount(
                    path.as_ptr().cast(),
                    target.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
                libc::close(fd);
            }
        }
        Ok(())
    }
}

/// `/proc/self/fd/<fd>` as a NUL-terminated C string in `out`, without allocating.
fn fd_path(fd: libc::c_int, out: &mut [u8; 32]) {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    out[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut n = fd.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        len += 1;
        n /= 10;
        if n == 0 || len == digits.len() {
            break;
        }
    }
    for i in 0..len {
        out[PREFIX.len() + i] = digits[len - 1 - i];
    }
    out[PREFIX.len() + len] = 0;
}

/// Start the agent (or, for a setup, `ultraplan-agent setup`) under bubblewrap with
/// everything this host enforces.
pub fn spawn(req: &SandboxRequest) -> Result<AgentProcess, SandboxError> {
    spawn_with_args(req, req.agent_args())
}

/// [`spawn`] with arguments for the agent (the start-up probe passes `--version`).
pub fn spawn_with_args(req: &SandboxRequest, extra: &[&str]) -> Result<AgentProcess, SandboxError> {
    let host = host();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let name = format!("{}-{}", req.session_id, &suffix[..8]);
    let cgroup = match &host.cgroup {
        CgroupMode::None(_) => None,
        mode => Some(SessionCgroup::create(mode, &name, &req.limits).map_err(spawn_error)?),
    };
    let procs: Vec<File> = match &cgroup {
        Some(group) => group.procs_files().map_err(spawn_error)?,
        None => Vec::new(),
    };
    let seccomp = match &host.seccomp {
        Ok(program) => Some(memfd("ultraplan-seccomp", program)?),
        Err(_) => None,
    };
    let mut layout = BwrapLayout::direct(req);
    layout.seccomp_fd = seccomp.as_ref().map(AsRawFd::as_raw_fd);
    let stage = if host.root {
        let bind = |source: &Path, target: &str, dir| -> Result<_, SandboxError> {
            // The source must exist now (it is opened again in the child).
            drop(open_path(source)?);
            let source =
                CString::new(source.as_os_str().as_encoded_bytes()).map_err(spawn_error)?;
            Ok((source, cstr(target)?, dir))
        };
        let mut binds = vec![
            bind(&req.workspace, STAGED_WORKSPACE, true)?,
            bind(&req.agent_binary, STAGED_AGENT, false)?,
        ];
        layout.workspace = PathBuf::from(STAGED_WORKSPACE);
        layout.agent = PathBuf::from(STAGED_AGENT);
        if let Some(dir) = &req.environment {
            binds.push(bind(dir, STAGED_ENVIRONMENT, true)?);
            layout.environment = Some(PathBuf::from(STAGED_ENVIRONMENT));
        }
        if let Some(socket) = req.egress() {
            binds.push(bind(socket, STAGED_EGRESS, false)?);
            layout.egress = Some(PathBuf::from(STAGED_EGRESS));
        }
        debug_assert!(binds.len() <= MAX_STAGED);
        Some(Stage {
            dir: cstr(STAGE_DIR)?,
            tmpfs: cstr("tmpfs")?,
            options: cstr("size=64k,mode=0755")?,
            binds,
        })
    } else {
        None
    };
    let args = nul_separated(&bwrap_args(req, &layout)).map_err(spawn_error)?;
    let args_fd = memfd("ultraplan-bwrap-args", &args)?;
    let nproc = if cgroup.is_some() {
        NPROC_BACKSTOP.max(req.limits.processes)
    } else {
        req.limits.processes
    };
    let mut spec = bwrap_command(&req.limits, nproc, args_fd.as_raw_fd());
    spec.args.extend(extra.iter().map(|a| (*a).to_owned()));
    let mut inherit = vec![args_fd.as_raw_fd()];
    inherit.extend(seccomp.as_ref().map(AsRawFd::as_raw_fd));
    let plan = ChildPlan {
        cgroup_procs: procs.iter().map(AsRawFd::as_raw_fd).collect(),
        stage,
        inherit,
        drop_to: host.root.then_some(SANDBOX_UID),
    };
    let process = launch::spawn_with(&spec, Some(Box::new(move || plan.enter())), cgroup);
    // The child has its copies (or failed); the server's are closed here.
    drop((procs, seccomp, args_fd));
    process
}

#[cfg(test)]
mod tests {
    #[test]
    fn fd_paths_are_spelled_without_allocating() {
        for (fd, want) in [
            (0, "/proc/self/fd/0"),
            (7, "/proc/self/fd/7"),
            (1234, "/proc/self/fd/1234"),
        ] {
            let mut out = [0u8; 32];
            super::fd_path(fd, &mut out);
            let end = out.iter().position(|b| *b == 0).expect("NUL");
            assert_eq!(std::str::from_utf8(&out[..end]).expect("utf8"), want);
        }
    }
}
