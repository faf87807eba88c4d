//! What a persistent upper dir (`io.siloc.rootfs.upper`) must keep apart from.
//!
//! siloc chowns the upper dir to the container's root and the container writes there,
//! so it must not hold or lie in siloc's own data root (other containers' writable
//! layers) or state root (records and the ID pool table), nor overlap another live
//! container's upper or work dir, layers or root.path: overlayfs would share it
//! ("upperdir is in-use"), one container's delete would remove the other's work dir,
//! and a shared layer would be chowned. Paths are compared after symlinks are resolved
//! and also by device and inode, so a bind-mount alias of a directory is that directory.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::lifecycle::plan::{RootfsPlan, UpperPlan};
use crate::lifecycle::record::{self, Record};
use crate::sys::paths::canonical_to_be;

/// Whether one of `a` and `b` is the other or lies inside it.
fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// A path with the device and inode of it and of each existing ancestor, read once.
struct OnDisk {
    path: PathBuf,
    /// `path`'s own (dev, ino), if it exists.
    id: Option<(u64, u64)>,
    /// The (dev, ino) of `path` and every existing ancestor.
    ancestors: Vec<(u64, u64)>,
}

impl OnDisk {
    fn new(path: PathBuf) -> OnDisk {
        let id_of = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        OnDisk {
            id: id_of(&path),
            ancestors: path.ancestors().filter_map(id_of).collect(),
            path,
        }
    }

    /// [`overlap`] by path, or one inside the other by device and inode, so a
    /// directory reached through a bind mount is still found.
    fn overlaps(&self, other: &OnDisk) -> bool {
        let inside = |a: &OnDisk, b: &OnDisk| b.id.is_some_and(|id| a.ancestors.contains(&id));
        overlap(&self.path, &other.path) || inside(self, other) || inside(other, self)
    }
}

/// Refuses `upper` and `work` (canonical, for container `id`) when they overlap the
/// data root, the state root, or an upper or work dir, layer or root.path of another
/// container recorded under the state root. Errors: why, naming the other path.
pub fn check_apart(
    data_root: &Path,
    state_root: &Path,
    id: &str,
    upper: &Path,
    work: &Path,
) -> Result<(), String> {
    let disk = |p: &Path| OnDisk::new(canonical_to_be(p).unwrap_or_else(|_| p.to_path_buf()));
    let ours = [disk(upper), disk(work)];
    let clash = |theirs: &OnDisk| {
        ours.iter()
            .find(|d| d.overlaps(theirs))
            .map(|d| d.path.display().to_string())
    };
    for (what, root) in [("data root", data_root), ("state root", state_root)] {
        let root = disk(root);
        if let Some(d) = clash(&root) {
            return Err(format!(
                "{d} overlaps siloc's {what} {}: upper dirs must be apart from it",
                root.path.display()
            ));
        }
    }
    for other in record::list(state_root).unwrap_or_default() {
        if other == id {
            continue;
        }
        let Ok(Some(rec)) = Record::load(state_root, &other) else {
            continue;
        };
        for theirs in dirs_of(&rec).iter().map(|p| disk(p)) {
            if let Some(d) = clash(&theirs) {
                return Err(format!(
                    "{d} overlaps {} of container {other}",
                    theirs.path.display()
                ));
            }
        }
    }
    Ok(())
}

/// The directories of a container's record an upper dir must keep apart from: its
/// persistent upper dir, every directory siloc made for it (work dir, ephemeral upper
/// base), its layers and its root.path.
fn dirs_of(rec: &Record) -> Vec<PathBuf> {
    let mut dirs = rec.prepared.made_dirs.clone();
    dirs.push(rec.rootfs.clone());
    if let RootfsPlan::Overlay { layers, upper } = &rec.plan.rootfs {
        dirs.extend(layers.iter().cloned());
        match upper {
            UpperPlan::Persistent(u) => dirs.push(u.clone()),
            UpperPlan::Snapshot { upper, work } => dirs.extend([upper.clone(), work.clone()]),
            UpperPlan::Ephemeral => {}
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_is_containment_either_way() {
        assert!(overlap(Path::new("/a/b"), Path::new("/a")));
        assert!(overlap(Path::new("/a"), Path::new("/a/b")));
        assert!(overlap(Path::new("/a"), Path::new("/a")));
        assert!(!overlap(Path::new("/a/b"), Path::new("/a/bc")));
        assert!(!overlap(Path::new("/a.work"), Path::new("/a")));
    }

    #[test]
    fn a_bind_mount_alias_is_found_by_inode() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        // A symlink stands in for a bind mount here: both reach the same inode.
        std::os::unix::fs::symlink(&root, d.path().join("alias")).unwrap();
        let via_alias = d.path().join("alias/sub/upper");
        assert!(!overlap(&via_alias, &root));
        let (alias, root) = (OnDisk::new(via_alias), OnDisk::new(root));
        assert!(alias.overlaps(&root) && root.overlaps(&alias));
        assert!(!OnDisk::new(d.path().join("other")).overlaps(&root));
    }
}
