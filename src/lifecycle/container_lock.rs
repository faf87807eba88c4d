//! One container's commands that touch its cgroups, one at a time.
//!
//! libcontainer 0.7's `kill`, `pause`, `resume` and `update` write the container's
//! cgroups through libcgroups, whose v1 `apply` makes a missing directory
//! (`create_dir_all`). A `delete` removes the cgroups first and the state directory
//! after; a `kill --all` in between (containerd sends a task's kill and delete on
//! separate connections; CRI's exit handler and RemoveContainer both delete with a
//! kill of all processes) finds the state, remakes the freezer cgroup and freezes it
//! (libcontainer's freeze, kill, thaw), then fails listing the removed `devices`
//! cgroup before its thaw; delete then removes the state, and an empty FROZEN freezer
//! cgroup stays for good (and its parent, a pod's cgroup, cannot be removed). siloc
//! takes an exclusive `flock(2)` on the container's libcontainer state directory for
//! `delete` and for those commands, so a command that waited for a `delete` finds the
//! container gone and touches nothing.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::engine;
use crate::sys::lock::{self, Lock, Mode};

/// Waits for and holds the exclusive lock on container `id`'s state directory under
/// `root` (`<root>/<id>`). `None` when `id` is not a valid id or that directory does
/// not exist (the command's own load then reports the container missing, in runc's
/// words) or cannot be locked: the lock only orders commands, it never makes one
/// fail. A directory that was removed (and maybe made again by a create of the same
/// id) while this waited is opened again, so the lock held is always the current
/// directory's.
pub(crate) fn hold(root: &Path, id: &str) -> Option<Lock> {
    // The id becomes a path: `..` would name the state root's parent.
    engine::validate_id(id).ok()?;
    let dir = engine::container_dir(root, id);
    // Each retry follows a delete or a re-create of the id: a few are plenty.
    for _ in 0..8 {
        let l = lock::lock_file(std::fs::File::open(&dir).ok()?, Mode::Exclusive).ok()?;
        let same = match (l.file().metadata(), std::fs::metadata(&dir)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if same {
            return Some(l);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_container_is_no_lock_and_a_held_one_waits() {
        let t = tempfile::tempdir().unwrap();
        assert!(hold(t.path(), "c1").is_none());
        std::fs::create_dir(t.path().join("x")).unwrap();
        assert!(hold(&t.path().join("x"), "..").is_none());
        std::fs::create_dir(t.path().join("c1")).unwrap();
        let held = hold(t.path(), "c1").unwrap();
        let f = std::fs::File::open(t.path().join("c1")).unwrap();
        let e = lock::lock_file(f, Mode::TryExclusive).err().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
        // Removed while held: a waiter finds nothing to lock.
        std::fs::remove_dir(t.path().join("c1")).unwrap();
        drop(held);
        assert!(hold(t.path(), "c1").is_none());
    }
}
