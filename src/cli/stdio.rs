//! Works around libcontainer 0.7 re-opening the container's stdio: when fd 0, 1 or 2
//! is /dev/null, its init replaces it with the container's /dev/null opened
//! read-only (`reopen_dev_null` uses `File::open`), so a container started with
//! stdout or stderr on /dev/null (containerd and scripts do that) gets EBADF on every
//! write. runc re-opens it read-write.
//!
//! siloc therefore hands the container /dev/zero (write-only) wherever siloc's own
//! stdout or stderr is /dev/null: writes to it are discarded exactly as by /dev/null,
//! and libcontainer leaves it alone. Stdin stays /dev/null (reads give EOF).

use std::os::fd::AsRawFd;

use nix::sys::stat::{SFlag, fstat, major, minor};

/// Swaps stdout and stderr from /dev/null to a write-only /dev/zero. Errors are
/// ignored: at worst the container sees libcontainer's read-only /dev/null.
pub(crate) fn keep_null_stdio_writable() {
    for fd in [1, 2] {
        let Ok(st) = fstat(fd) else { continue };
        let is_null = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFCHR
            && major(st.st_rdev) == 1
            && minor(st.st_rdev) == 3;
        if !is_null {
            continue;
        }
        if let Ok(zero) = std::fs::OpenOptions::new().write(true).open("/dev/zero") {
            let _ = nix::unistd::dup2(zero.as_raw_fd(), fd);
        }
    }
}
