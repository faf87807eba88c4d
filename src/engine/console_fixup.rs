//! The console (`process.terminal`) as runc hands it over.
//!
//! libcontainer gap covered: libcontainer 0.7 sends the pty master as it made it:
//! with `ONLCR` set, so every `\n` the container writes arrives as `\r\n` (runc clears
//! it: `console.ClearONLCR` in its init), with the pty owned by 0:0 (runc chowns it to
//! the process's uid/gid), and without `process.consoleSize` applied (runc sets it).
//! siloc fixes the master it receives before relaying it. Delete this module when
//! libcontainer does all three.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::sys::termios::{self, OutputFlags, SetArg};
use nix::unistd::Pid;
use oci_spec::runtime::Process;

/// What to do to a pty master: the slave's owner in host IDs, and the size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsoleFix {
    /// (uid, gid) on the host: the process's, mapped through the container's user
    /// namespace.
    pub owner: (u32, u32),
    /// (rows, columns) from `process.consoleSize`, if given.
    pub size: Option<(u16, u16)>,
}

/// Errors while fixing the console; each names the step.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleFixError {
    #[error("console: {step}: {errno}")]
    Sys {
        step: &'static str,
        errno: nix::Error,
    },
}

/// `id` (in the user namespace of a map file's owner) mapped to the host by the lines
/// of a uid_map/gid_map text (user_namespaces(7): `inside outside count`); `id` itself
/// when no line maps it (no user namespace: the identity).
pub fn to_host(map: &str, id: u32) -> u32 {
    map.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().map(|x| x.parse::<u64>().ok());
            Some((f.next()??, f.next()??, f.next()??))
        })
        .find(|(inside, _, count)| (*inside..inside + count).contains(&u64::from(id)))
        .map_or(id, |(inside, outside, _)| {
            (outside + u64::from(id) - inside) as u32
        })
}

/// The fix for process `p` of the container whose init is `init` (whose uid_map and
/// gid_map give the host IDs).
pub fn for_process(p: &Process, init: Option<Pid>) -> ConsoleFix {
    let read = |f: &str| {
        init.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/{f}")).ok())
            .unwrap_or_default()
    };
    let user = p.user();
    ConsoleFix {
        owner: (
            to_host(&read("uid_map"), user.uid()),
            to_host(&read("gid_map"), user.gid()),
        ),
        size: p
            .console_size()
            .as_ref()
            .map(|b| (b.height() as u16, b.width() as u16)),
    }
}

/// Inside the container, in libcontainer's executor (after its console setup made
/// the pty slave stdin, before the process runs, for the init and for `exec`): when
/// `process.terminal` is set and stdin is a terminal, clears ONLCR and applies
/// `process.consoleSize` to a pty whose size is still 0x0 (a size set since, by a
/// relay copying a real terminal's, wins). This is what makes the very first line
/// of an `exec -t` come as `text\n`, and works for a caller's `--console-socket` too.
/// Skipped when the spec's seccomp filter could kill, trap or notify on `ioctl` (the
/// filter is already in force here). Errors are ignored: the process runs as before.
pub fn in_container(spec: &oci_spec::runtime::Spec) {
    let Some(p) = spec.process() else { return };
    if p.terminal() != Some(true) || !super::procname::call_is_safe(spec, "ioctl") {
        return;
    }
    // SAFETY: fd 0 stays open for the whole call; borrowing it makes no claim on it.
    let stdin = unsafe { BorrowedFd::borrow_raw(0) };
    let Ok(mut t) = termios::tcgetattr(stdin) else {
        return;
    };
    if t.output_flags.contains(OutputFlags::ONLCR) {
        t.output_flags.remove(OutputFlags::ONLCR);
        let _ = termios::tcsetattr(stdin, SetArg::TCSANOW, &t);
    }
    if let Some(b) = p.console_size() {
        let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
        // SAFETY: TIOCGWINSZ/TIOCSWINSZ take a winsize that lives across the calls.
        unsafe {
            if libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_row == 0 && ws.ws_col == 0 {
                ws.ws_row = b.height() as u16;
                ws.ws_col = b.width() as u16;
                libc::ioctl(0, libc::TIOCSWINSZ, &ws);
            }
        }
    }
}

/// Clears ONLCR on the pty of `master`, sets its size, and chowns its slave (opened
/// with TIOCGPTPEER, Linux 4.13).
///
/// Errors: [`ConsoleFixError::Sys`] naming the step.
pub fn apply(master: BorrowedFd<'_>, fix: &ConsoleFix) -> Result<(), ConsoleFixError> {
    let sys = |step| move |errno| ConsoleFixError::Sys { step, errno };
    let mut t = termios::tcgetattr(master).map_err(sys("tcgetattr"))?;
    t.output_flags.remove(OutputFlags::ONLCR);
    termios::tcsetattr(master, SetArg::TCSANOW, &t).map_err(sys("tcsetattr"))?;
    if let Some((rows, cols)) = fix.size {
        let ws = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize, which lives across the call.
        if unsafe { libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws) } != 0 {
            return Err(sys("TIOCSWINSZ")(nix::Error::last()));
        }
    }
    // SAFETY: TIOCGPTPEER takes open flags and returns a new fd we then own.
    let peer = unsafe {
        libc::ioctl(
            master.as_raw_fd(),
            libc::TIOCGPTPEER,
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    };
    if peer < 0 {
        return Err(sys("TIOCGPTPEER")(nix::Error::last()));
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    let slave = unsafe { OwnedFd::from_raw_fd(peer) };
    nix::unistd::fchown(
        slave.as_raw_fd(),
        Some(nix::unistd::Uid::from_raw(fix.owner.0)),
        Some(nix::unistd::Gid::from_raw(fix.owner.1)),
    )
    .map_err(sys("fchown pty"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_through_the_lines_that_hold_them() {
        let m = "         0     100000      65536\n     65536       5000         10\n";
        assert_eq!(to_host(m, 0), 100000);
        assert_eq!(to_host(m, 1000), 101000);
        assert_eq!(to_host(m, 65537), 5001);
        assert_eq!(to_host("", 1000), 1000);
    }
}
