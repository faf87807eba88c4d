//! The mount namespace a container is created from.
//!
//! `create` attaches the container's rootfs (the overlay, or the idmapped bind) in a
//! private copy of the host's mount namespace, unshared just before, never in the
//! host's own. libcontainer clones the container's mount namespace from this one, so
//! the container (and the createRuntime and prestart hooks that `create` runs) sees the
//! rootfs at `root.path`; from the host it is `/proc/PID/root`, as for any container.
//!
//! Why: overlayfs prints every lowerdir in /proc/self/mountinfo, and every reader of the
//! host's mount table (systemd, libcontainer's cgroup v1 setup, which reads it once per
//! controller, container inits) paid for every live container's layers: 100 live
//! 50-layer containers made it 100 KB. Now the host's table does not grow with
//! containers, `delete` has nothing to detach (the rootfs goes with the container's
//! last process), and a `create` that crashes leaves no mount behind.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use super::RootfsError;

/// Moves this process into a private copy of its mount namespace and makes the mount
/// that holds `target` a slave there, so a mount attached at `target` stays in the copy
/// (mount_namespaces(7): a slave receives propagation but sends none). Every other
/// mount keeps its propagation. Known limit: a volume from that same mount becomes a
/// slave too, so `rshared` mounts made under it inside the container do not reach the
/// host (runc's do).
///
/// Must run while siloc is single-threaded (`unshare(CLONE_NEWNS)` refuses a process
/// whose threads share its filesystem context).
///
/// Errors: [`RootfsError::Sys`] naming the step (`unshare mount namespace`,
/// `statx`, `make mount slave`) and the path.
pub(crate) fn enter(target: &Path) -> Result<(), RootfsError> {
    let fail = |step, path: &Path| {
        let path = path.to_path_buf();
        move |errno| RootfsError::Sys { step, path, errno }
    };
    unshare(CloneFlags::CLONE_NEWNS).map_err(fail("unshare mount namespace", target))?;
    let holder = mount_point_of(target)?;
    mount(
        None::<&str>,
        &holder,
        None::<&str>,
        MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(fail("make mount slave", &holder))
}

/// The mount point of the mount that holds `p`: `p` itself or its nearest ancestor
/// that is the root of a mount (statx STATX_ATTR_MOUNT_ROOT, Linux 5.8). Asks the
/// kernel per path instead of reading /proc/self/mountinfo.
fn mount_point_of(p: &Path) -> Result<std::path::PathBuf, RootfsError> {
    for dir in p.ancestors() {
        if is_mount_root(dir)? {
            return Ok(dir.to_path_buf());
        }
    }
    // Only a relative `p` or a kernel that cannot tell gets here.
    Ok("/".into())
}

/// Whether `p` (not followed when a symlink) is the root of a mount: statx
/// STATX_ATTR_MOUNT_ROOT (Linux 5.8); always false on older kernels.
///
/// Errors: [`RootfsError::Sys`] when statx fails (names the path).
pub(crate) fn is_mount_root(p: &Path) -> Result<bool, RootfsError> {
    let sys = |errno| RootfsError::Sys {
        step: "statx",
        path: p.to_path_buf(),
        errno,
    };
    let c = CString::new(p.as_os_str().as_bytes()).map_err(|_| sys(Errno::EINVAL))?;
    let buf = crate::sys::mountinfo::statx(&c, libc::AT_SYMLINK_NOFOLLOW, libc::STATX_BASIC_STATS)
        .map_err(sys)?;
    // A kernel before 5.8 never sets the bit: the walk then ends at "/", the wider answer.
    Ok(buf.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_roots_are_told_apart_from_plain_dirs() {
        assert!(is_mount_root(Path::new("/")).unwrap());
        assert!(is_mount_root(Path::new("/proc")).unwrap());
        let d = tempfile::tempdir().unwrap();
        assert!(!is_mount_root(d.path()).unwrap());
        let holder = mount_point_of(d.path()).unwrap();
        assert!(
            d.path().starts_with(&holder) && holder != d.path(),
            "{holder:?}"
        );
        assert!(is_mount_root(&holder).unwrap());
    }
}
