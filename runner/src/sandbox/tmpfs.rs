//! Size-capped tmpfs mounts for execution workspaces: a root server mounts one at the
//! workspace tree, so the agent's writes past the cap fail with ENOSPC.
#![allow(unsafe_code)] // libc calls for cgroups, mounts, memfds and the pre-exec step.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The configured workspace cap (0: none configured).
static WORKSPACE_CAP: AtomicU64 = AtomicU64::new(0);

/// Set the size cap of execution workspaces (the server's configuration, at start-up).
pub fn set_workspace_cap(bytes: u64) {
    WORKSPACE_CAP.store(bytes, Ordering::Relaxed);
}

/// The cap a new workspace gets: the configured size where this process can mount a tmpfs.
pub fn workspace_cap() -> Option<u64> {
    let bytes = WORKSPACE_CAP.load(Ordering::Relaxed);
    (bytes > 0 && available().is_ok()).then_some(bytes)
}

fn cpath(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)
}

/// The mount options (pure; unit-tested).
pub fn options(bytes: u64, owner: Option<u32>) -> String {
    let mut options = format!("size={bytes},mode=0755");
    if let Some(uid) = owner {
        options.push_str(&format!(",uid={uid},gid={uid}"));
    }
    options
}

/// Mount a tmpfs of `bytes` at `target` (an existing directory), owned by `owner`.
pub fn mount(target: &Path, bytes: u64, owner: Option<u32>) -> std::io::Result<()> {
    let target = cpath(target)?;
    let options = CString::new(options(bytes, owner)).map_err(std::io::Error::other)?;
    // SAFETY: valid C strings that outlive the call.
    let ret = unsafe {
        libc::mount(
            c"ultraplan-workspace".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Detach whatever is mounted at `target`; nothing mounted there is fine.
pub fn unmount(target: &Path) -> std::io::Result<()> {
    if !is_mountpoint(target) {
        return Ok(());
    }
    let target = cpath(target)?;
    // SAFETY: a valid C string that outlives the call.
    let ret = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `path` is the root of a mount (its device differs from its parent's).
pub fn is_mountpoint(path: &Path) -> bool {
    let (Ok(meta), Some(parent)) = (std::fs::symlink_metadata(path), path.parent()) else {
        return false;
    };
    std::fs::metadata(parent).is_ok_and(|p| p.dev() != meta.dev())
}

/// Whether this process can mount workspace tmpfs (tried once on a scratch directory), or
/// why not.
pub fn available() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    if super::server_uid() != 0 {
        return Err("the server does not run as root, so it cannot mount a tmpfs".to_owned());
    }
    let dir = std::env::temp_dir().join(format!("ultraplan-tmpfs-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mounted = mount(&dir, 4096, None);
    let unmounted = unmount(&dir);
    let _ = std::fs::remove_dir(&dir);
    mounted.map_err(|e| format!("mounting a tmpfs failed: {e}"))?;
    unmounted.map_err(|e| format!("unmounting a tmpfs failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_carry_size_mode_and_owner() {
        assert_eq!(options(1024, None), "size=1024,mode=0755");
        assert_eq!(
            options(2048, Some(65534)),
            "size=2048,mode=0755,uid=65534,gid=65534"
        );
    }

    #[test]
    fn a_plain_directory_is_no_mountpoint_and_unmounts_as_a_no_op() {
        let dir = tempfile::tempdir().expect("dir");
        assert!(!is_mountpoint(dir.path()));
        unmount(dir.path()).expect("nothing to unmount");
        assert!(is_mountpoint(Path::new("/proc")));
    }
}
