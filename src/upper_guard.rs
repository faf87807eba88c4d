//! What a persistent upper dir (`io.siloc.rootfs.upper`) must keep apart from.
//!
//! siloc chowns the upper dir to the container's root and the container writes there,
//! so it must not hold or lie in siloc's own data root (other containers' writable
//! layers) or state root (records and the ID pool table), nor overlap another live
//! container's upper or work dir: overlayfs would share it ("upperdir is in-use") and
//! one container's delete would remove the other's work dir.

use std::path::{Path, PathBuf};

use crate::plan::{RootfsPlan, UpperPlan};
use crate::prepare::{Env, canonical_to_be};
use crate::record::{self, Record};

/// Whether one of `a` and `b` is the other or lies inside it.
fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// Refuses `upper` and `work` (canonical, for container `id`) when they overlap the
/// data root, the state root, or an upper or work dir of another container recorded
/// under the state root. Errors: why, naming the other path.
pub fn check_apart(env: &Env<'_>, id: &str, upper: &Path, work: &Path) -> Result<(), String> {
    let canon = |p: &Path| canonical_to_be(p).unwrap_or_else(|_| p.to_path_buf());
    for (what, root) in [("data root", env.data_root), ("state root", env.state_root)] {
        let root = canon(root);
        if let Some(d) = [upper, work].into_iter().find(|d| overlap(d, &root)) {
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
        for theirs in writable_dirs_of(&rec).iter().map(|p| canon(p)) {
            if let Some(d) = [upper, work].into_iter().find(|d| overlap(d, &theirs)) {
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

/// The upper and work dirs a container's record names: its persistent upper dir and
/// every directory siloc made for it (work dir, ephemeral upper base).
fn writable_dirs_of(rec: &Record) -> Vec<PathBuf> {
    let mut dirs = rec.prepared.made_dirs.clone();
    if let RootfsPlan::Overlay {
        upper: UpperPlan::Persistent(u),
        ..
    } = &rec.plan.rootfs
    {
        dirs.push(u.clone());
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
}
