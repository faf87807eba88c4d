//! The last steps before the container's program runs, as runc takes them, where
//! libcontainer 0.7's default executor differs. [`super::procname::Named`] calls these
//! inside the container (after pivot_root, the user switch and the capability drop):
//!
//! - **Finding the program** ([`find_program`]): runc uses Go's `exec.LookPath`, which
//!   takes a regular file with *any* execute bit (`mode & 0o111`); the kernel then
//!   decides at execve(2) (a process with CAP_DAC_OVERRIDE may run a file whose only
//!   execute bit is its owner's). libcontainer's check wants the *others* execute bit
//!   (`mode & 0o001`), so a `0700` program owned by root fails for any other user,
//!   capabilities or not; it also refuses a spec without `PATH` even for a program
//!   given by path.
//! - **HOME** ([`default_home`]): runc sets `HOME` from the container's /etc/passwd
//!   when the environment has none, and to `/` when the uid has no entry there
//!   (runc's user.GetExecUser default). siloc reads the file itself before create and
//!   exec (engine::home), so libcontainer's own lookup (glibc NSS inside the
//!   container) does not run; this is the last fallback.
//! - **CPU affinity** ([`reset_cpu_affinity`]): runc (1.2 and later) resets the
//!   affinity of the init and of an exec'd process without `execCPUAffinity` to every
//!   CPU of the container's cpuset, so that they do not inherit the caller's (a
//!   `taskset`, systemd's `CPUAffinity=`). Since Linux 6.2 joining a cpuset cgroup no
//!   longer resets it (kernel commit da019032819a). libcontainer 0.7 applies
//!   `execCPUAffinity` (initial before, final after the cgroup join) but resets
//!   nothing otherwise.
//! - **`linux.memoryPolicy` for exec** ([`inherit_memory_policy`]): libcontainer 0.7
//!   sets it in the init, but its tenant builder rebuilds the exec's `linux` section
//!   without it. runc applies it in both. The policy is inherited over fork and
//!   execve (set_mempolicy(2)), so siloc sets it on itself before libcontainer clones
//!   the exec'd process.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where the program `name` is, as Go's `exec.LookPath` finds it with `path_var` as
/// `$PATH` (None: unset): a name with a `/` is taken as it is, any other is searched
/// in the `:`-separated directories, the first regular file with an execute bit
/// winning.
///
/// Errors, in libcontainer 0.7's words (which `cli::errmsg` turns into runc's
/// `exec: "x": executable file not found in $PATH` / `stat x: no such file or
/// directory` / `permission denied`): `executable 'NAME' not found in $PATH`, or
/// `executable 'NAME' at path 'P' does not have correct permissions` for a name with a
/// `/` that is a directory or has no execute bit.
pub fn find_program(name: &str, path_var: Option<&str>) -> Result<PathBuf, String> {
    let not_found = || format!("executable '{name}' not found in $PATH");
    if name.contains('/') {
        let p = PathBuf::from(name);
        return match is_executable(&p) {
            Some(true) => Ok(p),
            Some(false) => Err(format!(
                "executable '{name}' at path '{p:?}' does not have correct permissions"
            )),
            None => Err(not_found()),
        };
    }
    // Go's filepath.SplitList: an empty $PATH holds no directory; an empty entry is ".".
    for dir in path_var
        .filter(|p| !p.is_empty())
        .into_iter()
        .flat_map(|p| p.split(':'))
    {
        let dir = if dir.is_empty() { "." } else { dir };
        let p = Path::new(dir).join(name);
        if is_executable(&p) == Some(true) {
            return Ok(p);
        }
    }
    Err(not_found())
}

/// Some(whether `p` is a non-directory with an execute bit), None when it cannot be
/// stat'ed (symlinks followed, as Go's os.Stat does).
fn is_executable(p: &Path) -> Option<bool> {
    let m = std::fs::metadata(p).ok()?;
    Some(!m.is_dir() && m.permissions().mode() & 0o111 != 0)
}

/// The program of `spec` as [`find_program`] finds it with the process's `PATH`.
pub fn find_spec_program(spec: &oci_spec::runtime::Spec) -> Result<PathBuf, String> {
    let process = spec
        .process()
        .as_ref()
        .ok_or_else(|| "spec did not contain process".to_string())?;
    let name = process
        .args()
        .as_ref()
        .and_then(|a| a.first())
        .ok_or_else(|| "process.args: must name at least the program to run".to_string())?;
    let path_var = process
        .env()
        .iter()
        .flatten()
        .find_map(|e| e.strip_prefix("PATH="));
    find_program(name, path_var)
}

/// runc's `tryResetCPUAffinity`: asks for every CPU, which the kernel clamps to the
/// CPUs online in the task's cpuset. Does nothing for an exec'd process with an
/// `execCPUAffinity` (libcontainer applied it; runtime-spec: the field does not apply
/// to the init, which is told apart as pid 1 of its PID namespace, so an init in the
/// host's PID namespace with the field set keeps its inherited affinity) or when the
/// spec's seccomp filter could kill or trap `sched_setaffinity` (see
/// [`super::procname::call_is_safe`]). A failure only leaves the inherited affinity,
/// as in runc (a warning there).
pub fn reset_cpu_affinity(spec: &oci_spec::runtime::Spec) {
    let init = std::process::id() == 1;
    let wanted = !init
        && spec
            .process()
            .as_ref()
            .and_then(|p| p.exec_cpu_affinity().as_ref())
            .is_some_and(|a| a.initial().is_some() || a.cpu_affinity_final().is_some());
    if wanted || !super::procname::call_is_safe(spec, "sched_setaffinity") {
        return;
    }
    let mut all = nix::sched::CpuSet::new();
    for cpu in 0..nix::sched::CpuSet::count() {
        let _ = all.set(cpu);
    }
    if let Err(e) = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &all) {
        tracing::warn!("resetting the CPU affinity failed: sched_setaffinity: {e}");
    }
}

