//! Foreground `run` and `exec`: forward signals, relay the terminal, and return the
//! process's exit status the moment it exits (128+N when killed by signal N, as runc).
//!
//! The container process is siloc's own child (libcontainer clones it with
//! CLONE_PARENT), so siloc waits for exactly that pid: no SIGCHLD race can lose the
//! exit. Signals are forwarded until the process has exited, and only then is it
//! reaped, so a forwarded signal can never reach a recycled pid.

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::cli::signals;
use crate::cli::tty::{ConsoleSocket, Relay};
use crate::lifecycle::{self, CreateRequest, Runtime};

/// How long the container may take to send its pty master once `create` returned.
const MASTER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long output may keep draining after the process exited.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// A terminal siloc relays itself, when the caller gave no console socket.
pub(crate) struct OwnTerminal {
    socket: ConsoleSocket,
}

impl OwnTerminal {
    /// Binds a console socket in the temp dir when `terminal` is wanted.
    pub(crate) fn maybe(terminal: bool) -> anyhow::Result<Option<OwnTerminal>> {
        if !terminal {
            return Ok(None);
        }
        Ok(Some(OwnTerminal {
            socket: ConsoleSocket::bind(&std::env::temp_dir())?,
        }))
    }

    pub(crate) fn path(&self) -> &Path {
        self.socket.path()
    }

    /// The socket the container sends the master to.
    pub(crate) fn socket(&self) -> &ConsoleSocket {
        &self.socket
    }

    /// Receives the master, fixes it as runc hands it over (console_fixup), and
    /// starts relaying; or takes it from `outside`, which received and fixed it
    /// (`exec` in a user namespace, engine::console_owner).
    pub(crate) fn relay(
        self,
        fix: &crate::engine::console_fixup::ConsoleFix,
        outside: Option<crate::engine::console_owner::OutsideConsole>,
    ) -> anyhow::Result<Relay> {
        let master = match outside {
            Some(o) => o.master()?,
            None => {
                let m = self.socket.receive_master(MASTER_TIMEOUT)?;
                crate::engine::console_fixup::apply(std::os::fd::AsFd::as_fd(&m), fix)?;
                m
            }
        };
        Ok(Relay::start(master)?)
    }
}

/// Forwards `queue`'s signals to child `pid` (SIGWINCH resizes `pty`) until it
/// exits, reaps it, and returns runc's exit status: its code, 128+N when killed by
/// signal N, 255 when it cannot be reaped.
pub(crate) fn wait_exit(pid: Pid, queue: signals::SignalQueue, pty: Option<i32>) -> i32 {
    queue.forward_until_exit(pid, pty);
    loop {
        return match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => code,
            Ok(WaitStatus::Signaled(_, sig, _)) => 128 + sig as i32,
            Err(nix::errno::Errno::EINTR) => continue,
            _ => 255,
        };
    }
}

/// Foreground `run`: create, start, wait, delete (unless `keep`).
pub(crate) fn run(
    rt: &Runtime,
    mut req: CreateRequest,
    pidfd_socket: Option<&Path>,
    keep: bool,
) -> anyhow::Result<i32> {
    let queue = signals::install()?;
    let own = if req.init.console_socket.is_none() {
        OwnTerminal::maybe(crate::lifecycle::bundle::wants_terminal(&req.bundle))?
    } else {
        None
    };
    if let Some(t) = &own {
        req.init.console_socket = Some(t.path().to_path_buf());
        req.init.detach = true;
    }
    // A caller's console socket goes through siloc's proxy (console_proxy).
    let mut c = super::create::create_for_caller(rt, &mut req, pidfd_socket, own.is_none())?;
    let result = (|| {
        let pid = c
            .pid()
            .ok_or_else(|| anyhow::anyhow!("container has no init pid"))?;
        // The console fix needs the spec's process: read only when siloc relays a
        // terminal (a `run` without one reads config.json in full once, in create).
        let relay = own
            .map(|t| {
                let fix = crate::lifecycle::bundle::load(&req.bundle)
                    .ok()
                    .and_then(|s| s.process().clone())
                    .map(|p| crate::engine::console_fixup::for_process(&p, Some(pid)))
                    .unwrap_or_default();
                t.relay(&fix, None)
            })
            .transpose()?;
        crate::cli::state::start_created(&rt.root, &mut c)?;
        let code = wait_exit(pid, queue, relay.as_ref().map(|r| r.master().as_raw_fd()));
        if let Some(r) = relay {
            r.finish(DRAIN_TIMEOUT);
        }
        Ok(code)
    })();
    if (!keep || result.is_err())
        && let Err(e) = lifecycle::delete(rt, &req.id, true)
    {
        tracing::warn!(target: "siloc", "delete {}: {}", req.id, super::errmsg::chain(&e));
    }
    result
}
