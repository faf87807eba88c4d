//! The host's cgroup layout (kernel doc `cgroup-v2.rst`, `cgroup-v1/`): whether a
//! cgroup root is a v2 (unified) hierarchy and which controllers it offers, the
//! hierarchies in a mount table, and where a process's cgroup is in each. The root and
//! the mount table are parameters so tests can use fixtures.

use std::path::{Path, PathBuf};

use crate::sys::mountinfo::Mount;

/// The default cgroup root.
pub(crate) const ROOT: &str = "/sys/fs/cgroup";

/// The controllers of a cgroup v2 root (`cgroup.controllers`), or `None` when `root`
/// is not a v2 hierarchy (cgroup v1, or the v1/v2 hybrid whose root is a tmpfs of v1
/// hierarchies).
pub(crate) fn v2_controllers(root: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
    Some(text.split_whitespace().map(str::to_string).collect())
}

/// Whether `root` is a cgroup v2 hierarchy.
pub(crate) fn is_v2(root: &Path) -> bool {
    root.join("cgroup.controllers").exists()
}

/// The cgroup v2 directory of process `pid` under `root`, from the `0::` line of
/// `/proc/PID/cgroup` (cgroups(7)); right for the cgroupfs and systemd drivers alike.
/// `None` when the process is gone or has no v2 cgroup.
pub(crate) fn v2_dir_of(root: &Path, pid: i32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(root.join(rel.trim().trim_start_matches('/')))
}

/// One cgroup hierarchy of the host: its mount point, its v1 controllers (or its
/// `name=` for a named one), whether it is the cgroup2 one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    pub mount_point: PathBuf,
    /// v1: the controllers (`cpu`, `cpuacct`) or `name=systemd`; empty for cgroup2.
    pub controllers: Vec<String>,
    pub v2: bool,
}

impl Hierarchy {
    /// A named v1 hierarchy (no controllers, `name=...`).
    pub fn named(&self) -> bool {
        self.controllers.iter().any(|c| c.starts_with("name="))
    }
}

/// v1 controllers of the kernel (cgroup-v1/*.rst); a mount's super options also hold
/// `rw` and such.
const V1_CONTROLLERS: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// The v1 controllers libcgroups 0.7's v1 manager handles (its `CONTROLLERS`), in its
/// order.
pub(crate) const LIBCGROUPS_V1: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "devices",
    "hugetlb",
    "memory",
    "pids",
    "perf_event",
    "blkio",
    "net_prio",
    "net_cls",
    "freezer",
];

/// The mount point libcgroups 0.7 takes for v1 controller `ctl`
/// (`get_subsystem_mount_point`): the first `cgroup` mount of `mounts` whose mount
/// point ends, in whole components, in the controller's name, or in `cpu,cpuacct` for
/// `cpu` and `cpuacct`, or `net_cls,net_prio` / `net_prio,net_cls` for those two. It
/// need not be the hierarchy's first mount ([`hierarchies`]).
pub(crate) fn libcgroups_v1_mount<'a>(mounts: &'a [Mount], ctl: &str) -> Option<&'a Path> {
    let names: &[&str] = match ctl {
        "net_cls" => &["net_cls,net_prio", "net_prio,net_cls", "net_cls"],
        "net_prio" => &["net_cls,net_prio", "net_prio,net_cls", "net_prio"],
        "cpu" => &["cpu,cpuacct", "cpu"],
        "cpuacct" => &["cpu,cpuacct", "cpuacct"],
        _ => std::slice::from_ref(&ctl),
    };
    mounts
        .iter()
        .filter(|m| m.fs_type == "cgroup")
        .map(|m| m.mount_point.as_path())
        .find(|mp| names.iter().any(|n| mp.ends_with(n)))
}

/// Whether process-cgroup file `own` (/proc/PID/cgroup, lines `N:controllers:path`)
/// has a v1 line with controller `ctl`.
pub(crate) fn joins(own: &str, ctl: &str) -> bool {
    own.lines().any(|l| {
        l.split(':')
            .nth(1)
            .is_some_and(|cs| cs.split(',').any(|x| x == ctl))
    })
}

/// The cgroup hierarchies in `mounts` (each once, the first mount of it).
pub fn hierarchies(mounts: &[Mount]) -> Vec<Hierarchy> {
    let mut out: Vec<Hierarchy> = Vec::new();
    for m in mounts {
        let h = match m.fs_type.as_str() {
            "cgroup2" => Hierarchy {
                mount_point: m.mount_point.clone(),
                controllers: Vec::new(),
                v2: true,
            },
            "cgroup" => Hierarchy {
                mount_point: m.mount_point.clone(),
                controllers: m
                    .super_options
                    .iter()
                    .filter(|o| V1_CONTROLLERS.contains(&o.as_str()) || o.starts_with("name="))
                    .cloned()
                    .collect(),
                v2: false,
            },
            _ => continue,
        };
        if !out
            .iter()
            .any(|o| o.v2 == h.v2 && o.controllers == h.controllers)
        {
            out.push(h);
        }
    }
    out
}

/// The path of process-cgroup file `own` (/proc/PID/cgroup) in hierarchy `h`.
pub fn path_in(own: &str, h: &Hierarchy) -> Option<String> {
    own.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        let hit = if h.v2 {
            ctl.is_empty()
        } else {
            !ctl.is_empty() && ctl.split(',').eq(h.controllers.iter().map(String::as_str))
        };
        hit.then(|| path.to_string())
    })
}

/// The v1 directory of controller `ctl` of process `pid`, when the host has a v1
/// hierarchy with it.
pub fn v1_dir_of(mounts: &[Mount], pid: i32, ctl: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let h = hierarchies(mounts)
        .into_iter()
        .find(|h| !h.v2 && h.controllers.iter().any(|c| c == ctl))?;
    let rel = path_in(&own, &h)?;
    Some(h.mount_point.join(rel.trim_start_matches('/')))
}

/// The directory of process `pid` for controller `ctl`: its v1 hierarchy's when the
/// host has one with `ctl`, else its cgroup v2 one (where `ctl`'s files are, when the
/// controller is enabled there).
pub fn controller_dir_of(mounts: &[Mount], pid: i32, ctl: &str) -> Option<PathBuf> {
    v1_dir_of(mounts, pid, ctl).or_else(|| {
        let h = hierarchies(mounts).into_iter().find(|h| h.v2)?;
        v2_dir_of(&h.mount_point, pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_root_has_controllers() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(v2_controllers(d.path()), None);
        assert!(!is_v2(d.path()));
        std::fs::write(d.path().join("cgroup.controllers"), "cpu io memory\n").unwrap();
        assert!(is_v2(d.path()));
        assert_eq!(
            v2_controllers(d.path()).unwrap(),
            vec!["cpu".to_string(), "io".into(), "memory".into()]
        );
    }
}