/// Sets `mp` (runtime-spec `linux.memoryPolicy`, already checked by
/// `lifecycle::spec_compat`) as the calling thread's policy with set_mempolicy(2), so
/// that the processes it clones next inherit it. Mode and flag values are the kernel's
/// ([`crate::sys::mempolicy`]).
///
/// Errors: `set_mempolicy: <errno>` (runc's wording), or a node list that is not one.
pub fn inherit_memory_policy(mp: &oci_spec::runtime::LinuxMemoryPolicy) -> Result<(), String> {
    use crate::sys::mempolicy as k;
    use oci_spec::runtime::{MemoryPolicyFlagType as F, MemoryPolicyModeType as M};
    let mut mode: libc::c_int = match mp.mode() {
        M::MpolDefault => k::MPOL_DEFAULT,
        M::MpolPreferred => k::MPOL_PREFERRED,
        M::MpolBind => k::MPOL_BIND,
        M::MpolInterleave => k::MPOL_INTERLEAVE,
        M::MpolLocal => k::MPOL_LOCAL,
        M::MpolPreferredMany => k::MPOL_PREFERRED_MANY,
        M::MpolWeightedInterleave => k::MPOL_WEIGHTED_INTERLEAVE,
    };
    for f in mp.flags().iter().flatten() {
        mode |= match f {
            F::MpolFStaticNodes => k::MPOL_F_STATIC_NODES,
            F::MpolFRelativeNodes => k::MPOL_F_RELATIVE_NODES,
            F::MpolFNumaBalancing => k::MPOL_F_NUMA_BALANCING,
        };
    }
    let bits = libc::c_ulong::BITS as usize;
    let mut mask: Vec<libc::c_ulong> = Vec::new();
    for n in node_ids(mp.nodes().as_deref().unwrap_or(""))? {
        if mask.len() <= n / bits {
            mask.resize(n / bits + 1, 0);
        }
        mask[n / bits] |= 1 << (n % bits);
    }
    // the kernel reads maxnode - 1 bits
    let maxnode = if mask.is_empty() {
        0
    } else {
        mask.len() * bits + 1
    };
    let ptr = if mask.is_empty() {
        std::ptr::null()
    } else {
        mask.as_ptr()
    };
    // SAFETY: set_mempolicy reads maxnode - 1 bits from `ptr`, which holds
    // mask.len() * bits of them (or is NULL with maxnode 0); it changes only the
    // calling thread's policy.
    let r = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode) };
    if r != 0 {
        return Err(format!(
            "set_mempolicy: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The kernel's MAX_NUMNODES (include/linux/numa.h, NODES_SHIFT 10): node ids are
/// below it.
const MAX_NUMNODES: u32 = 1024;

/// The node ids of a list such as `0-2,4` (runc's lenient list syntax,
/// [`crate::numa::cpulist::CpuList::parse_lenient`]), ids below [`MAX_NUMNODES`].
/// Errors: runc's "invalid memory policy nodes" text.
fn node_ids(list: &str) -> Result<Vec<usize>, String> {
    crate::numa::cpulist::CpuList::parse_lenient(list, MAX_NUMNODES)
        .map(|l| l.iter().map(|n| n as usize).collect())
        .map_err(|_| format!("invalid memory policy nodes {list:?}"))
}

/// Sets `HOME=/` when `envs` has no (or an empty) HOME: runc's default for a uid the
/// container's /etc/passwd does not list. engine::home has normally set HOME already;
/// this covers a process whose HOME it could not set.
pub fn default_home(envs: &mut HashMap<String, String>) {
    if envs.get("HOME").is_none_or(|h| h.is_empty()) {
        envs.insert("HOME".into(), "/".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn any_execute_bit_will_do_as_for_go_lookpath() {
        let d = tempfile::tempdir().unwrap();
        let owner_only = file(d.path(), "owner", 0o700);
        let none = file(d.path(), "none", 0o644);
        let s = owner_only.to_str().unwrap();
        assert_eq!(find_program(s, None).unwrap(), owner_only);
        let e = find_program(none.to_str().unwrap(), None).unwrap_err();
        assert!(e.ends_with("does not have correct permissions"), "{e}");
        let missing = d.path().join("missing");
        let e = find_program(missing.to_str().unwrap(), None).unwrap_err();
        assert!(e.ends_with("not found in $PATH"), "{e}");
        let dirs = format!("/nonexistent:{}", d.path().display());
        assert_eq!(find_program("owner", Some(&dirs)).unwrap(), owner_only);
        // a file without execute bits is skipped in the search
        assert!(find_program("none", Some(&dirs)).is_err());
        assert!(find_program("owner", None).is_err());
        assert!(find_program("owner", Some("")).is_err());
    }

    #[test]
    fn node_lists() {
        assert_eq!(node_ids("0-2,4").unwrap(), vec![0, 1, 2, 4]);
        assert_eq!(node_ids("").unwrap(), Vec::<usize>::new());
        assert!(node_ids("x").is_err());
        assert!(node_ids("3-1").is_err());
    }

    #[test]
    fn home_defaults_to_root_dir() {
        let mut e = HashMap::new();
        default_home(&mut e);
        assert_eq!(e["HOME"], "/");
        let mut e = HashMap::from([("HOME".to_string(), "/home/u".to_string())]);
        default_home(&mut e);
        assert_eq!(e["HOME"], "/home/u");
        let mut e = HashMap::from([("HOME".to_string(), String::new())]);
        default_home(&mut e);
        assert_eq!(e["HOME"], "/");
    }
}
