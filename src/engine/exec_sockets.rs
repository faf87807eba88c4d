//! The `tenant-notify-<hex>.sock` files libcontainer 0.7 leaves in a container's state
//! dir, one per `exec` (its tenant builder binds one, connects to it once the exec'd
//! process is set up, and never removes it): a pod probed by `exec` every few seconds
//! grew its state dir without bound.
//!
//! A socket file is needed only from its bind to its connect, both inside the
//! builder's `build()`; after `build()` returns (also with `--detach`, also on error)
//! it is not. Execs of one container may run in parallel, so one exec cannot tell its
//! own socket from one a parallel exec still needs. So each exec holds a shared
//! `flock` on the state dir while it builds ([`Building`]); when it is done it takes
//! the lock exclusively without waiting, and if it gets it (no exec is building)
//! removes every `tenant-notify-*.sock` there. The last exec to finish always gets it,
//! so an idle container has none left, whatever failed or was killed before.

use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// The prefix libcontainer 0.7 names the files with (container/tenant_builder.rs).
pub const PREFIX: &str = "tenant-notify-";

/// A shared lock on a container's state dir, held while an exec builds.
pub struct Building {
    dir: PathBuf,
    lock: Flock<std::fs::File>,
}

impl Building {
    /// Takes the shared lock on `dir` (waits only for another exec's cleanup).
    /// Errors: the dir cannot be opened or locked (the message names it).
    pub fn enter(dir: &Path) -> Result<Building, String> {
        let f = std::fs::File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let lock = Flock::lock(f, FlockArg::LockShared)
            .map_err(|(_, e)| format!("lock {}: {e}", dir.display()))?;
        Ok(Building {
            dir: dir.to_path_buf(),
            lock,
        })
    }

    /// Ends this exec's build: drops the shared lock, then removes the leftover
    /// sockets if no other exec is building. Returns how many were removed.
    pub fn finish(self) -> usize {
        let Ok(f) = self.lock.unlock() else {
            return 0;
        };
        let Ok(only) = Flock::lock(f, FlockArg::LockExclusiveNonblock) else {
            return 0;
        };
        let n = remove_leftovers(&self.dir);
        drop(only);
        n
    }
}

/// Removes every `tenant-notify-*.sock` in `dir`; returns how many.
fn remove_leftovers(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(PREFIX) && name.ends_with(".sock")
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_exec_out_removes_the_sockets() {
        let d = tempfile::tempdir().unwrap();
        let sock = |n: &str| d.path().join(format!("{PREFIX}{n}.sock"));
        std::fs::write(sock("a1"), "").unwrap();
        std::fs::write(d.path().join("state.json"), "{}").unwrap();
        let first = Building::enter(d.path()).unwrap();
        let second = Building::enter(d.path()).unwrap();
        std::fs::write(sock("b2"), "").unwrap();
        // The second is still building: its socket may be needed.
        assert_eq!(first.finish(), 0);
        assert!(sock("b2").exists());
        assert_eq!(second.finish(), 2);
        assert!(!sock("a1").exists() && !sock("b2").exists());
        assert!(d.path().join("state.json").exists());
    }
}
