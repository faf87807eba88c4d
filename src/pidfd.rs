//! Waiting for a process that is not our child (a container's init after `create`
//! has exited) through a pidfd (`pidfd_open(2)`, Linux 5.3+): the fd becomes
//! readable when the process exits.

use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::unistd::Pid;

/// Waits up to `timeout` for `pid` to exit. Returns true when it has exited (or never
/// existed), false on timeout or when pidfds are unavailable.
pub fn wait_exit(pid: Pid, timeout: Duration) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        return nix::errno::Errno::last() == nix::errno::Errno::ESRCH;
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
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
}
