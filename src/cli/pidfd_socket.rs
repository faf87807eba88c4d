//! `--pidfd-socket` (runc 1.2's flag for `create`, `run` and `exec`): the caller's
//! AF_UNIX socket receives a pidfd (pidfd_open(2), Linux 5.3) of the container's init
//! or of the exec'd process, with SCM_RIGHTS, once that process exists, so the
//! caller can wait for it and signal it without pid reuse races.
//!
//! siloc connects before it creates anything (a bad socket fails the command with
//! nothing left behind) and sends after libcontainer made the process.

use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use nix::unistd::Pid;

/// Errors of `--pidfd-socket`, naming the socket.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PidfdSocketError {
    #[error("--pidfd-socket {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--pidfd-socket {path}: pidfd_open({pid}): {errno}")]
    Open {
        path: PathBuf,
        pid: Pid,
        errno: nix::Error,
    },
    #[error("--pidfd-socket {path}: send the pidfd: {errno}")]
    Send { path: PathBuf, errno: nix::Error },
}

/// A connection to the caller's pidfd socket.
pub(crate) struct PidfdSocket {
    stream: UnixStream,
    path: PathBuf,
}

impl PidfdSocket {
    /// Connects to `path`.
    ///
    /// Errors: [`PidfdSocketError::Connect`] when nothing listens there.
    pub(crate) fn connect(path: &Path) -> Result<PidfdSocket, PidfdSocketError> {
        let stream = UnixStream::connect(path).map_err(|source| PidfdSocketError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(PidfdSocket {
            stream,
            path: path.to_path_buf(),
        })
    }

    /// Sends a pidfd of `pid` (payload `pidfd`).
    ///
    /// Errors: pidfd_open or sendmsg failed (the process is gone, the caller closed).
    pub(crate) fn send(self, pid: Pid) -> Result<(), PidfdSocketError> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
        if fd < 0 {
            return Err(PidfdSocketError::Open {
                path: self.path,
                pid,
                errno: nix::Error::last(),
            });
        }
        // SAFETY: the kernel just returned this fd; nothing else owns it.
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let fds = [pidfd.as_raw_fd()];
        sendmsg::<()>(
            self.stream.as_raw_fd(),
            &[IoSlice::new(b"pidfd")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .map_err(|errno| PidfdSocketError::Send {
            path: self.path.clone(),
            errno,
        })?;
        Ok(())
    }
}

/// Connects to the socket `path` names, if any (cleaned lexically, as siloc's other
/// path flags).
pub(crate) fn connect(path: Option<&Path>) -> anyhow::Result<Option<PidfdSocket>> {
    path.map(|p| {
        let p = crate::sys::paths::absolute_clean(p)?;
        Ok(PidfdSocket::connect(&p)?)
    })
    .transpose()
}
