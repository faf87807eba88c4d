//! The pty's owner for `exec -t` and `exec --console-socket`, set from the host's user
//! namespace.
//!
//! siloc's exec joins the container's user namespace before libcontainer builds the
//! process (engine::join_user_namespace), and the pty master reaches siloc only
//! after that. From inside the container's user namespace siloc cannot chown the
//! slave to the process's uid: the host uid is unmapped there (EINVAL), and the
//! container's own uid is refused (EPERM, measured on kernel 6.18). runc chowns from
//! its init (`fixStdioPermissions`), which is the container's root. siloc forks a
//! helper before the join ([`OutsideChown::spawn`]): it stays in the host's user
//! namespace, receives the slave over a socketpair (SCM_RIGHTS) and chowns it to the
//! host uid (console_fixup::for_process), the group unchanged, as runc leaves it.

use std::os::fd::{AsRawFd, BorrowedFd};

use super::console_fixup::ConsoleFixError;
use crate::sys::fork::{self, Helper};

/// The helper, waiting for one pty slave; dropping it kills and reaps it.
pub struct OutsideChown {
    helper: Helper,
}

impl OutsideChown {
    /// Forks the helper, which will chown the slave it receives to host uid `uid`.
    /// The caller must be single-threaded and still in the host's user namespace
    /// (sys::fork).
    ///
    /// Errors: [`ConsoleFixError::Sys`] (`socketpair`/`fork`).
    pub fn spawn(uid: u32) -> Result<OutsideChown, ConsoleFixError> {
        let helper = fork::spawn(move |sock| {
            let outcome = match fork::receive(sock) {
                Ok(Ok(Some(slave))) => nix::unistd::fchown(
                    slave.as_raw_fd(),
                    Some(nix::unistd::Uid::from_raw(uid)),
                    None,
                )
                .map(|()| None)
                .map_err(|e| (0, e)),
                Ok(Ok(None)) => Err((1, nix::Error::EPROTO)),
                Ok(Err(e)) => Err(e),
                Err(e) => Err((1, e)),
            };
            match fork::report(sock, outcome) {
                Ok(()) => 0,
                Err(_) => 1,
            }
        })
        .map_err(|errno| ConsoleFixError::Sys {
            step: "fork the pty owner helper",
            errno,
        })?;
        Ok(OutsideChown { helper })
    }

    /// Has the helper chown `slave`.
    ///
    /// Errors: [`ConsoleFixError::Sys`]: `fchown pty` with the helper's errno, or the
    /// exchange with it.
    pub fn chown(&self, slave: BorrowedFd<'_>) -> Result<(), ConsoleFixError> {
        let sys = |step| move |errno| ConsoleFixError::Sys { step, errno };
        fork::report(self.helper.sock(), Ok(Some(slave)))
            .map_err(sys("send the pty to the owner helper"))?;
        match fork::receive(self.helper.sock()).map_err(sys("pty owner helper"))? {
            Ok(_) => Ok(()),
            Err((0, errno)) => Err(sys("fchown pty")(errno)),
            Err((_, errno)) => Err(sys("pty owner helper")(errno)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The helper chowns what it is sent, in the user namespace it was forked in.
    #[test]
    fn the_helper_chowns_the_fd_it_is_sent() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: needs root (chown)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("f")).unwrap();
        let h = OutsideChown::spawn(4242).unwrap();
        h.chown(std::os::fd::AsFd::as_fd(&f)).unwrap();
        use std::os::unix::fs::MetadataExt;
        let m = f.metadata().unwrap();
        assert_eq!((m.uid(), m.gid()), (4242, 0));
    }
}
