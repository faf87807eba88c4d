//! The overlay of the `mount(2)` path, built where the kernel accepts detached layers.
//!
//! Before Linux 6.15 overlayfs takes a private clone of each lower layer's mount
//! (`clone_private_mount()`), which refuses a mount outside the caller's mount
//! namespace: layers inside a detached `open_tree` clone fail with EINVAL and
//! "overlayfs: failed to clone lowerpath" (checked on Debian's 6.1). Linux 6.15 lifted
//! that ("fs: allow detached mounts in clone_private_mount()").
//!
//! So a helper process unshares a private mount namespace, attaches the detached trees
//! there (made private first: a clone of a shared mount is its peer), mounts the
//! overlay with `mount(2)` (`/proc/self/fd/N` lowerdirs, the same fd numbers as the
//! caller's), and sends a detached clone of that overlay mount back
//! over a socket (SCM_RIGHTS). The caller attaches it: the host's mount table sees one
//! change, and the trees and the helper's own overlay mount vanish with its namespace,
//! also when anything crashes.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use super::RootfsError;
use crate::sys::{fork, mountapi};

/// The helper's steps, named in errors; the index travels over the socket.
const STEPS: [&str; 7] = [
    "helper for the mount(2) overlay path",
    "unshare mount namespace (helper)",
    "make mounts private (helper)",
    "make layer tree private (helper)",
    "attach layer tree (helper)",
    "mount overlay",
    "clone overlay mount (helper)",
];

/// Builds the overlay (`mount(2)` with `options`, shown with `source` in mountinfo) in
/// a helper's private mount namespace where `trees` are attached on `park` (an
/// existing directory; the caller's view of it is untouched), and returns a detached
/// mount of it for the caller to attach.
///
/// Errors: [`RootfsError::Sys`] naming the failed step and `park`.
pub(super) fn overlay_mount(
    trees: &[OwnedFd],
    park: &Path,
    source: &str,
    options: &str,
) -> Result<OwnedFd, RootfsError> {
    let fail = |step: usize, errno| RootfsError::Sys {
        step: STEPS.get(step).copied().unwrap_or(STEPS[0]),
        path: park.to_path_buf(),
        errno,
    };
    let helper = fork::spawn(|sock| {
        let sent = match work(trees, park, source, options) {
            Ok(mnt) => fork::report(sock, Ok(Some(mnt.as_fd()))),
            Err((step, errno)) => fork::report(sock, Err((step as u32, errno))),
        };
        i32::from(sent.is_err())
    })
    .map_err(|e| fail(0, e))?;
    match fork::receive(helper.sock()).map_err(|e| fail(0, e))? {
        Ok(Some(fd)) => Ok(fd),
        Ok(None) => Err(fail(0, Errno::EPROTO)),
        Err((step, errno)) => Err(fail(step as usize, errno)),
    }
}

/// The helper's work: its own private mount namespace, the trees attached, the
/// overlay mounted, and a detached clone of it returned.
fn work(
    trees: &[OwnedFd],
    park: &Path,
    source: &str,
    options: &str,
) -> Result<OwnedFd, (usize, Errno)> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| (1, e))?;
    // Private first: nothing attached below may propagate back to the host's peers.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| (2, e))?;
    // A clone of a shared mount is still its peer, also here: private, or the trees
    // stacked below and the overlay on top would show up on the host's layer mount.
    for t in trees {
        mountapi::make_private(t.as_fd()).map_err(|e| (3, e))?;
    }
    // Stacked on one directory: overlayfs only needs them in this namespace.
    for t in trees {
        mountapi::move_mount_to(t.as_fd(), park).map_err(|e| (4, e))?;
    }
    mount(
        Some(source),
        park,
        Some("overlay"),
        MsFlags::empty(),
        Some(options),
    )
    .map_err(|e| (5, e))?;
    mountapi::clone_tree(park, false).map_err(|e| (6, e))
}
