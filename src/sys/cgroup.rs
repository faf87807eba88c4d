//! The host's cgroup layout (kernel doc `cgroup-v2.rst`, `cgroup-v1/`): whether a
//! cgroup root is a v2 (unified) hierarchy and which controllers it offers, and where
//! a process's v2 cgroup is. The root is a parameter so tests can use fixture trees.

use std::path::{Path, PathBuf};

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
