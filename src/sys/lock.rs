//! Directory and file locks (`flock(2)`), held while a value lives. The state root, the
//! layer store and a scenario target are each guarded by one.

use std::fs::File;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// Holds a `flock(2)` until dropped.
pub(crate) struct Lock(Flock<File>);

impl Lock {
    /// The locked file (to compare its inode with the path's, say).
    pub(crate) fn file(&self) -> &File {
        &self.0
    }
}

/// How to take a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Exclusive, waiting for other holders.
    Exclusive,
    /// Shared, waiting for an exclusive holder.
    Shared,
    /// Exclusive, or `ErrorKind::WouldBlock` at once when someone holds it.
    TryExclusive,
}

/// Locks the open file or directory `f`.
///
/// Errors: `flock(2)`'s, as an `io::Error` (`WouldBlock` for a busy `TryExclusive`).
pub(crate) fn lock_file(f: File, mode: Mode) -> std::io::Result<Lock> {
    let arg = match mode {
        Mode::Exclusive => FlockArg::LockExclusive,
        Mode::Shared => FlockArg::LockShared,
        Mode::TryExclusive => FlockArg::LockExclusiveNonblock,
    };
    Flock::lock(f, arg)
        .map(Lock)
        .map_err(|(_, e)| std::io::Error::from(e))
}

/// Locks directory `dir`, creating it (and its parents) when missing.
///
/// Errors: creating or opening `dir`, or `flock(2)`.
pub(crate) fn lock_dir(dir: &Path, mode: Mode) -> std::io::Result<Lock> {
    std::fs::create_dir_all(dir)?;
    lock_file(File::open(dir)?, mode)
}

/// Locks file `path`, creating it when missing (its contents are left as they are).
///
/// Errors: opening `path`, or `flock(2)`.
pub(crate) fn lock_path(path: &Path, mode: Mode) -> std::io::Result<Lock> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    lock_file(f, mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_makes_try_fail_until_dropped() {
        let d = tempfile::tempdir().unwrap();
        let held = lock_dir(&d.path().join("x"), Mode::Exclusive).unwrap();
        let e = lock_dir(&d.path().join("x"), Mode::TryExclusive)
            .err()
            .unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        drop(held);
        lock_dir(&d.path().join("x"), Mode::TryExclusive).unwrap();
    }
}
