//! A caller's `--console-socket` (containerd's shim, conmon): siloc stands between
//! libcontainer and the caller so that the pty master reaches the caller as runc
//! hands it over (engine::console_fixup: the slave owned by the process's uid,
//! ONLCR cleared, `process.consoleSize` applied).
//!
//! siloc connects to the caller's socket first (a missing socket fails before anything
//! is created, as with runc), gives libcontainer a socket of its own, receives the
//! master once libcontainer has made the process, fixes it, and sends it on with
//! SCM_RIGHTS and the payload libcontainer sent (runtime-spec "Console socket").
//! ONLCR and the size are also set inside the container before the process runs
//! (console_fixup::in_container); the owner is set here, and an `exec` process waits
//! for it before its program runs (console_fixup::wait_for_owner).

use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

use crate::cli::tty::{ConsoleSocket, TtyError};
use crate::engine::console_fixup::{self, ConsoleFix};
use crate::engine::console_owner::OutsideConsole;

/// How long libcontainer may take to send the master once the process exists.
const MASTER_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of the console proxy; each names the caller's socket.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyError {
    #[error("--console-socket {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--console-socket {path}: send the pty master: {errno}")]
    Send { path: PathBuf, errno: nix::Error },
    #[error(transparent)]
    Tty(#[from] TtyError),
    #[error(transparent)]
    Fix(#[from] console_fixup::ConsoleFixError),
}

/// The caller's connected socket and siloc's own listening one.
pub(crate) struct ConsoleProxy {
    caller: UnixStream,
    caller_path: PathBuf,
    own: ConsoleSocket,
}

impl ConsoleProxy {
    /// Connects to the caller's socket `caller` and binds siloc's own in the temp dir.
    ///
    /// Errors: [`ProxyError::Connect`] when the caller's socket takes no connection.
    pub(crate) fn connect(caller: &Path) -> Result<ConsoleProxy, ProxyError> {
        let stream = UnixStream::connect(caller).map_err(|source| ProxyError::Connect {
            path: caller.to_path_buf(),
            source,
        })?;
        Ok(ConsoleProxy {
            caller: stream,
            caller_path: caller.to_path_buf(),
            own: ConsoleSocket::bind(&std::env::temp_dir())?,
        })
    }

    /// The socket to give libcontainer.
    pub(crate) fn path(&self) -> &Path {
        self.own.path()
    }

    /// siloc's own socket, which libcontainer sends the master to.
    pub(crate) fn socket(&self) -> &ConsoleSocket {
        &self.own
    }

    /// Receives the master libcontainer sent, applies `fix`, and sends it to the
    /// caller; or takes it from `outside`, which received and fixed it (`exec` in a
    /// user namespace, engine::console_owner).
    ///
    /// Errors: no master within the timeout, the fix failed, or the send failed.
    pub(crate) fn forward(
        self,
        fix: &ConsoleFix,
        outside: Option<OutsideConsole>,
    ) -> Result<(), ProxyError> {
        let master: OwnedFd = match outside {
            Some(o) => o.master()?,
            None => {
                let m = self.own.receive_master(MASTER_TIMEOUT)?;
                console_fixup::apply(std::os::fd::AsFd::as_fd(&m), fix)?;
                m
            }
        };
        // libcontainer names the master /dev/ptmx; runc's clients read only the fd.
        let name = b"/dev/ptmx";
        let fds = [master.as_raw_fd()];
        sendmsg::<()>(
            self.caller.as_raw_fd(),
            &[IoSlice::new(name)],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .map_err(|errno| ProxyError::Send {
            path: self.caller_path.clone(),
            errno,
        })?;
        Ok(())
    }
}

/// For `create`/`run`: when the bundle's process wants a terminal and the caller gave
/// a console socket, puts a proxy in its place in `req`.
pub(crate) fn for_create(
    req: &mut crate::lifecycle::CreateRequest,
) -> Result<Option<ConsoleProxy>, ProxyError> {
    let Some(caller) = req.init.console_socket.clone() else {
        return Ok(None);
    };
    if !crate::lifecycle::bundle::wants_terminal(&req.bundle) {
        return Ok(None);
    }
    let proxy = ConsoleProxy::connect(&caller)?;
    req.init.console_socket = Some(proxy.path().to_path_buf());
    Ok(Some(proxy))
}

/// After `create`: forwards the fixed master to the caller (the fix for the bundle's
/// process, through the user namespace of init `pid`).
pub(crate) fn finish_create(
    proxy: Option<ConsoleProxy>,
    bundle: &Path,
    pid: Option<nix::unistd::Pid>,
) -> Result<(), ProxyError> {
    let Some(proxy) = proxy else { return Ok(()) };
    let fix = crate::lifecycle::bundle::load(bundle)
        .ok()
        .and_then(|s| s.process().clone())
        .map(|p| console_fixup::for_process(&p, pid))
        .unwrap_or_default();
    proxy.forward(&fix, None)
}
