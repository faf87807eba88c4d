//! systemd socket activation (`LISTEN_FDS`, sd_listen_fds(3)) as runc honours it.
//!
//! libcontainer 0.7's init passes fds 3..3+LISTEN_FDS into the container whenever
//! `LISTEN_FDS` is in siloc's environment, for `exec` too, and sets `LISTEN_PID=1`
//! there. runc takes the fds only for `create` and `run`, and only when `LISTEN_PID`
//! names runc's own process (go-systemd's `activation.Files`): a `LISTEN_FDS` left in
//! a shell's environment, or meant for another process, passes nothing. So siloc
//! removes the variables from its environment when they are not for it, before
//! libcontainer reads them; the fds then stay out of the container (libcontainer marks
//! every fd past stdio and `--preserve-fds` close-on-exec).

/// Whether the `LISTEN_*` variables are for this `command` of process `pid`: only
/// `create` and `run`, with `LISTEN_PID` equal to `pid`.
pub(crate) fn are_for_us(command_takes_them: bool, listen_pid: Option<&str>, pid: u32) -> bool {
    command_takes_them && listen_pid.and_then(|p| p.trim().parse::<u32>().ok()) == Some(pid)
}

/// Removes `LISTEN_FDS`, `LISTEN_PID` and `LISTEN_FDNAMES` from the environment unless
/// [`are_for_us`]. Must run while siloc is single-threaded (it changes the
/// environment), before any container process is made.
pub(crate) fn keep_only_ours(command_takes_them: bool) {
    if std::env::var_os("LISTEN_FDS").is_none() {
        return;
    }
    let listen_pid = std::env::var("LISTEN_PID").ok();
    if are_for_us(
        command_takes_them,
        listen_pid.as_deref(),
        std::process::id(),
    ) {
        return;
    }
    for var in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
        // SAFETY: called from main before any thread is started (see the doc), so no
        // other thread reads the environment meanwhile.
        unsafe { std::env::remove_var(var) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_create_and_run_of_the_named_pid() {
        assert!(are_for_us(true, Some("42"), 42));
        assert!(!are_for_us(true, Some("43"), 42));
        assert!(!are_for_us(true, None, 42));
        assert!(!are_for_us(false, Some("42"), 42));
        assert!(!are_for_us(true, Some("x"), 42));
    }
}
