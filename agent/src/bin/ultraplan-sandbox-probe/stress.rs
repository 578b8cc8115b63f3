//! The probe's attacks on the sandbox's limits, each bounded so the host stays fine: a fork
//! bomb, memory hogs, a disk filler, namespace and mount syscalls, and reads of what `/proc`
//! shows. Each returns one result line like the other probes.

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use super::result;

/// Fork children that wait until killed, up to `max`, and report how many the sandbox let
/// exist at once; then kill and reap them all.
pub fn fork_bomb(max: u64) -> Value {
    let mut children = Vec::new();
    let mut stopped = String::from("never refused");
    for _ in 0..max {
        // SAFETY: the probe is single-threaded; the child only pauses until it is killed.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            loop {
                // SAFETY: pause(2) has no preconditions.
                unsafe {
                    libc::pause();
                }
            }
        }
        if pid < 0 {
            stopped = std::io::Error::last_os_error().to_string();
            break;
        }
        children.push(pid);
    }
    let forked = children.len();
    for pid in &children {
        // SAFETY: kill and waitpid on our own children.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
            libc::waitpid(*pid, std::ptr::null_mut(), 0);
        }
    }
    let allowed = u64::try_from(forked).unwrap_or(u64::MAX) >= max;
    let mut out = result(
        "fork_bomb",
        &max.to_string(),
        allowed,
        format!("forked {forked} then: {stopped}"),
    );
    out["forked"] = json!(forked);
    out
}

/// Start `children` processes that each fill `bytes` of memory and hold it for `hold`, and
/// report how each ended (a signal 9 is the OOM killer).
pub fn memory_hog(children: u64, bytes: u64, hold: Duration) -> Value {
    let size = usize::try_from(bytes).unwrap_or(usize::MAX);
    let mut pids = Vec::new();
    for _ in 0..children {
        // SAFETY: single-threaded probe; the child touches memory and exits with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = match std::panic::catch_unwind(|| {
                let block = vec![1u8; size];
                std::thread::sleep(hold);
                block
                    .iter()
                    .step_by(4096)
                    .map(|b| u64::from(*b))
                    .sum::<u64>()
            }) {
                Ok(_) => 0,
                Err(_) => 3,
            };
            // SAFETY: _exit ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        if pid > 0 {
            pids.push(pid);
        }
    }
    let mut endings = Vec::new();
    let mut killed = 0;
    for pid in pids {
        let mut status = 0;
        // SAFETY: waiting on our own child into a local.
        unsafe {
            libc::waitpid(pid, &raw mut status, 0);
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            if signal == libc::SIGKILL {
                killed += 1;
            }
            endings.push(format!("signal {signal}"));
        } else {
            endings.push(format!("exit {}", libc::WEXITSTATUS(status)));
        }
    }
    let mut out = result(
        "memory_hog",
        &format!("{children}x{bytes}"),
        killed == 0,
        endings.join(", "),
    );
    out["killed"] = json!(killed);
    out
}

/// Write `chunk`-byte files into `dir` until a write fails or `max` bytes are written.
pub fn fill(dir: &str, chunk: u64, max: u64) -> Value {
    let block = vec![b'x'; usize::try_from(chunk).unwrap_or(1 << 20)];
    let mut written: u64 = 0;
    let mut whole = 0u64;
    let mut error = String::from("no error");
    if let Err(e) = std::fs::create_dir_all(dir) {
        return result(
            "fill",
            dir,
            false,
            format!("cannot create the directory: {e}"),
        );
    }
    while written < max {
        let path = format!("{dir}/fill-{whole:04}.bin");
        let outcome = std::fs::File::create(&path).and_then(|mut f| {
            let mut done = 0;
            while done < block.len() {
                match f.write(&block[done..]) {
                    Ok(0) => return Err(std::io::Error::other("wrote nothing")),
                    Ok(n) => done += n,
                    Err(e) => {
                        written += done as u64;
                        return Err(e);
                    }
                }
            }
            f.sync_all()?;
            written += done as u64;
            Ok(())
        });
        match outcome {
            Ok(()) => whole += 1,
            Err(e) => {
                error = e.to_string();
                break;
            }
        }
    }
    let mut out = result(
        "fill",
        dir,
        written >= max,
        format!("{written} bytes in {whole} whole file(s), then: {error}"),
    );
    out["bytes"] = json!(written);
    out["files"] = json!(whole);
    out
}

/// Call a syscall the sandbox should refuse; `allowed` when it succeeded.
pub fn syscall(name: &str) -> Value {
    // SAFETY: each call takes constant arguments or C-string literals; on success in a
    // child-free probe nothing needs undoing for the checks that follow.
    let ret = unsafe {
        match name {
            "unshare_user" => libc::unshare(libc::CLONE_NEWUSER),
            "unshare_net" => libc::unshare(libc::CLONE_NEWNET),
            "unshare_mount" => libc::unshare(libc::CLONE_NEWNS),
            "mount_tmpfs" => libc::mount(
                c"none".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                std::ptr::null(),
            ),
            "ptrace_init" => {
                i32::try_from(libc::ptrace(libc::PTRACE_ATTACH, 1, 0, 0)).unwrap_or(-1)
            }
            "keyctl" => i32::try_from(libc::syscall(libc::SYS_keyctl, 0, -3, 0)).unwrap_or(-1),
            "bpf" => i32::try_from(libc::syscall(libc::SYS_bpf, 0, 0, 0)).unwrap_or(-1),
            "personality_no_aslr" => libc::personality(0x0004_0000),
            _ => return result("syscall", name, false, "unknown syscall probe"),
        }
    };
    if ret < 0 {
        let e = std::io::Error::last_os_error();
        result("syscall", name, false, e.to_string())
    } else {
        result("syscall", name, true, format!("returned {ret}"))
    }
}

/// The contents of a file (NULs shown as spaces, at most 8 KiB), e.g. `/proc/1/cmdline`.
pub fn slurp(path: &str) -> Value {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text: String =
                String::from_utf8_lossy(&bytes[..bytes.len().min(8192)]).replace('\0', " ");
            result("slurp", path, true, text)
        }
        Err(e) => result("slurp", path, false, e.to_string()),
    }
}

/// The probe's open descriptors and what they point at.
pub fn fds() -> Value {
    let entries = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| {
                    let target = std::fs::read_link(e.path())
                        .map_or_else(|e| e.to_string(), |t| t.display().to_string());
                    format!("{}->{target}", e.file_name().to_string_lossy())
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    result("fds", "/proc/self/fd", true, entries.join(" "))
}

/// Run a command with arguments; `allowed` when it exited 0.
pub fn run(argv: &[String]) -> Value {
    let target = argv.join(" ");
    let Some((program, args)) = argv.split_first() else {
        return result("run", &target, false, "empty command");
    };
    match std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let detail = format!("{}: {}", out.status, stderr.trim());
            result("run", &target, out.status.success(), detail)
        }
        Err(e) => result("run", &target, false, e.to_string()),
    }
}
