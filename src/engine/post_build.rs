//! One helper for every fix-up siloc makes inside a container's mount namespace after
//! libcontainer has built the container and before its process starts: the v1
//! `cgroup` mounts siloc makes itself ([`super::pidns_cgroup`]: a spec mount, made
//! before what follows as runc makes mounts before read-only and masked paths), runc's
//! mount semantics ([`super::mount_compat`]: tmpcopyup, cleared bind flags, read-only
//! and masked paths, a read-only `/dev`), then the per-mount options libcontainer skips ([`super::mount_fixups`]:
//! propagation, read-only cgroup v1 hierarchies libcontainer mounted), in that order.
//! Each used to fork its own helper; a default spec (masked paths and a read-only
//! `cgroup` mount) forked two per create, a container in a joined PID namespace three.
//!
//! The helper is forked from siloc (single-threaded, [`crate::sys::fork`]), joins the
//! mount namespace of the container's init (`/proc/PID/ns/mnt`, setns(2)) and its root
//! (`/proc/PID/root`, fchdir + chroot: the container's paths also without
//! pivot_root), does all three parts and reports the first failure. Nothing is forked when
//! no part has anything to do.

use std::os::fd::AsRawFd;

use nix::sched::{CloneFlags, setns};
use nix::unistd::Pid;
use oci_spec::runtime::Spec;

use super::mount_compat::{self, MountCompatError};
use super::mount_fixups::{self, MountFixupError};
use super::pidns_cgroup::{self, PidnsCgroupError};

/// A post-build fix-up that failed: the half's own error, naming the mount or path.
#[derive(Debug, thiserror::Error)]
pub enum PostBuildError {
    #[error(transparent)]
    Compat(#[from] MountCompatError),
    #[error(transparent)]
    Fixup(#[from] MountFixupError),
    #[error(transparent)]
    Cgroup(#[from] PidnsCgroupError),
}

/// The helper's report codes: the setup (setns, chroot) fails as [`SETUP`]; a
/// mount_fixups change `i` as `FIXUP | i`; a cgroup mount step `c` as `CGROUP | c`;
/// everything else is mount_compat's own code (step << 16 | index, steps 0-9).
const SETUP: u32 = 0;
const FIXUP: u32 = 1 << 31;
const CGROUP: u32 = 1 << 30;

/// Makes the `cgroup` mounts taken from the spec (`cgroups`, from
/// [`pidns_cgroup::take`]), applies `compat` (from [`mount_compat::prepare`]) and the
/// spec's mount fix-ups ([`mount_fixups::plan`]) inside the mount namespace and root
/// of `pid` (the container's init, built, in all of its cgroups, not started), from
/// one helper. `baseline` is the mount table siloc saw before libcontainer built the
/// container ([`super::mount_guard`]); `mounts` siloc's own mount table when already
/// read (the cgroup hierarchies; read again when `None`).
///
/// Errors: the container's namespace, root, cgroups or mount table cannot be opened
/// or read, a hierarchy cannot be cloned, the helper cannot be forked, or the first
/// change that fails (naming the destination or masked path, as each part words it).
pub fn apply(
    cgroups: Vec<pidns_cgroup::CgroupMount>,
    compat: &mount_compat::Plan,
    spec: &Spec,
    pid: Pid,
    baseline: &super::mount_guard::Baseline,
    mounts: Option<&[crate::sys::mountinfo::Mount]>,
) -> Result<(), PostBuildError> {
    let userns = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .is_some_and(|ns| {
            ns.iter()
                .any(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::User)
        });
    let sys = |e: nix::Error| PostBuildError::Compat(MountCompatError::Sys(e));
    let io = |e: std::io::Error| sys(nix::Error::from_raw(e.raw_os_error().unwrap_or(0)));
    // Where the mounts below a bind, an overlay or a disk's filesystem landed
    // (mount_refusals::check_made).
    if !compat.proc_watch.unverified.is_empty() {
        let made = crate::sys::mountinfo::read(Some(pid.as_raw())).map_err(io)?;
        super::mount_refusals::check_made(&made, &compat.proc_watch)
            .map_err(MountCompatError::from)?;
    }
    let cgroups = pidns_cgroup::prepare(cgroups, pid, mounts, userns)?;
    let fixups = mount_fixups::plan(spec, pid, baseline)?;
    if cgroups.is_empty() && compat.is_empty() && fixups.is_empty() {
        return Ok(());
    }
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/mnt")).map_err(io)?;
    let root = std::fs::File::open(format!("/proc/{pid}/root")).map_err(io)?;
    let init = mount_compat::ns_pid(pid);
    let helper = crate::sys::fork::spawn(|sock| {
        let outcome = setns(&ns, CloneFlags::CLONE_NEWNS)
            .and_then(|()| nix::unistd::fchdir(root.as_raw_fd()))
            .and_then(|()| nix::unistd::chroot("."))
            .and_then(|()| nix::unistd::chdir("/"))
            .map_err(|e| (SETUP, e))
            .and_then(|()| pidns_cgroup::in_container(&cgroups).map_err(|(c, e)| (CGROUP | c, e)))
            .and_then(|()| mount_compat::in_container(compat, init))
            .and_then(|()| {
                mount_fixups::in_container(&fixups).map_err(|(i, e)| (FIXUP | i as u32, e))
            });
        let _ = crate::sys::fork::report(sock, outcome.map(|()| None));
        0
    })
    .map_err(sys)?;
    match crate::sys::fork::receive(helper.sock()).map_err(sys)? {
        Ok(_) => Ok(()),
        Err((code, errno)) => Err(match half(code) {
            Half::Fixup(i) => fixups.error(i, errno).into(),
            Half::Cgroup(c) => cgroups.error(c, errno).into(),
            Half::Compat(c) => compat.error(c, errno).into(),
        }),
    }
}

/// Which part a helper report code belongs to, and its own code there.
#[derive(Debug, PartialEq, Eq)]
enum Half {
    /// mount_compat's code (step << 16 | index).
    Compat(u32),
    /// mount_fixups' change index.
    Fixup(usize),
    /// pidns_cgroup's step code.
    Cgroup(u32),
}

fn half(code: u32) -> Half {
    if code & FIXUP != 0 {
        Half::Fixup((code & !FIXUP) as usize)
    } else if code & CGROUP != 0 {
        Half::Cgroup(code & !CGROUP)
    } else {
        Half::Compat(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_codes_name_their_half() {
        // mount_compat's highest step (7, the file masks) at a high index stays its own.
        assert_eq!(half((7 << 16) | 0xffff), Half::Compat((7 << 16) | 0xffff));
        assert_eq!(half(SETUP), Half::Compat(0));
        assert_eq!(half(FIXUP | 3), Half::Fixup(3));
        assert_eq!(half(CGROUP | 4), Half::Cgroup(4));
        assert_eq!(half(CGROUP), Half::Cgroup(0));
        let compat = mount_compat::Plan {
            masks: vec!["/proc/kcore".into(), "/sys/firmware".into()],
            ..Default::default()
        };
        let e = compat.error((4 << 16) | 1, nix::Error::EPERM);
        assert_eq!(
            e.to_string(),
            "maskedPaths: /sys/firmware: mask (tmpfs): EPERM: Operation not permitted"
        );
    }
}
