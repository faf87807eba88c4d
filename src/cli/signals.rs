//! Signal names as `kill` takes them, and forwarding for foreground `run`/`exec`.
//!
//! Names follow runc: `KILL`, `SIGKILL`, `kill` and `9` are the same signal.
//! Forwarding: handlers installed before the container exists write the signal number
//! to a pipe; once the container's pid is known a thread sends each one on, so a
//! signal that arrives during `create` is delivered after `start` rather than lost.

use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread::JoinHandle;

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, kill, sigaction};
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

/// Handlers installed, signals queued in a pipe until [`SignalQueue::forward_to`].
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

/// The forwarding thread; stop it before reaping the process it signals.
pub(crate) struct Forwarder {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl SignalQueue {
    /// Sends every queued and future signal to `pid`; SIGWINCH resizes `pty` instead.
    pub(crate) fn forward_to(self, pid: Pid, pty: Option<i32>) -> Forwarder {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let read = self.read;
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while !flag.load(Ordering::Relaxed) {
                let mut pfd = [PollFd::new(read.as_fd(), PollFlags::POLLIN)];
                if poll(&mut pfd, PollTimeout::NONE).is_err() {
                    continue;
                }
                let Ok(n) = nix::unistd::read(read.as_raw_fd(), &mut buf) else {
                    continue;
                };
                for &b in &buf[..n] {
                    if flag.load(Ordering::Relaxed) {
                        return;
                    }
                    // Byte 0 is the stop request, not a signal.
                    let Ok(sig) = Signal::try_from(b as i32) else {
                        continue;
                    };
                    match (sig, pty) {
                        (Signal::SIGWINCH, Some(m)) => crate::cli::tty::copy_window_size(m),
                        (Signal::SIGWINCH, None) => {}
                        _ => {
                            let _ = kill(pid, sig);
                        }
                    }
                }
            }
        });
        Forwarder { stop, thread }
    }
}

impl Forwarder {
    /// Stops forwarding at once (the thread is woken through the pipe) and waits for it.
    /// Signals arriving later are dropped.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        on_signal(0);
        let _ = self.thread.join();
    }
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
