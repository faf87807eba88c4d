//! OOM kills in one memory cgroup, as one pollable watch: the shim turns them into
//! containerd's `/tasks/oom` events, `siloc events` into runc's `{"type":"oom"}` lines.
//!
//! cgroup v1: an eventfd registered on the cgroup's `memory.oom_control` through
//! `cgroup.event_control` (kernel Documentation/admin-guide/cgroup-v1/memory.rst, "OOM
//! Control"). The kernel signals it at each OOM in the cgroup, before the OOM killer
//! acts, and once more when the cgroup is removed. Recent kernels (6.18 here) log that
//! `oom_control` is deprecated; v1 has nothing else to watch.
//! cgroup v2: the `oom_kill` count of `memory.events`, watched with inotify (the file
//! "generates a file modified event" when a value changes, cgroup-v2.rst).
//!
//! runc 1.1.5 watches the same files (libcontainer/notify_linux.go, notify_v2_linux.go);
//! on v2 it reports every change of `memory.events` once `oom_kill` is above 0 (a
//! `high` or `max` event too), here only a rising `oom_kill` count.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// Errors setting a watch up, naming the cgroup file or the call.
#[derive(Debug, thiserror::Error)]
pub enum OomError {
    #[error("no memory cgroup found for process {0}")]
    NoCgroup(i32),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{call} for {path}: {errno}")]
    Sys {
        call: &'static str,
        path: PathBuf,
        errno: Errno,
    },
}

/// What one look at the cgroup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oom {
    /// This many OOM kills since the last look (often 0).
    Kills(u64),
    /// The cgroup was removed: no more events.
    Gone,
}

enum Source {
    /// The registered eventfd (non-blocking) and the `memory.oom_control` it is
    /// registered on, open as long as the watch (runc keeps it open too).
    V1 { efd: EventFd, _ctl: File },
    /// An inotify watch on `memory.events` (non-blocking) and the `oom_kill` count
    /// seen last.
    V2 { inotify: Inotify, seen: u64 },
}

/// A watch on one memory cgroup's OOM kills.
pub struct OomWatch {
    dir: PathBuf,
    src: Source,
}

/// How often [`OomWatch::run`] looks whether the cgroup is gone when nothing wakes it
/// (a v2 cgroup's removal does not wake an inotify watch on its files).
const GONE_CHECK: Duration = Duration::from_secs(1);

