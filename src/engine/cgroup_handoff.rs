//! How create puts the init into the extra cgroups (engine::cgroup_compat: the named
//! v1 hierarchies and the hybrid's unified one, which libcgroups' v1 manager leaves
//! out) without a cgroup move of its own after libcontainer: siloc's create process
//! joins them just before libcontainer forks, its children (libcontainer's
//! intermediate process, and the init the intermediate forks) are born in them, and it
//! leaves them again the moment libcontainer has forked.
//!
//! Why: a move between cgroups (a `cgroup.procs` write) takes the kernel's
//! `cgroup_threadgroup_rwsem` for writing, a per-CPU rwsem whose writer waits for an
//! RCU grace period (10-16 ms on the dev host) unless the previous writer left less than
//! one grace period ago (kernel/rcu/sync.c: `rcu_sync` goes back to idle one grace
//! period after the last writer's `rcu_sync_exit`). Moving the init in after
//! libcontainer's build returned, 20-50 ms after the intermediate's own moves into the
//! v1 controllers, paid a second grace period per create and per `run`. siloc's move
//! in, its move back and the intermediate's moves now fall within one window: one
//! grace period per create, as crun.
//!
//! How: [`Handoff::start`] moves the caller in (exec_cgroup's [`Moves`], opened
//! beforehand) and starts a watcher thread, which polls the calling thread's
//! children (`/proc/thread-self/children`, `CONFIG_PROC_CHILDREN`; proc(5)). Once a
//! child appears that was not there at the start it writes the caller's pid back into
//! the caller's own cgroups: libcontainer 0.7 forks nothing in the caller before its
//! intermediate process (`container_main_process`, for the init and for a tenant
//! alike), and a child listed there has been forked, so it is in the extra cgroups
//! whatever the caller does next.
//! [`Handoff::finish`] (or the drop, on every error path) stops the watcher and moves
//! the caller back itself when the watcher did not: libcontainer failed before it
//! forked, or the kernel has no children file. Either way the caller is back in its
//! own cgroups before create returns, so a failed create can remove the directories and
//! a foreground `run` can delete its container (rmdir refuses a populated cgroup).
//!
//! exec does the same ([`Handoff::prepare`], then [`Prepared::start`]), in two steps:
//! the `cgroup.procs` files and the children file are opened while siloc is still in
//! the host's user namespace (the kernel checks a migration against the opener's
//! credentials, Linux 5.16+), and the watcher starts after siloc joined the
//! container's user namespace, which `setns(2)` allows only a single-threaded caller.
//! Before, exec went back only after libcontainer returned, 5-75 ms after the
//! intermediate's moves under strace on the dev host, and paid a second grace period
//! when that was more than one.
//!
//! The thread and libcontainer's fork: libcontainer forks its intermediate process with
//! a raw `clone3`, which runs no `pthread_atfork` handler, so the child would inherit
//! any lock another thread held at that instant (the allocator's, for one). The watcher
//! holds none while libcontainer may fork: [`Handoff::start`] returns only after the
//! watcher's own start-up, and from then until it sees the child or is stopped the
//! watcher makes only `pread(2)`, `write(2)` and `nanosleep(2)` calls on files and
//! buffers made before, and atomic loads and stores; it frees memory only when it
//! ends. siloc's own helpers (sys::fork) are forked after [`Handoff::finish`].

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::exec_cgroup::{ExecCgroupError, Moves};
use crate::sys::cgroup::hierarchies;
use crate::sys::mountinfo::Mount;

/// The watcher's poll interval for the first [`FAST_POLLS`] polls: libcontainer forks
/// within a few milliseconds of being called, and a move back up to this much later
/// still falls within the grace period's window (module doc). Each poll costs a few
/// microseconds of CPU.
const POLL: Duration = Duration::from_micros(500);
/// Polls at [`POLL`] before the watcher slows down to [`SLOW_POLL`].
const FAST_POLLS: u32 = 60;
/// The poll interval after that (a slow build: create hooks, a loaded host).
const SLOW_POLL: Duration = Duration::from_millis(2);

struct Shared {
    /// The way back: each of the caller's own cgroups (its directory, for messages)
    /// with its `cgroup.procs` open for writing.
    back: Vec<(PathBuf, File)>,
    /// The caller's pid, as written into `cgroup.procs`.
    me: Vec<u8>,
    /// The watcher is past its start-up.
    ready: AtomicBool,
    /// Set by the caller once libcontainer returned.
    stop: AtomicBool,
    /// The watcher moved the caller back.
    moved: AtomicBool,
}

/// The caller in the container's extra cgroups until libcontainer forked (module doc).
pub struct Handoff {
    shared: Option<Arc<Shared>>,
    watcher: Option<JoinHandle<()>>,
}

/// A handoff whose files are open and which has moved nothing yet
/// ([`Handoff::prepare`]).
pub struct Prepared {
    moves: Moves,
    /// The calling thread's `/proc/thread-self/children`, when the kernel has it.
    children: Option<File>,
}

