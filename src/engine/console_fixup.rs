//! The console (`process.terminal`) as runc hands it over.
//!
//! libcontainer gap covered: libcontainer 0.7 sends the pty master as it made it:
//! with `ONLCR` set, so every `\n` the container writes arrives as `\r\n` (runc clears
//! it: `console.ClearONLCR` in its init), with the pty owned by 0 (runc's init chowns
//! it to the process's uid, keeping the group devpts gave it, `tty` with the default
//! spec's `gid=5`: `fixStdioPermissions`, measured with runc 1.1.5 here: `1000:5` for
//! `--user 1000:1000`), and without `process.consoleSize` applied (runc sets it).
//! siloc fixes the master it receives before relaying it. Delete this module when
//! libcontainer does all three.
//!
//! The owner is set from the host's user namespace, with the host uid the process's
//! uid maps to (`create`/`run`: siloc's own process; `exec`, whose siloc process joins
//! the container's user namespace before libcontainer builds the process
//! (engine::join_user_namespace): a helper forked before the join,
//! engine::console_owner). From inside that namespace the host uid is unmapped
//! (fchown: EINVAL, what `exec -t` into any user-namespaced container failed with),
//! and the container's own uid is refused too (EPERM: siloc's credentials there are
//! the host root's, unmapped).

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::sys::termios::{self, OutputFlags, SetArg};
use nix::unistd::Pid;
use oci_spec::runtime::Process;

/// What to do to a pty master: the slave's owner, and the size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsoleFix {
    /// The process's uid on the host: mapped through the container's uid_map. The
    /// group is left as devpts made it.
    pub uid: u32,
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
    mapped(map, id).unwrap_or(id)
}

/// `id` mapped by the lines of a uid_map/gid_map text, `None` when no line maps it.
pub fn mapped(map: &str, id: u32) -> Option<u32> {
    map.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().map(|x| x.parse::<u64>().ok());
            Some((f.next()??, f.next()??, f.next()??))
        })
        .find(|(inside, _, count)| (*inside..inside + count).contains(&u64::from(id)))
        .map(|(inside, outside, _)| (outside + u64::from(id) - inside) as u32)
}

/// The fix for process `p` of the container whose init is `init` (whose uid_map gives
/// the host uid). Called in the host's user namespace (`exec`: before the join).
pub fn for_process(p: &Process, init: Option<Pid>) -> ConsoleFix {
    let map = init
        .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/uid_map")).ok())
        .unwrap_or_default();
    ConsoleFix {
        uid: to_host(&map, p.user().uid()),
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

/// How long an `exec`'d process waits for siloc to chown its pty ([`wait_for_owner`]).
const OWNER_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// In an `exec`'d process, in its executor right before the program runs (and before
/// siloc's exec executor loads the spec's seccomp filter): when `process.terminal` is
/// set and stdin is a terminal not yet owned by the process's uid, waits until it is
/// (siloc chowns it with [`apply`] once libcontainer has built the process and sent
/// the master), at most [`OWNER_WAIT`]; siloc kills a process whose terminal it
/// could not fix. runc's init chowns before it execs the program, so the program's
/// first look (`stat /proc/self/fd/0`, `tty`, `mesg`) sees its own uid; without the
/// wait it could see 0.
pub fn wait_for_owner(spec: &oci_spec::runtime::Spec) {
    let Some(p) = spec.process() else { return };
    if p.terminal() != Some(true) {
        return;
    }
    if !nix::unistd::isatty(0).unwrap_or(false) {
        return;
    }
    let want = p.user().uid();
    let end = std::time::Instant::now() + OWNER_WAIT;
    while nix::sys::stat::fstat(0).is_ok_and(|st| st.st_uid != want)
        && std::time::Instant::now() < end
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Clears ONLCR on the pty of `master`, sets its size, and chowns its slave (opened
/// with TIOCGPTPEER, Linux 4.13) to `fix.uid`, its group unchanged (runc's rule):
/// the caller must be in the host's user namespace (engine::console_owner for `exec`).
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
        Some(nix::unistd::Uid::from_raw(fix.uid)),
        None,
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
        assert_eq!(mapped(m, 65546), None);
        assert_eq!(mapped(m, 65545), Some(5009));
    }
}
