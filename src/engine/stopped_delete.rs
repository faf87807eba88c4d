//! `delete` of a stopped container on a cgroup v1 (legacy or hybrid) host without
//! libcontainer's per-controller mount-table reads.
//!
//! libcontainer's delete builds a libcgroups v1 manager to remove the container's
//! cgroups, and that manager opens and parses /proc/self/mountinfo and
//! /proc/self/cgroup once per controller, each through a hardened procfs handle:
//! 24 opens and about 550 system calls for one delete (strace -c). For the common
//! case (status stopped, no poststop hooks, no Intel RDT, cgroupfs driver) siloc does
//! the same steps itself with one read of each file: for every controller libcgroups
//! handles, the cgroup below the mount libcgroups would pick (the first `cgroup`
//! mount whose mount point ends in the controller's name, `cpu,cpuacct` and
//! `net_cls,net_prio` as co-mounts; present in /proc/self/cgroup), kill what is left
//! in it, rmdir it with libcgroups' retries, then remove libcontainer's state
//! directory. Everything else goes through libcontainer's delete.

use std::path::{Path, PathBuf};
use std::time::Duration;

use libcontainer::config::YoukiConfig;
use libcontainer::container::{Container, ContainerStatus};

/// Errors of the fast path, each naming the file or cgroup.
#[derive(Debug, thiserror::Error)]
pub enum StoppedDeleteError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("cgroup {0} still busy after retries")]
    Busy(PathBuf),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoppedDeleteError + '_ {
    move |err| StoppedDeleteError::Io {
        path: path.to_path_buf(),
        err,
    }
}

/// Deletes `c` when the fast path applies and returns `Some` with the outcome; `None`
/// when libcontainer's delete must run instead (the caller then calls it). `paths` are
/// the container's v1 cgroup dirs, [`super::v1_subcgroups::dirs_of`].
pub fn try_delete(c: &Container, paths: &[PathBuf]) -> Option<Result<(), StoppedDeleteError>> {
    // No dirs: the mount table could not be read, libcontainer's delete finds them.
    if paths.is_empty()
        || c.status() != ContainerStatus::Stopped
        || c.systemd()
        || c.intel_rdt_dir().is_some()
        || c.intel_rdt_monitoring_dir().is_some()
    {
        return None;
    }
    if !matches!(
        libcgroups::common::get_cgroup_setup(),
        Ok(libcgroups::common::CgroupSetup::Legacy | libcgroups::common::CgroupSetup::Hybrid)
    ) {
        return None;
    }
    let config = YoukiConfig::load(&c.root).ok()?;
    if config
        .hooks
        .as_ref()
        .and_then(|h| h.poststop().as_ref())
        .is_some_and(|p| !p.is_empty())
    {
        return None;
    }
    Some(remove(paths).and_then(|()| {
        crate::lifecycle::test_hooks::crash_point("delete-after-cgroups");
        std::fs::remove_dir_all(&c.root).map_err(io(&c.root))
    }))
}

/// The cgroup dirs libcgroups' v1 manager would remove for `cgroup_path`: one per
/// controller that has a mount (see the module doc) and a line in /proc/self/cgroup
/// (`own`), deduplicated (co-mounted controllers share one dir).
pub fn cgroup_paths(
    mounts: &[crate::sys::mountinfo::Mount],
    own: &str,
    cgroup_path: &Path,
) -> Vec<PathBuf> {
    use crate::sys::cgroup::{LIBCGROUPS_V1, joins, libcgroups_v1_mount};
    let rel = cgroup_path.strip_prefix("/").unwrap_or(cgroup_path);
    let mut out: Vec<PathBuf> = Vec::new();
    for ctl in LIBCGROUPS_V1 {
        let Some(mp) = libcgroups_v1_mount(mounts, ctl) else {
            continue;
        };
        if !joins(own, ctl) {
            continue;
        }
        let p = mp.join(rel);
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// For each existing dir: SIGKILL what its cgroup.procs lists, then rmdir with
/// libcgroups' retries (4 tries, 10 ms then growing delays).
fn remove(paths: &[PathBuf]) -> Result<(), StoppedDeleteError> {
    for p in paths {
        if !p.exists() {
            continue;
        }
        let procs = p.join("cgroup.procs");
        let list = std::fs::read_to_string(&procs).map_err(io(&procs))?;
        for pid in list.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // Sub-cgroups the container's processes made (v1_subcgroups) go first.
        super::v1_subcgroups::remove_below(std::slice::from_ref(p)).map_err(|e| match e {
            super::v1_subcgroups::SubCgroupError::Io { path, err } => {
                StoppedDeleteError::Io { path, err }
            }
            super::v1_subcgroups::SubCgroupError::Busy(p) => StoppedDeleteError::Busy(p),
        })?;
        let mut delay = Duration::from_millis(10);
        let mut done = false;
        for attempt in 1..=4u32 {
            if std::fs::remove_dir(p).is_ok() {
                done = true;
                break;
            }
            std::thread::sleep(delay);
            delay = (delay * attempt).min(Duration::from_millis(100));
        }
        if !done {
            return Err(StoppedDeleteError::Busy(p.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 31 0:32 / /sys/fs/cgroup/net_cls,net_prio rw,relatime - cgroup cgroup rw,net_cls,net_prio
36 31 0:33 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
37 31 0:34 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
38 31 0:35 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
";
    const OWN: &str = "\
5:pids:/
4:net_cls,net_prio:/
3:memory:/
2:cpu,cpuacct:/
1:name=systemd:/
0::/
";

    #[test]
    fn one_dir_per_mounted_joined_controller() {
        let got = cgroup_paths(
            &crate::sys::mountinfo::parse(MOUNTINFO),
            OWN,
            Path::new("/siloc-x"),
        );
        let want: Vec<PathBuf> = [
            "/sys/fs/cgroup/cpu,cpuacct/siloc-x",
            "/sys/fs/cgroup/memory/siloc-x",
            "/sys/fs/cgroup/pids/siloc-x",
            "/sys/fs/cgroup/net_cls,net_prio/siloc-x",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn controller_missing_from_own_cgroups_is_skipped() {
        let got = cgroup_paths(
            &crate::sys::mountinfo::parse(MOUNTINFO),
            "3:memory:/\n",
            Path::new("a/b"),
        );
        assert_eq!(got, vec![PathBuf::from("/sys/fs/cgroup/memory/a/b")]);
    }
}