impl Handoff {
    /// Moves the caller into `dirs` (one directory per extra hierarchy, from
    /// cgroup_compat::make_extra; hierarchies from the host's `mounts`) and starts the
    /// watcher: [`Handoff::prepare`] and [`Prepared::start`] at once. Nothing happens
    /// for no `dirs`. Call it right before libcontainer's build, and before the
    /// caller's thread joins other namespaces (the watcher stays in the caller's).
    ///
    /// Errors: [`ExecCgroupError::Join`] naming the `cgroup.procs` that cannot be
    /// opened or refused the move; the caller is back in its own cgroups then.
    pub fn start(mounts: &[Mount], dirs: &[PathBuf]) -> Result<Handoff, ExecCgroupError> {
        Handoff::prepare(Moves::open(&hierarchies(mounts), dirs)?).start()
    }

    /// Opens what the handoff of `moves` needs besides them (the calling thread's
    /// children file) and moves nothing: the caller may then join the container's
    /// user namespace before [`Prepared::start`]. Call it on the thread that calls
    /// libcontainer.
    pub fn prepare(moves: Moves) -> Prepared {
        let children = if moves.is_empty() {
            None
        } else {
            File::open("/proc/thread-self/children").ok()
        };
        Prepared { moves, children }
    }
}

impl Prepared {
    /// Moves the caller in and starts the watcher (module doc). Nothing happens for no
    /// moves. Call it right before libcontainer's build, on the thread that
    /// [`Handoff::prepare`]d.
    ///
    /// Errors: [`ExecCgroupError::Join`] naming the `cgroup.procs` that refused the
    /// move; the caller is back in its own cgroups then.
    pub fn start(self) -> Result<Handoff, ExecCgroupError> {
        let mut h = Handoff {
            shared: None,
            watcher: None,
        };
        if self.moves.is_empty() {
            return Ok(h);
        }
        let back = self.moves.enter()?;
        let shared = Arc::new(Shared {
            back,
            me: std::process::id().to_string().into_bytes(),
            ready: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            moved: AtomicBool::new(false),
        });
        h.shared = Some(shared.clone());
        let Some(children) = self.children else {
            return Ok(h);
        };
        let mut before = vec![0u8; 4096];
        let n = children.read_at(&mut before, 0).unwrap_or(0);
        let before: Vec<u32> = pids(&before[..n]).collect();
        let caller = std::thread::current();
        let s = shared.clone();
        match std::thread::Builder::new()
            .name("cgroup-handoff".into())
            .spawn(move || watch(&s, &caller, &children, &before))
        {
            Ok(t) => {
                while !shared.ready.load(Ordering::Acquire) {
                    std::thread::park_timeout(Duration::from_millis(1));
                }
                h.watcher = Some(t);
            }
            Err(e) => tracing::warn!("cgroup handoff: no watcher thread: {e}"),
        }
        Ok(h)
    }
}

impl Handoff {
    /// Stops the watcher and moves the caller back into its own cgroups if the watcher
    /// did not. Returns whether the watcher did (libcontainer forked within it).
    pub fn finish(mut self) -> bool {
        self.end()
    }

    fn end(&mut self) -> bool {
        let Some(s) = self.shared.take() else {
            return false;
        };
        s.stop.store(true, Ordering::Release);
        if let Some(t) = self.watcher.take()
            && t.join().is_err()
        {
            tracing::warn!("cgroup handoff: the watcher thread panicked");
        }
        if s.moved.load(Ordering::Acquire) {
            return true;
        }
        for (dir, f) in &s.back {
            let mut f: &File = f;
            if let Err(e) = f.write_all(&s.me) {
                tracing::warn!(
                    "back to siloc's own cgroup {}: {e}",
                    dir.join("cgroup.procs").display()
                );
            }
        }
        false
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        self.end();
    }
}

/// The watcher (module doc): no allocation, no lock, until it returns.
fn watch(s: &Shared, caller: &std::thread::Thread, children: &File, before: &[u32]) {
    s.ready.store(true, Ordering::Release);
    caller.unpark();
    let mut buf = [0u8; 4096];
    let mut polls: u32 = 0;
    while !s.stop.load(Ordering::Acquire) {
        if let Ok(n) = children.read_at(&mut buf, 0)
            && pids(&buf[..n]).any(|p| !before.contains(&p))
        {
            let ok = s.back.iter().all(|(_, f)| {
                let mut f: &File = f;
                f.write_all(&s.me).is_ok()
            });
            s.moved.store(ok, Ordering::Release);
            return;
        }
        polls = polls.saturating_add(1);
        std::thread::sleep(if polls < FAST_POLLS { POLL } else { SLOW_POLL });
    }
}

/// The pids in a `/proc/.../children` text (decimal numbers separated by spaces).
fn pids(text: &[u8]) -> impl Iterator<Item = u32> + '_ {
    text.split(|b| !b.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.iter().fold(0u32, |n, d| {
                n.wrapping_mul(10).wrapping_add(u32::from(d - b'0'))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_of_a_children_file() {
        assert_eq!(pids(b"12 345 \n").collect::<Vec<_>>(), vec![12, 345]);
        assert_eq!(pids(b"").count(), 0);
    }
}
