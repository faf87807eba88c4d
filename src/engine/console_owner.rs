//! The pty of `exec -t` and `exec --console-socket`, received and fixed in the host's
//! user namespace.
//!
//! siloc's exec joins the container's user namespace before libcontainer builds the
//! process (engine::join_user_namespace). From inside it siloc cannot chown the pty
//! slave to the process's uid: the host uid is unmapped there (EINVAL), and the slave
//! libcontainer opened with siloc's credentials is owned by the host's root, unmapped
//! there too, so CAP_CHOWN in the namespace does not reach it (EPERM; measured on
//! kernel 6.18). And libcontainer's build returns only once the process has started
//! its program, which waits for its owner (console_fixup::wait_for_owner). runc chowns
//! from its init (`fixStdioPermissions`). siloc forks a helper before the join
//! ([`OutsideConsole::spawn`]): it stays in the host's user namespace, receives the
//! master on siloc's console socket while libcontainer builds, fixes it
//! (console_fixup::apply: ONLCR, size, the owner's host uid) and hands it to siloc
//! over a socketpair (SCM_RIGHTS). It does so for every `exec` with a terminal siloc
//! relays or proxies, with a user namespace or without: siloc's own process could
//! only fix the pty once the build has returned, after the program began waiting.

use std::os::fd::{AsFd, OwnedFd};

use super::console_fixup::{self, ConsoleFix, ConsoleFixError};
use crate::sys::fork::{self, Helper};

/// The helper, receiving and fixing one pty master; dropping it kills and reaps it.
pub struct OutsideConsole {
    helper: Helper,
}

impl OutsideConsole {
    /// Forks the helper: it gets the master from `receive` (siloc's console socket,
    /// inherited), applies `fix` and sends the master back. The caller must be
    /// single-threaded and still in the host's user namespace (sys::fork).
    ///
    /// Errors: [`ConsoleFixError::Sys`] (`socketpair`/`fork`).
    pub fn spawn(
        receive: impl FnOnce() -> Option<OwnedFd>,
        fix: ConsoleFix,
    ) -> Result<OutsideConsole, ConsoleFixError> {
        let helper = fork::spawn(move |sock| {
            let master = receive();
            let outcome = match &master {
                None => Err((1, nix::Error::ENOMSG)),
                Some(m) => match console_fixup::apply(m.as_fd(), &fix) {
                    Ok(()) => Ok(Some(m.as_fd())),
                    Err(ConsoleFixError::Sys { errno, .. }) => Err((0, errno)),
                },
            };
            i32::from(fork::report(sock, outcome).is_err())
        })
        .map_err(|errno| ConsoleFixError::Sys {
            step: "fork the pty helper",
            errno,
        })?;
        Ok(OutsideConsole { helper })
    }

    /// The fixed master, once the helper has it.
    ///
    /// Errors: [`ConsoleFixError::Sys`]: the helper's errno (`fix the pty`, or no
    /// master received), or the exchange with it.
    pub fn master(self) -> Result<OwnedFd, ConsoleFixError> {
        let sys = |step| move |errno| ConsoleFixError::Sys { step, errno };
        match fork::receive(self.helper.sock()).map_err(sys("pty helper"))? {
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(sys("pty helper")(nix::Error::EPROTO)),
            Err((0, errno)) => Err(sys("fix the pty (ONLCR, size, fchown)")(errno)),
            Err((_, errno)) => Err(sys("receive the pty master")(errno)),
        }
    }
}
