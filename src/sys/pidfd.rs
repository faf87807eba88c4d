//! Waiting for a process that is not our child (a container's init after `create`
//! has exited) through a pidfd (`pidfd_open(2)`, Linux 5.3+): the fd becomes
//! readable when the process exits.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::unistd::Pid;

/// Waits up to `timeout` for `pid` to exit. Returns true when it has exited (or never
/// existed), false on timeout or when pidfds are unavailable.
pub(crate) fn wait_exit(pid: Pid, timeout: Duration) -> bool {
    match open(pid) {
        Ok(fd) => wait_fd(&fd, timeout),
        Err(e) => e == nix::errno::Errno::ESRCH,
    }
}

/// Whether `pid` is on its way out: SIGKILL pending (kill(2) returns before the
/// target is torn down) or PF_EXITING set (in do_exit(), which drops its mount
/// namespace: an overlay rootfs's unmount syncs the upper dir). Read from
/// /proc/PID/stat (flags) and /proc/PID/status (SigPnd, ShdPnd); false when
/// neither can be read.
pub(crate) fn dying(pid: Pid) -> bool {
    const PF_EXITING: u32 = 0x4;
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    let Ok(p) = procfs::process::Process::new(pid.as_raw()) else {
        return false;
    };
    p.stat().is_ok_and(|s| s.flags & PF_EXITING != 0)
        || p.status()
            .is_ok_and(|s| (s.sigpnd | s.shdpnd) & SIGKILL_BIT != 0)
}

/// Sends SIGKILL to `pid` and waits up to `timeout` for it to exit, both through one
/// pidfd, so a pid reused in between is never signalled (pidfd_send_signal(2), 5.1+).
/// Returns true when it has exited (or never existed).
pub(crate) fn kill_and_wait(pid: Pid, timeout: Duration) -> bool {
    let fd = match open(pid) {
        Ok(fd) => fd,
        Err(e) => return e == nix::errno::Errno::ESRCH,
    };
    // SAFETY: pidfd_send_signal takes our pidfd, a signal number, a null siginfo and
    // zero flags; it reads no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 && nix::errno::Errno::last() != nix::errno::Errno::ESRCH {
        return false;
    }
    wait_fd(&fd, timeout)
}

/// A pidfd for `pid` (pidfd_open(2), Linux 5.3+): readable once the process has
/// exited (a zombie too).
pub(crate) fn open(pid: Pid) -> Result<OwnedFd, nix::errno::Errno> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        return Err(nix::errno::Errno::last());
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Polls pidfd `fd` until the process exits or `timeout` passes.
fn wait_fd(fd: &OwnedFd, timeout: Duration) -> bool {
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let mut pfd = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    loop {
        match poll(
            &mut pfd,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(n) => return n > 0,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_a_process_to_exit() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.1")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        // A child stays a zombie until reaped, but its pidfd reports the exit.
        assert!(wait_exit(pid, Duration::from_secs(5)));
        child.wait().unwrap();
        let mut long = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        assert!(!wait_exit(
            Pid::from_raw(long.id() as i32),
            Duration::from_millis(50)
        ));
        long.kill().unwrap();
        long.wait().unwrap();
    }

    #[test]
    fn kills_and_waits() {
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        let start = std::time::Instant::now();
        assert!(kill_and_wait(pid, Duration::from_secs(5)));
        let status = child.wait().unwrap();
        assert!(start.elapsed() < Duration::from_secs(5));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }
}
