//! The seccomp filter bubblewrap installs on the agent (`--seccomp FD`): classic BPF, built
//! once, that refuses what a sandboxed agent never needs and an escape always does: new
//! namespaces, mounts, tracing other processes, kernel keyrings, eBPF, perf, userfaultfd,
//! module loading, kexec, swap, reboot, `setns`, `open_by_handle_at`, `io_uring` and turning
//! ASLR off. `clone3` answers ENOSYS so libc falls back to `clone`, whose flags the filter can
//! read. Syscalls of another ABI than the native one kill the process (no 32-bit or x32
//! detour around the list).

/// One classic BPF instruction, as the kernel's `struct sock_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;

/// `struct seccomp_data` offsets: nr, arch, then the low word of args[0] (little endian).
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const OFF_ARG0_LOW: u32 = 16;

/// The x32 ABI marks its syscall numbers with this bit.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET.
const CLONE_NEW_MASK: u32 = 0x0002_0000 | 0x7e00_0000;
/// The same for `unshare`, plus CLONE_NEWTIME (which shares its bit with clone's exit signal).
const UNSHARE_NEW_MASK: u32 = CLONE_NEW_MASK | 0x0000_0080;
/// `personality(ADDR_NO_RANDOMIZE)` turns ASLR off.
const ADDR_NO_RANDOMIZE: u32 = 0x0004_0000;
/// `personality(0xffffffff)` only asks for the current persona.
const PERSONALITY_QUERY: u32 = 0xffff_ffff;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH_NATIVE: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64

/// Syscalls refused outright with EPERM.
#[cfg(target_arch = "x86_64")]
const REFUSED: [libc::c_long; 38] = [
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_chroot,
    libc::SYS_setns,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_open_by_handle_at,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_iopl,
    libc::SYS_ioperm,
];

/// Where a jump goes, resolved once the program is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Next,
    Allow,
    Eperm,
    Enosys,
    Kill,
    AllowTail,
    CheckClone,
    CheckUnshare,
    CheckPersonality,
}

/// An instruction whose jumps are still symbolic.
#[derive(Debug, Clone, Copy)]
struct Sym {
    code: u16,
    k: u32,
    jt: Target,
    jf: Target,
}

fn ld(offset: u32) -> Sym {
    Sym {
        code: BPF_LD_W_ABS,
        k: offset,
        jt: Target::Next,
        jf: Target::Next,
    }
}

fn jump(code: u16, k: u32, jt: Target, jf: Target) -> Sym {
    Sym { code, k, jt, jf }
}

fn ret(k: u32) -> Sym {
    Sym {
        code: BPF_RET_K,
        k,
        jt: Target::Next,
        jf: Target::Next,
    }
}

