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

use crate::plan::{RootfsPlan, UpperPlan};
use crate::prepare::{Env, canonical_to_be};
use crate::record::{self, Record};

/// Whether one of `a` and `b` is the other or lies inside it.
fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Whether `p` or one of its existing ancestors is the directory `root` (same device
/// and inode): true for `p` inside `root` also when reached through a bind mount.
fn inside_by_inode(p: &Path, root: &Path) -> bool {
    let Ok(r) = std::fs::metadata(root) else {
        return false;
    };
    p.ancestors()
        .filter_map(|a| std::fs::metadata(a).ok())
        .any(|m| (m.dev(), m.ino()) == (r.dev(), r.ino()))
}

/// [`overlap`] by path, or by device and inode either way.
fn overlap_on_disk(a: &Path, b: &Path) -> bool {
    overlap(a, b) || inside_by_inode(a, b) || inside_by_inode(b, a)
}

/// Refuses `upper` and `work` (canonical, for container `id`) when they overlap the
/// data root, the state root, or an upper or work dir of another container recorded
/// under the state root. Errors: why, naming the other path.
pub fn check_apart(env: &Env<'_>, id: &str, upper: &Path, work: &Path) -> Result<(), String> {
    let canon = |p: &Path| canonical_to_be(p).unwrap_or_else(|_| p.to_path_buf());
    for (what, root) in [("data root", env.data_root), ("state root", env.state_root)] {
        let root = canon(root);
        if let Some(d) = [upper, work]
            .into_iter()
            .find(|d| overlap_on_disk(d, &root))
        {
            return Err(format!(
                "{} overlaps siloc's {what} {}: upper dirs must be apart from it",
                d.display(),
                root.display()
            ));
        }
    }
    for other in record::list(env.state_root).unwrap_or_default() {
        if other == id {
            continue;
        }
        let Ok(Some(rec)) = Record::load(env.state_root, &other) else {
            continue;
        };
        for theirs in dirs_of(&rec).iter().map(|p| canon(p)) {
            if let Some(d) = [upper, work]
                .into_iter()
                .find(|d| overlap_on_disk(d, &theirs))
            {
                return Err(format!(
                    "{} overlaps {} of container {other}",
                    d.display(),
                    theirs.display()
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
        if let UpperPlan::Persistent(u) = upper {
            dirs.push(u.clone());
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
        assert!(inside_by_inode(&via_alias, &root));
        assert!(overlap_on_disk(&root, &via_alias));
        assert!(!overlap_on_disk(&d.path().join("other"), &root));
    }
}
