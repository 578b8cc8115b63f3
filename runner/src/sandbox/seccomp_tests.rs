#![allow(unsafe_code)] // installs the filter in a test child
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use super::*;

#[test]
fn every_jump_lands_inside_the_program_and_every_path_returns() {
    let bytes = filter().expect("x86_64 filter");
    assert_eq!(bytes.len() % 8, 0);
    let insns: Vec<(u16, u8, u8, u32)> = bytes
        .chunks(8)
        .map(|c| {
            (
                u16::from_ne_bytes([c[0], c[1]]),
                c[2],
                c[3],
                u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            )
        })
        .collect();
    for (at, (code, jt, jf, _)) in insns.iter().enumerate() {
        if *code & 0x07 == 0x05 {
            assert!(at + 1 + usize::from(*jt) < insns.len(), "jt of {at}");
            assert!(at + 1 + usize::from(*jf) < insns.len(), "jf of {at}");
        }
    }
    assert_eq!(insns.last().map(|i| i.0), Some(BPF_RET_K));
    assert_eq!(insns[0], (BPF_LD_W_ABS, 0, 0, OFF_ARCH));
}

#[test]
fn backward_jumps_are_refused() {
    let code = [
        ret(RET_ALLOW),
        jump(BPF_JEQ_K, 1, Target::Allow, Target::Next),
    ];
    let labels = [(Target::Allow, 0)];
    assert!(assemble(&code, &labels).is_err());
}

/// Run `sh -c script` under the filter (as this test's user, root in CI) and return its
/// exit status and stderr.
fn under_filter(script: &str) -> (bool, String) {
    let bytes = filter().expect("filter");
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe syscalls between fork and exec; `bytes` outlives the
    // spawn.
    unsafe {
        command.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: u16::try_from(bytes.len() / 8).unwrap_or(0),
                filter: bytes.as_ptr().cast_mut().cast(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::syscall(libc::SYS_seccomp, 1, 0, &raw const prog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = command.output().expect("run sh under the filter");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_filter_refuses_namespaces_and_mounts_but_runs_programs() {
    let target = tempfile::tempdir().expect("mount target");
    let mount = format!("mount -t tmpfs none {}", target.path().display());
    // (script, must succeed)
    let cases = [
        ("true", true),
        ("sleep 0 & wait", true),
        ("echo hi | cat >/dev/null", true),
        ("unshare -U true", false),
        ("unshare -r true", false),
        ("unshare -n true", false),
        ("unshare -m true", false),
        ("setarch -R true", false),
        (mount.as_str(), false),
    ];
    for (script, ok) in cases {
        let (succeeded, stderr) = under_filter(script);
        assert_eq!(succeeded, ok, "{script}: {stderr}");
    }
}
