//! The kernel's NUMA memory policy interface (set_mempolicy(2),
//! include/uapi/linux/mempolicy.h): the mode and flag values, and which of them the
//! running kernel knows.
//!
//! The kernel grew the list (set_mempolicy(2)): `MPOL_LOCAL` in 3.8,
//! `MPOL_F_NUMA_BALANCING` in 5.12 (with `MPOL_BIND`; 6.18 also takes it with
//! `MPOL_PREFERRED_MANY`), `MPOL_PREFERRED_MANY` in 5.15, `MPOL_WEIGHTED_INTERLEAVE` in
//! 6.9; Linux 6.1 refuses the last one. Which
//! ones the running kernel takes is asked of it, not read from its version: set_mempolicy
//! checks the mode and flags first (`sanitize_mpol_flags`, EINVAL for an unknown one)
//! and copies the node mask from the caller next (EFAULT for an address that is not
//! the caller's), before it changes anything. So a call with a kernel address as the
//! mask changes nothing and answers EFAULT for a mode and flags the kernel knows, EINVAL
//! for those it does not (checked on 6.18; on 6.1 `MPOL_WEIGHTED_INTERLEAVE`, 6, is
//! past its `MPOL_MAX` and gives EINVAL, and `MPOL_F_NUMA_BALANCING` with `MPOL_BIND` its
//! EFAULT; kernels before 5.12 leave bit 13 in the mode, which is then past `MPOL_MAX`).
//! A kernel without `CONFIG_NUMA` has no set_mempolicy (ENOSYS): no mode works there.

use std::sync::OnceLock;

use nix::errno::Errno;

/// Kernel values of the modes (`enum` in include/uapi/linux/mempolicy.h).
pub const MPOL_DEFAULT: libc::c_int = 0;
pub const MPOL_PREFERRED: libc::c_int = 1;
pub const MPOL_BIND: libc::c_int = 2;
pub const MPOL_INTERLEAVE: libc::c_int = 3;
pub const MPOL_LOCAL: libc::c_int = 4;
pub const MPOL_PREFERRED_MANY: libc::c_int = 5;
pub const MPOL_WEIGHTED_INTERLEAVE: libc::c_int = 6;

/// Kernel values of the mode flags, ORed into the mode.
pub const MPOL_F_STATIC_NODES: libc::c_int = 1 << 15;
pub const MPOL_F_RELATIVE_NODES: libc::c_int = 1 << 14;
pub const MPOL_F_NUMA_BALANCING: libc::c_int = 1 << 13;

/// runtime-spec 1.2's memory policy modes (config-linux.md "Memory policy", the
/// kernel's names), sorted, with their values.
pub const MODES: [(&str, libc::c_int); 7] = [
    ("MPOL_BIND", MPOL_BIND),
    ("MPOL_DEFAULT", MPOL_DEFAULT),
    ("MPOL_INTERLEAVE", MPOL_INTERLEAVE),
    ("MPOL_LOCAL", MPOL_LOCAL),
    ("MPOL_PREFERRED", MPOL_PREFERRED),
    ("MPOL_PREFERRED_MANY", MPOL_PREFERRED_MANY),
    ("MPOL_WEIGHTED_INTERLEAVE", MPOL_WEIGHTED_INTERLEAVE),
];

/// runtime-spec 1.2's memory policy mode flags, sorted, with their values.
pub const FLAGS: [(&str, libc::c_int); 3] = [
    ("MPOL_F_NUMA_BALANCING", MPOL_F_NUMA_BALANCING),
    ("MPOL_F_RELATIVE_NODES", MPOL_F_RELATIVE_NODES),
    ("MPOL_F_STATIC_NODES", MPOL_F_STATIC_NODES),
];

/// What the kernel answered to one [`probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// EFAULT: the mode and flags passed the kernel's check.
    Known,
    /// EINVAL: the kernel does not know the mode or a flag (or this combination).
    Unknown,
    /// ENOSYS: no NUMA support in the kernel at all.
    NoNuma,
    /// Anything else (EPERM from a seccomp filter around siloc): the kernel was not
    /// asked; the mode is taken as known and the container's own set_mempolicy call
    /// reports what really happens.
    CannotTell(Errno),
}

impl Answer {
    /// The answer an errno of the probe call means (see the module doc).
    pub fn from_errno(e: Errno) -> Answer {
        match e {
            Errno::EFAULT => Answer::Known,
            Errno::EINVAL => Answer::Unknown,
            Errno::ENOSYS => Answer::NoNuma,
            other => Answer::CannotTell(other),
        }
    }

    /// Whether the mode (and flags) can be used.
    pub fn usable(self) -> bool {
        matches!(self, Answer::Known | Answer::CannotTell(_))
    }
}

/// Asks the running kernel whether it takes `mode` (a mode value ORed with flag
/// values) in set_mempolicy(2), without changing the calling thread's policy (module
/// doc).
pub fn probe(mode: libc::c_int) -> Answer {
    // The last page of the address space: never the caller's (the kernel's half on
    // every 64-bit architecture, above TASK_SIZE on 32-bit ones), so the kernel's
    // access_ok refuses it before reading anything.
    let not_ours = usize::MAX & !4095;
    // 65 bits: one word of mask (kernels before 6.2 read maxnode - 1 bits).
    let maxnode: libc::c_ulong = 65;
    // SAFETY: the kernel never dereferences `not_ours` from this process (access_ok
    // fails first, EFAULT); with EINVAL it has not looked at the mask at all. Either way
    // no policy is set: the call only ever returns an error.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, not_ours, maxnode) };
    if r == 0 {
        // cannot happen (the mask is unreadable); say "known" rather than guess
        return Answer::Known;
    }
    Answer::from_errno(Errno::last())
}

