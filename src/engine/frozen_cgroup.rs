//! A container's cgroup that is frozen before the container exists.
//!
//! libcontainer gap covered: libcontainer 0.7 moves its intermediate process into the
//! container's cgroup and then waits on it without a timeout; in a frozen cgroup
//! (cgroup v1 freezer `FROZEN`, or under a frozen ancestor; cgroup v2 `cgroup.freeze`
//! 1 on it or an ancestor) that process stops at once and `create` hangs for good.
//! runc 1.1.5 refuses a frozen cgroup itself with "container's cgroup unexpectedly
//! frozen" and hangs (its init in D state) under a frozen ancestor. siloc refuses
//! both by name before anything is made, in runc's words first. Delete this module
//! when libcontainer fails instead of hanging.

use std::path::{Path, PathBuf};

use crate::sys::mountinfo::Mount;

/// The cgroup (or an ancestor) is frozen: nothing was created. The text starts with
/// runc 1.1.5's (as `runc create` prints it) for scripts that match it.
#[derive(Debug, thiserror::Error)]
#[error(
    "container's cgroup unexpectedly frozen: cgroup {0} is frozen: a container created \
     in it would hang; thaw it first (cgroup v1 freezer.state THAWED, v2 cgroup.freeze 0)"
)]
pub struct FrozenCgroupError(pub PathBuf);

/// Checks the directories a cgroupfs-driver `cgroups_path` names (absolute: below
/// each hierarchy's root; relative: below siloc's own cgroup, `own` being
/// /proc/self/cgroup) and their existing ancestors, in the v1 freezer hierarchy and
/// in the v2 hierarchy of `mounts`.
///
/// Errors: [`FrozenCgroupError`] naming the first frozen directory.
pub fn check(mounts: &[Mount], own: &str, cgroups_path: &Path) -> Result<(), FrozenCgroupError> {
    for m in mounts {
        let v1_freezer = m.fs_type == "cgroup" && m.super_options.iter().any(|o| o == "freezer");
        let v2 = m.fs_type == "cgroup2";
        if !v1_freezer && !v2 {
            continue;
        }
        let base = if cgroups_path.is_absolute() {
            PathBuf::from("/")
        } else {
            PathBuf::from(own_path(own, v2).unwrap_or("/"))
        };
        let rel = base.join(cgroups_path);
        let dir = m.mount_point.join(rel.strip_prefix("/").unwrap_or(&rel));
        for d in dir.ancestors().filter(|d| d.starts_with(&m.mount_point)) {
            if frozen(d, v2) {
                return Err(FrozenCgroupError(d.to_path_buf()));
            }
        }
    }
    Ok(())
}

/// siloc's own cgroup in the freezer (v1) or unified (v2) hierarchy, from
/// /proc/self/cgroup lines `N:controllers:path`.
fn own_path(own: &str, v2: bool) -> Option<&str> {
    own.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        let hit = if v2 {
            ctl.is_empty()
        } else {
            ctl.split(',').any(|c| c == "freezer")
        };
        hit.then_some(path)
    })
}

fn frozen(dir: &Path, v2: bool) -> bool {
    if v2 {
        std::fs::read_to_string(dir.join("cgroup.freeze")).is_ok_and(|s| s.trim() == "1")
    } else {
        std::fs::read_to_string(dir.join("freezer.state"))
            .is_ok_and(|s| matches!(s.trim(), "FROZEN" | "FREEZING"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts(root: &Path) -> Vec<Mount> {
        crate::sys::mountinfo::parse(&format!(
            "30 23 0:30 / {r}/freezer rw - cgroup cgroup rw,freezer\n\
             31 23 0:31 / {r}/unified rw - cgroup2 cgroup2 rw\n",
            r = root.display()
        ))
    }

    #[test]
    fn a_frozen_ancestor_is_named() {
        let t = tempfile::tempdir().unwrap();
        let pod = t.path().join("freezer/pod");
        std::fs::create_dir_all(&pod).unwrap();
        std::fs::write(pod.join("freezer.state"), "FROZEN\n").unwrap();
        std::fs::create_dir_all(t.path().join("unified")).unwrap();
        let m = mounts(t.path());
        let e = check(&m, "", Path::new("/pod/ctr")).unwrap_err();
        assert_eq!(e.0, pod);
        std::fs::write(pod.join("freezer.state"), "THAWED\n").unwrap();
        check(&m, "", Path::new("/pod/ctr")).unwrap();
        // v2, relative to siloc's own cgroup
        let own = t.path().join("unified/me");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("cgroup.freeze"), "1\n").unwrap();
        let e = check(&m, "0::/me\n", Path::new("ctr")).unwrap_err();
        assert_eq!(e.0, own);
    }
}
