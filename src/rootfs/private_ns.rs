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

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, fork};

use super::{RootfsError, mountapi};

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
        step: STEPS[step],
        path: park.to_path_buf(),
        errno,
    };
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| fail(0, e))?;
    // SAFETY: siloc is single-threaded while it prepares a rootfs (as for the userns
    // helper), so the child may run ordinary code; it leaves with _exit, running no
    // destructor of the parent's state.
    match unsafe { fork() }.map_err(|e| fail(0, e))? {
        ForkResult::Child => {
            drop(ours);
            let (head, fd) = match helper(trees, park, source, options) {
                Ok(mnt) => ([0u8; 5], Some(mnt)),
                Err((step, errno)) => {
                    let mut h = [step as u8; 5];
                    h[1..].copy_from_slice(&(errno as i32).to_le_bytes());
                    (h, None)
                }
            };
            let raw: Vec<i32> = fd.iter().map(AsRawFd::as_raw_fd).collect();
            let cmsg = [ControlMessage::ScmRights(&raw)];
            let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &cmsg };
            let sent = sendmsg::<()>(
                theirs.as_raw_fd(),
                &[IoSlice::new(&head)],
                cmsgs,
                MsgFlags::empty(),
                None,
            );
            // SAFETY: _exit ends the helper without touching the parent's state.
            unsafe { libc::_exit(if sent.is_ok() { 0 } else { 1 }) }
        }
        ForkResult::Parent { child } => {
            drop(theirs);
            let got = receive(&ours);
            let _ = waitpid(child, None);
            match got {
                Ok((head, Some(fd))) if head[0] == 0 => Ok(fd),
                Ok((head, _)) if (1..STEPS.len()).contains(&(head[0] as usize)) => {
                    let errno = i32::from_le_bytes([head[1], head[2], head[3], head[4]]);
                    Err(fail(head[0] as usize, Errno::from_raw(errno)))
                }
                Ok(_) => Err(fail(0, Errno::EPROTO)),
                Err(e) => Err(fail(0, e)),
            }
        }
    }
}

/// The helper's work: its own private mount namespace, the trees attached, the
/// overlay mounted, and a detached clone of it returned.
fn helper(
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

/// Reads the helper's 5-byte answer and the fd that comes with a success.
fn receive(sock: &OwnedFd) -> Result<([u8; 5], Option<OwnedFd>), Errno> {
    let mut head = [0u8; 5];
    let mut fd = None;
    let bytes = {
        let mut cmsg_buf = nix::cmsg_space!([i32; 1]);
        let mut iov = [IoSliceMut::new(&mut head)];
        let msg = recvmsg::<()>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg_buf),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )?;
        for c in msg.cmsgs()? {
            if let ControlMessageOwned::ScmRights(fds) = c {
                for raw in fds {
                    // SAFETY: SCM_RIGHTS just installed this fd in our table; nothing
                    // else owns it.
                    let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                    fd.get_or_insert(owned);
                }
            }
        }
        msg.bytes
    };
    if bytes != head.len() {
        return Err(Errno::EPROTO);
    }
    Ok((head, fd))
}
