//! Frozen cgroups: before the container exists, and a live container's own freezer.
//!
//! libcontainer gaps covered:
//! - libcontainer 0.7 moves its intermediate process into the container's cgroup and
//!   then waits on it without a timeout; in a frozen cgroup (cgroup v1 freezer
//!   `FROZEN`, or under a frozen ancestor; cgroup v2 `cgroup.freeze` 1 on it or an
//!   ancestor) that process stops at once and `create` hangs for good. runc 1.1.5
//!   refuses a frozen cgroup itself with "container's cgroup unexpectedly frozen" and
//!   hangs (its init in D state) under a frozen ancestor. siloc refuses both by name
//!   before anything is made, in runc's words first ([`check`]).
//! - libcontainer 0.7 takes a container's status from its state.json and /proc only,
//!   so a container whose cgroup is frozen while state.json says `running` (what a
//!   `pause` or a `kill --all` killed between its freeze and its thaw leaves, or a
//!   freeze from outside) stays `running`: its SIGKILL is never thawed through (a v1
//!   frozen task does not die until thawed), `delete --force` waits out its drain, and
//!   `start` and `exec` hang in it. runc 1.1.5 reads the freezer for every status
//!   (`refreshState`: `paused` when the container's own cgroup is frozen, whatever
//!   its saved state). [`align_status`] does the same for every container siloc loads
//!   (`engine::load`), so libcontainer's own paused-container paths apply: SIGKILL
//!   thaws (v1), `kill --all` freezes, kills and thaws, `delete --force` kills all.
//!
//! Delete this module when libcontainer fails instead of hanging and reads the
//! freezer for its status.

use std::path::{Path, PathBuf};

use libcontainer::container::{Container, ContainerStatus};
use nix::unistd::Pid;

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
/// in the v2 hierarchy of `mounts`, through the mount each is made through (a bind
/// of a frozen cgroup elsewhere does not count).
///
/// Errors: [`FrozenCgroupError`] naming the first frozen directory.
pub fn check(mounts: &[Mount], own: &str, cgroups_path: &Path) -> Result<(), FrozenCgroupError> {
    // The mounts the cgroup will be made through: libcgroups' freezer mount, and the
    // cgroup2 hierarchy's first one (/sys/fs/cgroup on a v2 host, where libcgroups
    // makes it); not other binds of them.
    let v1 = crate::sys::cgroup::libcgroups_v1_mount(mounts, "freezer").map(|p| (p, false));
    let unified = crate::sys::cgroup::hierarchies(mounts)
        .into_iter()
        .find(|h| h.v2)
        .map(|h| h.mount_point);
    let v2 = unified.as_deref().map(|p| (p, true));
    for (mount_point, v2) in v1.into_iter().chain(v2) {
        let base = if cgroups_path.is_absolute() {
            PathBuf::from("/")
        } else {
            PathBuf::from(own_path(own, v2).unwrap_or("/"))
        };
        let rel = base.join(cgroups_path);
        let dir = mount_point.join(rel.strip_prefix("/").unwrap_or(&rel));
        for d in dir.ancestors().filter(|d| d.starts_with(mount_point)) {
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

/// The freezer of one cgroup: the v1 freezer hierarchy's directory, or a pure v2
/// host's cgroup directory (`cgroup.freeze`, kernel doc cgroup-v2.rst "Core Interface
/// Files").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freezer {
    /// The cgroup directory.
    pub dir: PathBuf,
    /// Whether `dir` is in the v2 hierarchy.
    pub v2: bool,
}

impl Freezer {
    /// The freezer cgroup of live process `pid` (a container's init), from
    /// /proc/PID/cgroup: on a pure v2 host its `0::` cgroup, else its v1 `freezer`
    /// hierarchy (as runc 1.1.5's fs manager on a v1 or hybrid host, which never reads
    /// the hybrid's cgroup2 `cgroup.freeze`). `None` when the process is gone or has no
    /// freezer.
    pub fn of(pid: Pid) -> Option<Freezer> {
        let root = Path::new(crate::sys::cgroup::ROOT);
        let procs = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let v2 = crate::sys::cgroup::is_v2(root);
        let dir = if v2 {
            crate::sys::cgroup::v2_dir_of(root, pid.as_raw())?
        } else {
            v1_dir(root, &procs, || {
                crate::sys::cgroup_mounts::read().unwrap_or_default()
            })?
        };
        Some(Freezer { dir, v2 })
    }

    /// Whether this cgroup itself is frozen or freezing (paused), not only under a
    /// frozen ancestor: v1 `freezer.self_freezing` 1 (runc 1.1.5's `GetState`; without
    /// that file, `freezer.state` FROZEN or FREEZING), v2 `cgroup.freeze` 1. runc
    /// waits for FREEZING to settle (forever when a task cannot freeze); siloc takes
    /// a freeze under way as paused at once. `None` when unreadable (cgroup gone).
    pub fn self_frozen(&self) -> Option<bool> {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).ok();
        if self.v2 {
            return match read("cgroup.freeze")?.trim() {
                "1" => Some(true),
                "0" => Some(false),
                _ => None,
            };
        }
        match read("freezer.self_freezing").as_deref().map(str::trim) {
            Some("1") => Some(true),
            Some("0") => Some(false),
            _ => match read("freezer.state")?.trim() {
                "FROZEN" | "FREEZING" => Some(true),
                "THAWED" => Some(false),
                _ => None,
            },
        }
    }

    /// Thaws this cgroup (v1 `freezer.state` THAWED, v2 `cgroup.freeze` 0), as runc
    /// does after a SIGKILL to a paused container on either version.
    ///
    /// Errors: the write's, with the file's path.
    pub fn thaw(&self) -> Result<(), crate::sys::fs::IoAt> {
        let (file, value) = if self.v2 {
            ("cgroup.freeze", "0")
        } else {
            ("freezer.state", "THAWED")
        };
        let path = self.dir.join(file);
        std::fs::write(&path, value).map_err(crate::sys::fs::io_at(&path))
    }
}

/// The v1 freezer directory under cgroup root `root` of the process whose
/// /proc/PID/cgroup is `procs`: `<root>/<controllers>/<path>` where that hierarchy is
/// mounted there (systemd's layout), else below the freezer hierarchy's mount point
/// in `mounts()`.
fn v1_dir(root: &Path, procs: &str, mounts: impl FnOnce() -> Vec<Mount>) -> Option<PathBuf> {
    let (ctl, path) = procs.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        ctl.split(',')
            .any(|c| c == "freezer")
            .then_some((ctl, path))
    })?;
    let rel = path.trim_start_matches('/');
    let conventional = root.join(ctl);
    if conventional.join("cgroup.procs").exists() {
        return Some(conventional.join(rel));
    }
    mounts()
        .into_iter()
        .find(|m| m.fs_type == "cgroup" && m.super_options.iter().any(|o| o == "freezer"))
        .map(|m| m.mount_point.join(rel))
}