impl OomWatch {
    /// Watches the memory cgroup directory `dir`: v1 when it has `memory.oom_control`,
    /// else v2's `memory.events`. OOM kills before this call are not reported.
    pub fn new(dir: &Path) -> Result<OomWatch, OomError> {
        let ctl_path = dir.join("memory.oom_control");
        let src = if ctl_path.exists() {
            let ctl = File::open(&ctl_path).map_err(|source| OomError::Io {
                path: ctl_path.clone(),
                source,
            })?;
            let efd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).map_err(
                |errno| OomError::Sys {
                    call: "eventfd",
                    path: ctl_path.clone(),
                    errno,
                },
            )?;
            let control = dir.join("cgroup.event_control");
            // "<event_fd> <fd of memory.oom_control>" (cgroup-v1/memory.rst)
            let line = format!("{} {}", efd.as_raw_fd(), ctl.as_raw_fd());
            std::fs::write(&control, line).map_err(|source| OomError::Io {
                path: control,
                source,
            })?;
            Source::V1 { efd, _ctl: ctl }
        } else {
            let events = dir.join("memory.events");
            let sys = |call, errno| OomError::Sys {
                call,
                path: events.clone(),
                errno,
            };
            let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)
                .map_err(|e| sys("inotify_init1", e))?;
            inotify
                .add_watch(&events, AddWatchFlags::IN_MODIFY)
                .map_err(|e| sys("inotify_add_watch", e))?;
            let seen = read_oom_kills(&events).map_err(|source| OomError::Io {
                path: events.clone(),
                source,
            })?;
            Source::V2 { inotify, seen }
        };
        Ok(OomWatch {
            dir: dir.to_path_buf(),
            src,
        })
    }

    /// Watches the memory cgroup of process `pid` (its v1 `memory` hierarchy's
    /// directory, else its cgroup v2 one), found through the host's mount table.
    pub fn of_pid(pid: i32) -> Result<OomWatch, OomError> {
        let mounts = super::cgroup_mounts::read().map_err(|source| OomError::Io {
            path: "/proc/self/mountinfo".into(),
            source,
        })?;
        let dir = super::cgroup::controller_dir_of(&mounts, pid, "memory")
            .ok_or(OomError::NoCgroup(pid))?;
        OomWatch::new(&dir)
    }

    /// The fd that becomes readable when [`OomWatch::take`] may have news.
    pub fn fd(&self) -> BorrowedFd<'_> {
        match &self.src {
            Source::V1 { efd, .. } => efd.as_fd(),
            Source::V2 { inotify, .. } => inotify.as_fd(),
        }
    }

    /// The OOM kills since the last look, or [`Oom::Gone`] once the cgroup was
    /// removed. Never blocks.
    pub fn take(&mut self) -> Oom {
        match &mut self.src {
            Source::V1 { efd, .. } => {
                // The counter: notifications since the last read (EAGAIN: none).
                let n = efd.read().unwrap_or(0);
                // The removal signals the eventfd too; runc checks the same file.
                if !self.dir.join("cgroup.event_control").exists() {
                    return Oom::Gone;
                }
                Oom::Kills(n)
            }
            Source::V2 { inotify, seen } => {
                // Only drains the queue: the count says what happened.
                let _ = inotify.read_events();
                match read_oom_kills(&self.dir.join("memory.events")) {
                    Ok(n) => {
                        let new = n.saturating_sub(*seen);
                        *seen = (*seen).max(n);
                        Oom::Kills(new)
                    }
                    Err(_) => Oom::Gone,
                }
            }
        }
    }

    /// Calls `on_oom` once per OOM kill until the cgroup is gone. Blocks: for a
    /// thread of its own.
    pub fn run(mut self, on_oom: impl Fn()) {
        let timeout = PollTimeout::try_from(GONE_CHECK).unwrap_or(PollTimeout::MAX);
        loop {
            let polled = poll(&mut [PollFd::new(self.fd(), PollFlags::POLLIN)], timeout);
            if let Err(e) = polled
                && e != Errno::EINTR
            {
                tracing::warn!(dir = %self.dir.display(), %e, "OOM watch ends: poll failed");
                return;
            }
            match self.take() {
                Oom::Gone => return,
                Oom::Kills(n) => (0..n).for_each(|_| on_oom()),
            }
        }
    }
}

/// The `oom_kill` count of a cgroup v2 `memory.events` file (0 when the line is
/// missing: kernels before 4.13).
fn read_oom_kills(path: &Path) -> std::io::Result<u64> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_counts_rising_oom_kills_and_ends_with_the_cgroup() {
        let d = tempfile::tempdir().unwrap();
        let cg = d.path().join("c");
        std::fs::create_dir(&cg).unwrap();
        let events = cg.join("memory.events");
        let write = |n: u64| {
            std::fs::write(
                &events,
                format!("low 0\nhigh 0\nmax 3\noom 2\noom_kill {n}\n"),
            )
            .unwrap()
        };
        write(2);
        let mut w = OomWatch::new(&cg).unwrap();
        // the kills before the watch are not news
        assert_eq!(w.take(), Oom::Kills(0));
        write(5);
        // the inotify fd is readable after the write
        let mut fds = [PollFd::new(w.fd(), PollFlags::POLLIN)];
        assert_eq!(poll(&mut fds, PollTimeout::ZERO).unwrap(), 1);
        assert_eq!(w.take(), Oom::Kills(3));
        assert_eq!(w.take(), Oom::Kills(0));
        std::fs::remove_dir_all(&cg).unwrap();
        assert_eq!(w.take(), Oom::Gone);
    }

    #[test]
    fn missing_memory_cgroup_is_named() {
        let d = tempfile::tempdir().unwrap();
        let e = OomWatch::new(&d.path().join("nope")).err().unwrap();
        assert!(e.to_string().contains("nope/memory.events"), "{e}");
    }

    #[test]
    fn oom_kill_count() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("memory.events");
        std::fs::write(&p, "oom 1\noom_kill 4\n").unwrap();
        assert_eq!(read_oom_kills(&p).unwrap(), 4);
        std::fs::write(&p, "oom 1\n").unwrap();
        assert_eq!(read_oom_kills(&p).unwrap(), 0);
    }
}
