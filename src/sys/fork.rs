//! Short-lived helper processes: siloc forks one where a step must run in another
//! namespace than its own (a throwaway user namespace for idmapping, a private mount
//! namespace for the `mount(2)` overlay path, the container's mount namespace for the
//! mount fix-ups). The helper talks to its parent over a socketpair; a [`report`] is
//! an outcome (the failed step's index and errno) plus, optionally, one fd.
//!
//! The single argument that makes this sound: siloc forks helpers only while it is
//! single-threaded (the runtime commands never start threads), so the child may run
//! ordinary code: no other thread can hold the allocator's or any other lock across
//! the fork. The child always ends with `_exit`, running no destructor of state it
//! shares with the parent.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg,
    sendmsg, socketpair,
};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, fork};

/// A running helper: its pid and the parent's end of the socketpair. Dropping it kills
/// the helper (if it is still there) and reaps it.
pub(crate) struct Helper {
    pid: Pid,
    sock: OwnedFd,
}

impl Helper {
    /// The helper's pid (for `/proc/<pid>/...`).
    pub(crate) fn pid(&self) -> Pid {
        self.pid
    }

    /// The parent's end of the socketpair.
    pub(crate) fn sock(&self) -> &OwnedFd {
        &self.sock
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = kill(self.pid, Signal::SIGKILL);
        let _ = waitpid(self.pid, None);
    }
}

/// Forks a helper that runs `child` with its end of the socketpair and then `_exit`s
/// with the status `child` returns. The caller must be single-threaded (module doc).
///
/// Errors: `socketpair(2)` or `fork(2)`.
pub(crate) fn spawn(child: impl FnOnce(&OwnedFd) -> i32) -> Result<Helper, Errno> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    // SAFETY: siloc is single-threaded when it forks a helper (module doc), so the
    // child may run ordinary code; it leaves with _exit.
    match unsafe { fork() }? {
        ForkResult::Child => {
            drop(ours);
            let status = child(&theirs);
            // SAFETY: _exit ends the helper without touching the parent's state.
            unsafe { libc::_exit(status) }
        }
        ForkResult::Parent { child } => Ok(Helper {
            pid: child,
            sock: ours,
        }),
    }
}

/// A helper's outcome: done (with an fd, maybe), or step `n` failed with an errno.
pub(crate) type Report = Result<Option<OwnedFd>, (u32, Errno)>;

/// Sends `outcome` (and `fd` on success) over `sock`.
///
/// Errors: `sendmsg(2)`.
pub(crate) fn report(
    sock: &OwnedFd,
    outcome: Result<Option<BorrowedFd<'_>>, (u32, Errno)>,
) -> Result<(), Errno> {
    let mut head = [0u8; 9];
    let raw: Vec<i32> = match outcome {
        Ok(fd) => fd.iter().map(AsRawFd::as_raw_fd).collect(),
        Err((step, errno)) => {
            head[0] = 1;
            head[1..5].copy_from_slice(&step.to_le_bytes());
            head[5..].copy_from_slice(&(errno as i32).to_le_bytes());
            Vec::new()
        }
    };
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &cmsg };
    sendmsg::<()>(
        sock.as_raw_fd(),
        &[IoSlice::new(&head)],
        cmsgs,
        MsgFlags::empty(),
        None,
    )
    .map(|_| ())
}

/// Receives the helper's [`report`]. A helper that died without one gives `EPROTO`.
///
/// Errors: `recvmsg(2)`, or `EPROTO` for a short or missing report.
pub(crate) fn receive(sock: &OwnedFd) -> Result<Report, Errno> {
    let mut head = [0u8; 9];
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
    if head[0] == 0 {
        return Ok(Ok(fd));
    }
    let step = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let errno = i32::from_le_bytes([head[5], head[6], head[7], head[8]]);
    Ok(Err((step, Errno::from_raw(errno))))
}

/// Blocks until the parent closes its end (or sends a byte): a helper that must stay
/// alive while the parent works on it (its `/proc/<pid>` files) waits here.
pub(crate) fn wait_for_parent(sock: &OwnedFd) {
    let mut b = [0u8; 1];
    let _ = nix::unistd::read(sock.as_raw_fd(), &mut b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_helper_reports_failure_or_an_fd() {
        let h = spawn(|s| {
            let _ = report(s, Err((3, Errno::EACCES)));
            0
        })
        .unwrap();
        assert_eq!(receive(h.sock()).unwrap().unwrap_err(), (3, Errno::EACCES));
        let h = spawn(|s| {
            let f = std::fs::File::open("/").unwrap();
            let _ = report(s, Ok(Some(std::os::fd::AsFd::as_fd(&f))));
            0
        })
        .unwrap();
        assert!(receive(h.sock()).unwrap().unwrap().is_some());
        // A helper that dies without a word is a protocol error, not a hang.
        let h = spawn(|_| 1).unwrap();
        assert_eq!(receive(h.sock()).unwrap_err(), Errno::EPROTO);
    }
}