/// Sets live container `c`'s status from its own freezer as runc 1.1.5 reports it:
/// a created or running container whose cgroup is itself frozen is `paused`; a
/// `paused` one whose cgroup is thawed is `running`. In memory only (libcontainer
/// saves what its commands do). A stopped container, or one whose freezer cannot be
/// read, keeps its status.
pub fn align_status(c: &mut Container) {
    let status = c.status();
    if !matches!(
        status,
        ContainerStatus::Created | ContainerStatus::Running | ContainerStatus::Paused
    ) {
        return;
    }
    let Some(frozen) = c.pid().and_then(Freezer::of).and_then(|f| f.self_frozen()) else {
        return;
    };
    match (frozen, status) {
        (true, ContainerStatus::Created | ContainerStatus::Running) => {
            c.set_status(ContainerStatus::Paused);
        }
        (false, ContainerStatus::Paused) => {
            c.set_status(ContainerStatus::Running);
        }
        _ => {}
    }
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
        // a frozen cgroup bound elsewhere, later: not where the container's cgroup goes
        std::fs::write(own.join("cgroup.freeze"), "0\n").unwrap();
        let bound = t.path().join("elsewhere");
        std::fs::create_dir_all(&bound).unwrap();
        std::fs::write(bound.join("freezer.state"), "FROZEN\n").unwrap();
        let mut m = m;
        m.extend(crate::sys::mountinfo::parse(&format!(
            "40 23 0:30 /frozen {} rw - cgroup cgroup rw,freezer\n",
            bound.display()
        )));
        check(&m, "0::/me\n", Path::new("/pod/ctr")).unwrap();
    }

    #[test]
    fn a_containers_own_freezer_is_read_as_runc_reads_it() {
        let t = tempfile::tempdir().unwrap();
        let fz = t.path().join("freezer");
        std::fs::create_dir_all(fz.join("pod/ctr")).unwrap();
        std::fs::write(fz.join("cgroup.procs"), "").unwrap();
        let procs = "6:freezer:/pod/ctr\n4:memory:/x\n0::/pod/ctr\n";
        let dir = v1_dir(t.path(), procs, || panic!("no mountinfo needed")).unwrap();
        assert_eq!(dir, fz.join("pod/ctr"));
        let f = Freezer { dir, v2: false };
        assert_eq!(f.self_frozen(), None, "no freezer files: unknown");
        // Frozen through an ancestor only: runc 1.1.5 says thawed (not paused).
        std::fs::write(f.dir.join("freezer.state"), "FROZEN\n").unwrap();
        std::fs::write(f.dir.join("freezer.self_freezing"), "0\n").unwrap();
        assert_eq!(f.self_frozen(), Some(false));
        std::fs::write(f.dir.join("freezer.self_freezing"), "1\n").unwrap();
        assert_eq!(f.self_frozen(), Some(true));
        // A kernel without self_freezing: FREEZING counts as paused, not waited for.
        std::fs::remove_file(f.dir.join("freezer.self_freezing")).unwrap();
        std::fs::write(f.dir.join("freezer.state"), "FREEZING\n").unwrap();
        assert_eq!(f.self_frozen(), Some(true));
        f.thaw().unwrap();
        assert_eq!(
            std::fs::read_to_string(f.dir.join("freezer.state")).unwrap(),
            "THAWED"
        );
        assert_eq!(f.self_frozen(), Some(false));
        // The freezer hierarchy mounted elsewhere: found in mountinfo.
        let other = tempfile::tempdir().unwrap();
        let m = crate::sys::mountinfo::parse(&format!(
            "30 23 0:30 / {}/fz rw - cgroup cgroup rw,freezer\n",
            other.path().display()
        ));
        let dir = v1_dir(other.path(), procs, || m).unwrap();
        assert_eq!(dir, other.path().join("fz/pod/ctr"));
        assert_eq!(v1_dir(t.path(), "0::/pod/ctr\n", Vec::new), None);
        // v2: cgroup.freeze
        let f = Freezer {
            dir: t.path().join("v2"),
            v2: true,
        };
        std::fs::create_dir_all(&f.dir).unwrap();
        assert_eq!(f.self_frozen(), None);
        std::fs::write(f.dir.join("cgroup.freeze"), "1\n").unwrap();
        assert_eq!(f.self_frozen(), Some(true));
        f.thaw().unwrap();
        assert_eq!(f.self_frozen(), Some(false));
    }
}
