//! The cause libcontainer's init process logs but does not report.
//!
//! libcontainer 0.7's init sends its caller only the top of its error
//! (`e.to_string()` over its channel: "failed to prepare rootfs", "failed to set
//! sysctl", "open subpath in procfs failed"); the cause (which mount, which errno,
//! which sysctl) it logs at error level just before, in the init process, where
//! siloc's log layer runs too (the process is a clone of siloc's). runc reports the
//! whole chain: `error mounting "foo" to rootfs at "/x": mount foo:/x: no such device`.
//!
//! So while libcontainer builds a container, siloc holds a pipe ([`Catcher::arm`]): the
//! log layer hands libcontainer's error events ([`wants`], [`note`]), and the debug
//! event that names the sysctl being written, to [`note`], which writes each as one
//! line (no blocking: a full pipe drops the line; the write end is close-on-exec, so
//! the container's process never holds it). After a failed build the caller reads
//! them ([`Catcher::take`]) and [`cause`] words the recognised ones as runc does:
//!
//! - a mount: `error mounting "SRC" to rootfs at "DEST": mount SRC:DEST: ERRNO`, or
//!   `mkdir PATH: ERRNO` when its destination could not be made (runc's
//!   mountToRootfs; runc also says `(via /proc/self/fd/N)` after the mount, an fd of
//!   its own that siloc has no equivalent of);
//! - a sysctl: `write /proc/sys/KEY: ERRNO` (runc's writeSystemProperty), and `open
//!   /proc/sys/KEY: ...` for one the container's kernel does not have (libcontainer
//!   logs no errno for that: its words follow);
//! - a device path: `linux.devices: "foo" is not a valid device path starting with
//!   /dev` (runc takes such paths below the rootfs; libcontainer refuses them).
//!
//! Anything else keeps libcontainer's text. Delete this module when libcontainer
//! reports its init's error chain.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

/// The write end of the armed pipe, -1 when none (a process-wide setting: the log
/// layer has no other way to reach it, and the init inherits it as a clone).
static SINK: AtomicI32 = AtomicI32::new(-1);

/// The libcontainer module whose debug events name the sysctl being written.
const INIT_TARGET: &str = "libcontainer::process::init::process";
/// libcontainer's debug message before it writes a sysctl (process/init/process.rs).
const SYSCTL_STEP: &str = "apply value ";

/// The read end of an armed pipe; disarms when dropped.
pub struct Catcher {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

impl Catcher {
    /// Arms the pipe for the libcontainer calls that follow; `None` when no pipe can
    /// be made (the causes are then not caught, nothing else changes).
    pub fn arm() -> Option<Catcher> {
        let flags = nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK;
        let (read, write) = nix::unistd::pipe2(flags).ok()?;
        SINK.store(write.as_raw_fd(), Ordering::SeqCst);
        Some(Catcher {
            read,
            write: Some(write),
        })
    }

