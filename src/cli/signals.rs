//! Signal names as `kill` takes them, and forwarding for foreground `run`/`exec`.
//!
//! Names follow runc: `KILL`, `SIGKILL`, `kill` and `9` are the same signal.
//! Forwarding: handlers installed before the container exists write the signal number
//! to a pipe; once the container's pid is known the waiting thread sends each one on,
//! so a signal that arrives during `create` is delivered after `start` rather than
//! lost. No thread of its own: starting and stopping one per `run` cost more than the
//! poll loop (its stack's unmap is a TLB-flush IPI to every other CPU).

use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, kill, sigaction};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::{Pid, pipe2};

/// A signal the user named that does not exist.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown signal {0:?}")]
pub(crate) struct BadSignal(pub String);

/// Parses `KILL`, `SIGKILL`, `kill`, `9`, `RTMIN+3`. Errors: [`BadSignal`].
pub(crate) fn parse(text: &str) -> Result<i32, BadSignal> {
    let bad = || BadSignal(text.to_string());
    let t = text.trim();
    if let Ok(n) = t.parse::<i32>() {
        return if (1..=libc::SIGRTMAX()).contains(&n) {
            Ok(n)
        } else {
            Err(bad())
        };
    }
    let up = t.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    if let Some(rest) = name.strip_prefix("RTMIN") {
        let off: i32 = match rest {
            "" => 0,
            r => r
                .strip_prefix('+')
                .and_then(|r| r.parse().ok())
                .ok_or_else(bad)?,
        };
        let n = libc::SIGRTMIN() + off;
        return if n <= libc::SIGRTMAX() {
            Ok(n)
        } else {
            Err(bad())
        };
    }
    let full = format!("SIG{name}");
    full.parse::<Signal>().map(|s| s as i32).map_err(|_| bad())
}

/// Signals a foreground `run`/`exec` passes on to the container process. SIGCHLD is
/// siloc's own; SIGWINCH resizes the pty instead; SIGPIPE is ignored so a closed
/// output never kills siloc before it reports the exit status.
const FORWARDED: &[Signal] = &[
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
    Signal::SIGTERM,
    Signal::SIGCONT,
    Signal::SIGTSTP,
    Signal::SIGTTIN,
    Signal::SIGTTOU,
    Signal::SIGPWR,
    Signal::SIGWINCH,
];

static PIPE_W: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_W.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the byte lives on this stack frame.
        unsafe { libc::write(fd, &b as *const u8 as *const libc::c_void, 1) };
    }
}

/// Handlers installed, signals queued in a pipe until
/// [`SignalQueue::forward_until_exit`].
pub(crate) struct SignalQueue {
    read: OwnedFd,
}

/// Installs the handlers. Errors: pipe or sigaction failure.
pub(crate) fn install() -> nix::Result<SignalQueue> {
    let (read, write) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    // The write end lives as long as the process: a handler may run at any time, and
    // a closed (or reused) fd number there would be worse than one fd kept open.
    PIPE_W.store(write.into_raw_fd(), Ordering::Relaxed);
    let act = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for s in FORWARDED {
        // SAFETY: the handler only calls write(2) on a pipe, which is signal-safe.
        unsafe { sigaction(*s, &act)? };
    }
    let ign = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // SAFETY: ignoring a signal installs no code.
    unsafe { sigaction(Signal::SIGPIPE, &ign)? };
    Ok(SignalQueue { read })
}

/// How often the exit is checked where pidfds are missing (Linux < 5.3).
const NO_PIDFD_TICK_MS: u16 = 10;

impl SignalQueue {
    /// Sends every queued and future signal to `pid` (SIGWINCH resizes `pty` instead)
    /// until `pid`, a child of this process, has exited. Returns without reaping it,
    /// so no forwarded signal can reach a recycled pid; signals arriving later are
    /// dropped. The exit is seen through a pidfd (pidfd_open(2)), else by
    /// waitid(WNOHANG|WNOWAIT) every [`NO_PIDFD_TICK_MS`].
    pub(crate) fn forward_until_exit(self, pid: Pid, pty: Option<i32>) {
        let pidfd = crate::sys::pidfd::open(pid).ok();
        let tick = match pidfd {
            Some(_) => PollTimeout::NONE,
            None => PollTimeout::from(NO_PIDFD_TICK_MS),
        };
        loop {
            self.drain(pid, pty);
            let mut pfd = vec![PollFd::new(self.read.as_fd(), PollFlags::POLLIN)];
            pfd.extend(
                pidfd
                    .as_ref()
                    .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN)),
            );
            // EINTR: a handler ran, its byte is in the pipe.
            let _ = poll(&mut pfd, tick);
            let exited = match pfd.get(1) {
                Some(p) => p.revents().is_some_and(|r| !r.is_empty()),
                None => has_exited(pid),
            };
            if exited {
                return;
            }
        }
    }

    /// Sends on every signal queued so far.
    fn drain(&self, pid: Pid, pty: Option<i32>) {
        let mut buf = [0u8; 64];
        while let Ok(n @ 1..) = nix::unistd::read(self.read.as_raw_fd(), &mut buf) {
            for sig in buf[..n]
                .iter()
                .filter_map(|&b| Signal::try_from(b as i32).ok())
            {
                match (sig, pty) {
                    (Signal::SIGWINCH, Some(m)) => crate::cli::tty::copy_window_size(m),
                    (Signal::SIGWINCH, None) => {}
                    _ => {
                        let _ = kill(pid, sig);
                    }
                }
            }
        }
    }
}

/// Whether child `pid` has exited, leaving it unreaped; an error (no such child)
/// counts as exited, so the caller's wait never spins.
fn has_exited(pid: Pid) -> bool {
    !matches!(
        waitid(
            Id::Pid(pid),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT,
        ),
        Ok(WaitStatus::StillAlive)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_prefixes() {
        assert_eq!(parse("KILL"), Ok(9));
        assert_eq!(parse("SIGKILL"), Ok(9));
        assert_eq!(parse("kill"), Ok(9));
        assert_eq!(parse("9"), Ok(9));
        assert_eq!(parse("term"), Ok(15));
        assert_eq!(parse("SIGUSR1"), Ok(10));
        assert_eq!(parse("RTMIN+2"), Ok(libc::SIGRTMIN() + 2));
        for bad in ["FOO", "SIGFOO", "0", "-1", "999", "", "RTMIN+99"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
