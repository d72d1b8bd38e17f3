//! The seccomp filters every sandbox process runs under, compiled with `seccompiler` into
//! classic BPF and handed to bubblewrap through a file descriptor (`--add-seccomp-fd`).
//!
//! Two programs, because a program has one action for what it matches:
//! - `deny`: the calls a sandbox never needs, refused with `EPERM` — mounting and pivoting the
//!   root, entering or making namespaces (`unshare`, `setns`, `clone` with a namespace flag),
//!   the keyring, BPF, perf, userfaultfd, io_uring, tracing other processes, kernel modules,
//!   reboot and kexec, swap, clock, quota and syslog calls, `open_by_handle_at`. The x32
//!   variants of each are refused too; a call from another architecture kills the process.
//! - `clone3`: `clone3` answers `ENOSYS`. Its flags sit in a struct that seccomp cannot read, so
//!   it cannot be filtered by flag; `ENOSYS` makes libc fall back to `clone`, which is.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

/// The x32 ABI's system calls carry this bit in their number on x86_64.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// System calls refused outright.
const DENIED: &[i64] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_acct,
];

/// `clone` flags that make a namespace.
const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    0x80, // CLONE_NEWTIME
];

#[derive(Debug, thiserror::Error)]
#[error("compiling the seccomp filter: {0}")]
pub struct FilterError(String);

/// The two programs, each as the bytes bubblewrap reads from `--add-seccomp-fd`.
pub struct Filters {
    pub deny: Vec<u8>,
    pub clone3: Vec<u8>,
}

pub fn compile() -> Result<Filters, FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| FilterError(e.to_string()))?;
    let x32 = arch == TargetArch::x86_64;
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in DENIED {
        deny.insert(nr, vec![]);
        if x32 {
            deny.insert(nr | X32_SYSCALL_BIT, vec![]);
        }
    }
    let mut clone_rules = Vec::new();
    for &flag in NAMESPACE_FLAGS {
        let flag = u64::from(flag.cast_unsigned());
        let condition = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(flag), flag)
            .map_err(|e| FilterError(e.to_string()))?;
        clone_rules.push(SeccompRule::new(vec![condition]).map_err(|e| FilterError(e.to_string()))?);
    }
    if x32 {
        deny.insert(libc::SYS_clone | X32_SYSCALL_BIT, clone_rules.clone());
    }
    deny.insert(libc::SYS_clone, clone_rules);
    let mut clone3: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::from([(libc::SYS_clone3, vec![])]);
    if x32 {
        clone3.insert(libc::SYS_clone3 | X32_SYSCALL_BIT, vec![]);
    }
    Ok(Filters { deny: program(deny, libc::EPERM, arch)?, clone3: program(clone3, libc::ENOSYS, arch)? })
}

fn program(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> Result<Vec<u8>, FilterError> {
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(errno.cast_unsigned()), arch)
            .map_err(|e| FilterError(e.to_string()))?;
    let program: BpfProgram =
        filter.try_into().map_err(|e: seccompiler::BackendError| FilterError(e.to_string()))?;
    // `struct sock_filter` in the machine's byte order: u16 code, u8 jt, u8 jf, u32 k.
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for insn in &program {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_programs_compile_to_whole_instructions() {
        let filters = compile().unwrap();
        assert!(!filters.deny.is_empty() && filters.deny.len().is_multiple_of(8));
        assert!(!filters.clone3.is_empty() && filters.clone3.len().is_multiple_of(8));
        // A classic BPF program holds at most 4096 instructions.
        assert!(filters.deny.len() / 8 <= 4096);
    }
}