    /// Disarms and returns the lines noted so far (the children that noted them have
    /// exited or hold only their own copy of the write end).
    pub fn take(mut self) -> Vec<String> {
        SINK.store(-1, Ordering::SeqCst);
        self.write = None;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = nix::unistd::read(self.read.as_raw_fd(), &mut chunk) {
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8_lossy(&buf)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Catcher {
    fn drop(&mut self) {
        SINK.store(-1, Ordering::SeqCst);
    }
}

/// Whether events of `target` at `level` may be wanted by [`note`] (libcontainer's
/// errors and its init's debug steps), armed or not: for the log layer's per-callsite
/// interest.
pub fn may_want(target: &str, level: tracing::Level) -> bool {
    target.starts_with("libcontainer")
        && (level == tracing::Level::ERROR
            || (level == tracing::Level::DEBUG && target == INIT_TARGET))
}

/// Whether the log layer should hand an event of `target` at `level` to [`note`]:
/// [`may_want`], and only while armed.
pub fn wants(target: &str, level: tracing::Level) -> bool {
    SINK.load(Ordering::Relaxed) >= 0 && may_want(target, level)
}

/// Writes one event (`msg`, then its other fields as ` name=value`) as a line to the
/// armed pipe; debug events only when they name a sysctl. Never blocks.
pub fn note(level: tracing::Level, msg: &str, fields: &[(String, String)]) {
    let fd = SINK.load(Ordering::Relaxed);
    if fd < 0 || (level != tracing::Level::ERROR && !msg.starts_with(SYSCTL_STEP)) {
        return;
    }
    let mut line = msg.replace('\n', " ");
    for (k, v) in fields {
        line.push_str(&format!(" {k}={}", v.replace('\n', " ")));
    }
    line.push('\n');
    // SAFETY: `fd` is the armed pipe's write end, open while SINK holds it (the
    // Catcher disarms before it closes it); a child's copy stays open until it exits.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let _ = nix::unistd::write(fd, line.as_bytes());
}

/// The caught lines' cause in runc's words (module doc), `None` when none is
/// recognised.
pub fn cause(lines: &[String]) -> Option<String> {
    for (i, l) in lines.iter().enumerate() {
        if let Some(rest) = l.strip_prefix("failed to mount Mount {") {
            return Some(mount_cause(rest, lines.get(i + 1..).unwrap_or_default()));
        }
        if let Some(rest) = l.strip_prefix("failed to set sysctl ")
            && let Some((key, _)) = rest.split_once('=')
        {
            return Some(format!(
                "write /proc/sys/{}: {}",
                key.replace('.', "/"),
                errno_of(rest).unwrap_or_else(|| rest.to_string())
            ));
        }
        if l.contains(" is not a valid device path starting with /dev") {
            return Some(format!("linux.devices: {l}"));
        }
        if let Some(why) = l.strip_prefix("failed to initialize container process: ")
            && why.starts_with("open subpath in procfs")
            && let Some(step) = lines[..i].iter().rev().find(|s| s.starts_with(SYSCTL_STEP))
            && let Some(key) = step
                .rsplit_once(" to kernel parameter ")
                .map(|(_, k)| k.trim_end_matches('.'))
        {
            return Some(format!("open /proc/sys/{}: {why}", key.replace('.', "/")));
        }
    }
    None
}

/// `error mounting "SRC" to rootfs at "DEST": ...` from libcontainer's `failed to mount
/// Mount { ... }: REASON` (`rest` after the brace) and the lines after it (its
/// `failed to prepare rootfs err=...` carries the errno).
fn mount_cause(rest: &str, after: &[String]) -> String {
    let dest = debug_str_after(rest, "destination: ").unwrap_or_default();
    let src = debug_str_after(rest, "source: Some(").unwrap_or_default();
    let reason = rest.rsplit_once("}: ").map_or("", |(_, r)| r);
    let detail = after
        .iter()
        .find(|l| l.starts_with("failed to prepare rootfs"))
        .map_or("", |l| l.as_str());
    let errno = errno_of(detail);
    let what = if let Some(at) = detail.find("Mkdirat { dirfd: FrozenFd(") {
        let m = &detail[at..];
        match (debug_str_after(m, "Some("), debug_str_after(m, "path: ")) {
            (Some(dir), Some(name)) => format!("mkdir {dir}/{name}"),
            _ => reason.to_string(),
        }
    } else if reason == "syscall" {
        format!("mount {src}:{dest}")
    } else {
        reason.to_string()
    };
    match errno {
        Some(e) => format!("error mounting {src:?} to rootfs at {dest:?}: {what}: {e}"),
        None => format!("error mounting {src:?} to rootfs at {dest:?}: {what}"),
    }
}

/// The errno a logged error names, in Go's words: `Nix(ENODEV)`, `code: 30`, or Rust's
/// `(os error 22)`.
fn errno_of(text: &str) -> Option<String> {
    let n = if let Some(at) = text.find("Nix(E") {
        let name: String = text[at + 4..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        (1..4096).find(|&n| format!("{:?}", nix::Error::from_raw(n)) == name)?
    } else if let Some(at) = text.find("code: ").or_else(|| text.find("(os error ")) {
        let digits: String = text[at..]
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(|c| c.is_ascii_digit())
            .collect();
        digits.parse().ok()?
    } else {
        return None;
    };
    Some(crate::sys::errno::go_text(nix::Error::from_raw(n)))
}

/// The Rust `Debug` string literal right after `key` in `text`, unescaped (`\"`,
/// `\\`; other escapes kept as written).
fn debug_str_after(text: &str, key: &str) -> Option<String> {
    let at = text.find(key)? + key.len();
    let mut chars = text[at..].strip_prefix('"')?.chars();
    let mut out = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                e @ ('"' | '\\') => out.push(e),
                e => {
                    out.push('\\');
                    out.push(e);
                }
            },
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn unknown_filesystem_type() {
        let l = lines(&[
            "failed to mount Mount { destination: \"/x\", typ: Some(\"foofs\"), source: \
             Some(\"foo\"), options: None, uid_mappings: None, gid_mappings: None }: syscall",
            "failed to prepare rootfs err=Mount(Syscall(Nix(ENODEV)))",
            "failed to initialize container process: failed to prepare rootfs",
        ]);
        assert_eq!(
            cause(&l).unwrap(),
            "error mounting \"foo\" to rootfs at \"/x\": mount foo:/x: no such device"
        );
    }

    #[test]
    fn destination_that_cannot_be_made() {
        let l = lines(&[
            "failed to mount Mount { destination: \"/sys/x\", typ: Some(\"bind\"), source: \
             Some(\"/tmp\"), options: Some([\"rbind\"]), uid_mappings: None, gid_mappings: \
             None }: create next directory component failed",
            "failed to prepare rootfs err=Mount(Pathrs(Error(RawOsError { operation: \"create \
             next directory component\", source: Mkdirat { dirfd: FrozenFd(16, \
             Some(\"/b/rootfs/sys\")), path: \"x\", mode: 493, source: Os { code: 30, kind: \
             ReadOnlyFilesystem, message: \"Read-only file system\" } } })))",
        ]);
        assert_eq!(
            cause(&l).unwrap(),
            "error mounting \"/tmp\" to rootfs at \"/sys/x\": mkdir /b/rootfs/sys/x: \
             read-only file system"
        );
    }

    #[test]
    fn sysctls() {
        let l = lines(&[
            "apply value abc to kernel parameter net.ipv4.ip_forward.",
            "failed to set sysctl net.ipv4.ip_forward=abc: Invalid argument (os error 22)",
            "failed to initialize container process: failed to set sysctl",
        ]);
        assert_eq!(
            cause(&l).unwrap(),
            "write /proc/sys/net/ipv4/ip_forward: invalid argument"
        );
        let l = lines(&[
            "apply value 1 to kernel parameter net.ipv4.ip_forward.",
            "apply value 1 to kernel parameter net.ipv4.nosuch.",
            "failed to initialize container process: open subpath in procfs failed",
        ]);
        assert_eq!(
            cause(&l).unwrap(),
            "open /proc/sys/net/ipv4/nosuch: open subpath in procfs failed"
        );
    }

    #[test]
    fn device_path_and_unknown_lines() {
        let l = lines(&["\"foo\" is not a valid device path starting with /dev"]);
        assert_eq!(
            cause(&l).unwrap(),
            "linux.devices: \"foo\" is not a valid device path starting with /dev"
        );
        assert_eq!(cause(&lines(&["something else"])), None);
        assert_eq!(cause(&[]), None);
    }

    #[test]
    fn escaped_debug_strings() {
        assert_eq!(
            debug_str_after(r#"destination: "/a \"b\" \\c", x"#, "destination: ").unwrap(),
            r#"/a "b" \c"#
        );
        assert_eq!(debug_str_after("destination: None", "destination: "), None);
    }

    #[test]
    fn armed_pipe_carries_noted_lines_only_while_armed() {
        note(tracing::Level::ERROR, "before", &[]);
        let c = Catcher::arm().unwrap();
        assert!(wants(INIT_TARGET, tracing::Level::DEBUG));
        assert!(!wants("siloc", tracing::Level::ERROR));
        note(
            tracing::Level::ERROR,
            "failed x",
            &[("err".into(), "E".into())],
        );
        note(tracing::Level::DEBUG, "not a sysctl step", &[]);
        note(
            tracing::Level::DEBUG,
            "apply value 1 to kernel parameter a.b.",
            &[],
        );
        assert_eq!(
            c.take(),
            ["failed x err=E", "apply value 1 to kernel parameter a.b."]
        );
        assert!(!wants(INIT_TARGET, tracing::Level::ERROR));
    }
}