/// The modes and flags of runtime-spec 1.2 one kernel takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Usable modes, sorted (names of [`MODES`]).
    pub modes: Vec<&'static str>,
    /// Usable flags, sorted (names of [`FLAGS`]); each asked with `MPOL_BIND`, the one
    /// mode every flag goes with.
    pub flags: Vec<&'static str>,
}

impl Support {
    /// What `ask` (a mode value ORed with flags, to an [`Answer`]: [`probe`], or a fake
    /// kernel in tests) says of each mode of [`MODES`] and each flag of [`FLAGS`].
    pub fn from_answers(ask: impl Fn(libc::c_int) -> Answer) -> Support {
        Support {
            modes: MODES
                .iter()
                .filter(|(_, v)| ask(*v).usable())
                .map(|(n, _)| *n)
                .collect(),
            flags: FLAGS
                .iter()
                .filter(|(_, v)| ask(MPOL_BIND | *v).usable())
                .map(|(n, _)| *n)
                .collect(),
        }
    }

    /// The running kernel's support, probed once per process (ten system calls).
    pub fn running_kernel() -> &'static Support {
        static KERNEL: OnceLock<Support> = OnceLock::new();
        KERNEL.get_or_init(|| Support::from_answers(probe))
    }

    /// Whether `name` is a usable mode.
    pub fn has_mode(&self, name: &str) -> bool {
        self.modes.contains(&name)
    }

    /// Whether `name` is a usable flag.
    pub fn has_flag(&self, name: &str) -> bool {
        self.flags.contains(&name)
    }
}

/// Linux 6.1's answers, for tests (mm/mempolicy.c there: `MPOL_MAX` is 6, NUMA
/// balancing with `MPOL_BIND` only).
#[cfg(test)]
pub(crate) fn linux_6_1(mode: libc::c_int) -> Answer {
    let flags = mode & (MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING);
    let m = mode & !flags;
    if m >= 6 || (flags & MPOL_F_NUMA_BALANCING != 0 && m != MPOL_BIND) {
        Answer::Unknown
    } else {
        Answer::Known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_read_as_the_module_doc_says() {
        assert_eq!(Answer::from_errno(Errno::EFAULT), Answer::Known);
        assert_eq!(Answer::from_errno(Errno::EINVAL), Answer::Unknown);
        assert_eq!(Answer::from_errno(Errno::ENOSYS), Answer::NoNuma);
        assert!(Answer::from_errno(Errno::EPERM).usable());
        assert!(!Answer::NoNuma.usable() && !Answer::Unknown.usable());
    }

    #[test]
    fn support_follows_the_kernels_answers() {
        let s = Support::from_answers(linux_6_1);
        assert!(!s.has_mode("MPOL_WEIGHTED_INTERLEAVE"));
        assert_eq!(s.modes.len(), 6);
        assert_eq!(s.flags, FLAGS.map(|(n, _)| n));
        // before 5.12: bit 13 left in the mode, past MPOL_MAX
        let s = Support::from_answers(|m| {
            if m & !(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES) >= 5 {
                Answer::Unknown
            } else {
                Answer::Known
            }
        });
        assert!(!s.has_flag("MPOL_F_NUMA_BALANCING") && s.has_flag("MPOL_F_STATIC_NODES"));
        assert!(!s.has_mode("MPOL_PREFERRED_MANY") && s.has_mode("MPOL_LOCAL"));
        let none = Support::from_answers(|_| Answer::NoNuma);
        assert!(none.modes.is_empty() && none.flags.is_empty());
        let seccomp = Support::from_answers(|_| Answer::CannotTell(Errno::EPERM));
        assert_eq!(seccomp.modes.len(), 7);
    }

    /// The calling thread's policy mode (get_mempolicy(2)); None without NUMA.
    fn policy_mode() -> Option<libc::c_int> {
        let mut mode: libc::c_int = -1;
        let null = std::ptr::null_mut::<libc::c_ulong>();
        // SAFETY: get_mempolicy writes one int to `mode`; no mask is asked for.
        let r = unsafe { libc::syscall(libc::SYS_get_mempolicy, &mut mode, null, 0, 0, 0) };
        (r == 0).then_some(mode)
    }

    /// The probe on this machine's kernel: it answers as the kernel's version says,
    /// and the thread's policy is what it was.
    #[test]
    fn the_probe_changes_nothing_and_matches_the_kernel() {
        let before = policy_mode();
        let s = Support::from_answers(probe);
        assert_eq!(policy_mode(), before);
        if probe(MPOL_DEFAULT) == Answer::NoNuma {
            assert!(s.modes.is_empty());
            return;
        }
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release.trim().split(['.', '-']);
        let version: (u32, u32) = (
            v.next().unwrap().parse().unwrap(),
            v.next().unwrap().parse().unwrap(),
        );
        assert_eq!(s.has_mode("MPOL_WEIGHTED_INTERLEAVE"), version >= (6, 9));
        assert_eq!(s.has_mode("MPOL_PREFERRED_MANY"), version >= (5, 15));
        assert_eq!(s.has_flag("MPOL_F_NUMA_BALANCING"), version >= (5, 12));
        // a mode past every kernel's MPOL_MAX
        assert_eq!(probe(100), Answer::Unknown);
    }
}