/// The program with symbolic jumps, labels marking where each target starts.
fn program(arch: u32, refused: &[u32], nr: Nrs) -> (Vec<Sym>, Vec<(Target, usize)>) {
    let mut code = vec![
        ld(OFF_ARCH),
        jump(BPF_JEQ_K, arch, Target::Next, Target::Kill),
        ld(OFF_NR),
        jump(BPF_JGE_K, X32_SYSCALL_BIT, Target::Kill, Target::Next),
        jump(BPF_JEQ_K, nr.clone3, Target::Enosys, Target::Next),
        jump(BPF_JEQ_K, nr.clone, Target::CheckClone, Target::Next),
        jump(BPF_JEQ_K, nr.unshare, Target::CheckUnshare, Target::Next),
        jump(
            BPF_JEQ_K,
            nr.personality,
            Target::CheckPersonality,
            Target::Next,
        ),
    ];
    code.extend(
        refused
            .iter()
            .map(|n| jump(BPF_JEQ_K, *n, Target::Eperm, Target::Next)),
    );
    let mut labels = vec![(Target::Allow, code.len())];
    code.push(ret(RET_ALLOW));
    labels.push((Target::CheckClone, code.len()));
    code.push(ld(OFF_ARG0_LOW));
    code.push(jump(
        BPF_JSET_K,
        CLONE_NEW_MASK,
        Target::Eperm,
        Target::AllowTail,
    ));
    labels.push((Target::CheckUnshare, code.len()));
    code.push(ld(OFF_ARG0_LOW));
    code.push(jump(
        BPF_JSET_K,
        UNSHARE_NEW_MASK,
        Target::Eperm,
        Target::AllowTail,
    ));
    labels.push((Target::CheckPersonality, code.len()));
    code.push(ld(OFF_ARG0_LOW));
    code.push(jump(
        BPF_JEQ_K,
        PERSONALITY_QUERY,
        Target::AllowTail,
        Target::Next,
    ));
    code.push(jump(
        BPF_JSET_K,
        ADDR_NO_RANDOMIZE,
        Target::Eperm,
        Target::AllowTail,
    ));
    labels.push((Target::Eperm, code.len()));
    code.push(ret(RET_ERRNO | libc::EPERM as u32));
    labels.push((Target::Enosys, code.len()));
    code.push(ret(RET_ERRNO | libc::ENOSYS as u32));
    labels.push((Target::Kill, code.len()));
    code.push(ret(RET_KILL_PROCESS));
    labels.push((Target::AllowTail, code.len()));
    code.push(ret(RET_ALLOW));
    (code, labels)
}

/// Numbers the filter inspects rather than refuses.
#[derive(Debug, Clone, Copy)]
struct Nrs {
    clone: u32,
    clone3: u32,
    unshare: u32,
    personality: u32,
}

/// Resolve symbolic jumps into relative offsets (forward only, each under 256).
fn assemble(code: &[Sym], labels: &[(Target, usize)]) -> Result<Vec<Insn>, String> {
    let offset = |at: usize, target: Target| -> Result<u8, String> {
        if target == Target::Next {
            return Ok(0);
        }
        let dest = labels
            .iter()
            .find(|(t, _)| *t == target)
            .map(|(_, i)| *i)
            .ok_or_else(|| format!("no label for {target:?}"))?;
        let rel = dest
            .checked_sub(at + 1)
            .ok_or_else(|| format!("backward jump to {target:?}"))?;
        u8::try_from(rel).map_err(|_| format!("jump to {target:?} too far ({rel})"))
    };
    code.iter()
        .enumerate()
        .map(|(at, s)| {
            Ok(Insn {
                code: s.code,
                jt: offset(at, s.jt)?,
                jf: offset(at, s.jf)?,
                k: s.k,
            })
        })
        .collect()
}

fn to_bytes(insns: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(insns.len() * 8);
    for i in insns {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// The filter as bytes for bubblewrap's `--seccomp FD`, or why there is none on this
/// architecture.
#[cfg(target_arch = "x86_64")]
pub fn filter() -> Result<Vec<u8>, String> {
    let refused: Vec<u32> = REFUSED
        .iter()
        .map(|n| u32::try_from(*n).map_err(|_| format!("syscall number {n}")))
        .collect::<Result<_, _>>()?;
    let nrs = Nrs {
        clone: nr(libc::SYS_clone)?,
        clone3: nr(libc::SYS_clone3)?,
        unshare: nr(libc::SYS_unshare)?,
        personality: nr(libc::SYS_personality)?,
    };
    let (code, labels) = program(AUDIT_ARCH_NATIVE, &refused, nrs);
    Ok(to_bytes(&assemble(&code, &labels)?))
}

#[cfg(target_arch = "x86_64")]
fn nr(n: libc::c_long) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| format!("syscall number {n}"))
}

/// The filter as bytes for bubblewrap's `--seccomp FD`, or why there is none on this
/// architecture.
#[cfg(not(target_arch = "x86_64"))]
pub fn filter() -> Result<Vec<u8>, String> {
    Err(format!(
        "no seccomp filter is defined for {}",
        std::env::consts::ARCH
    ))
}

#[cfg(test)]
#[path = "seccomp_tests.rs"]
mod tests;
