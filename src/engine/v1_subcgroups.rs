//! Sub-cgroups of a container's cgroup on cgroup v1, removed on `delete`.
//!
//! libcontainer gap covered: libcgroups 0.7's v1 manager removes a container's cgroup
//! with one `rmdir` per hierarchy (after a SIGKILL to what the top cgroup.procs
//! lists), so a cgroup the container's processes made below their own (a nested
//! runtime, systemd in the container, `exec --cgroup`) makes the `rmdir` fail with
//! EBUSY and `delete --force` fail, with the processes in it left alive. runc removes
//! the tree bottom-up (its cgroups.RemovePath). siloc does that below the container's
//! own cgroup directory only: the walk starts at each hierarchy's directory for the
//! container's cgroupsPath, which libcontainer made for it, never above it, and does
//! not follow symlinks. Delete this module when libcgroups removes sub-cgroups.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Errors while removing sub-cgroups, naming the cgroup.
#[derive(Debug, thiserror::Error)]
pub enum SubCgroupError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("cgroup {0} still busy after retries")]
    Busy(PathBuf),
}

/// For each dir of `dirs` (a container's cgroup in each v1 hierarchy): SIGKILLs the
/// processes of every cgroup below it and removes those cgroups, deepest first. The
/// dirs themselves stay (libcontainer removes them). A missing dir is skipped.
///
/// Errors: a sub-cgroup that cannot be read, or that stays busy through the retries
/// (4 tries, 10 ms then growing delays, as libcgroups' own).
pub fn remove_below(dirs: &[PathBuf]) -> Result<(), SubCgroupError> {
    for d in dirs {
        // A container at the hierarchy's root would be the whole host: never walk it.
        if d.parent().is_none() || !d.is_dir() {
            continue;
        }
        for child in subdirs(d)? {
            remove_tree(&child)?;
        }
    }
    Ok(())
}

/// rmdir(2) of cgroup `dir`; when that fails (EBUSY: it holds processes or
/// sub-cgroups, cgroups(7)), rmdir of every empty cgroup below it, deepest first, and
/// of `dir` again, as runc's cgroups.RemovePath walks. Nothing is killed: a busy
/// cgroup stays, and so does every one above it.
///
/// Errors: the last rmdir of `dir` (NotFound when it was already gone).
pub fn remove_empty_tree(dir: &Path) -> std::io::Result<()> {
    if std::fs::remove_dir(dir).is_ok() {
        return Ok(());
    }
    for child in subdirs(dir).unwrap_or_default() {
        let _ = remove_empty_tree(&child);
    }
    std::fs::remove_dir(dir)
}

pub(super) fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, SubCgroupError> {
    let io = |err| SubCgroupError::Io {
        path: dir.to_path_buf(),
        err,
    };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let e = e.map_err(io)?;
        // file_type does not follow symlinks.
        if e.file_type().map_err(io)?.is_dir() {
            out.push(e.path());
        }
    }
    Ok(out)
}

fn remove_tree(dir: &Path) -> Result<(), SubCgroupError> {
    for child in subdirs(dir)? {
        remove_tree(&child)?;
    }
    let mut delay = Duration::from_millis(10);
    for attempt in 1..=4u32 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(_) => {}
        }
        std::thread::sleep(delay);
        delay = (delay * attempt).min(Duration::from_millis(100));
    }
    Err(SubCgroupError::Busy(dir.to_path_buf()))
}

/// The v1 directories of container `c`'s cgroup (cgroupfs driver, legacy or hybrid
/// host), as libcgroups' v1 manager finds them; empty on cgroup v2, with the systemd
/// driver, or when libcontainer's config cannot be read.
pub fn dirs_of(c: &libcontainer::container::Container) -> Vec<PathBuf> {
    if c.systemd()
        || !matches!(
            libcgroups::common::get_cgroup_setup(),
            Ok(libcgroups::common::CgroupSetup::Legacy | libcgroups::common::CgroupSetup::Hybrid)
        )
    {
        return Vec::new();
    }
    let Ok(config) = libcontainer::config::YoukiConfig::load(&c.root) else {
        return Vec::new();
    };
    let Ok(own) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    let Ok(mounts) = crate::sys::cgroup_mounts::read_with(&own) else {
        return Vec::new();
    };
    super::stopped_delete::cgroup_paths(&mounts, &own, &config.cgroup_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_lies_below_is_removed() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("ctr");
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        std::fs::create_dir_all(top.join("c")).unwrap();
        std::fs::create_dir_all(t.path().join("sibling")).unwrap();
        // a symlink to a directory outside is not followed
        std::os::unix::fs::symlink(t.path().join("sibling"), top.join("link")).unwrap();
        let _ = remove_below(std::slice::from_ref(&top));
        assert!(top.is_dir());
        assert!(!top.join("a").exists() && !top.join("c").exists());
        assert!(t.path().join("sibling").is_dir());
    }

    #[test]
    fn an_empty_tree_goes_and_a_busy_branch_keeps_its_parents() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("ctr");
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        std::fs::create_dir_all(top.join("c")).unwrap();
        // a file stands for a cgroup's processes: its dir cannot be removed
        std::fs::write(top.join("c/busy"), "").unwrap();
        assert!(remove_empty_tree(&top).is_err());
        assert!(!top.join("a").exists());
        assert!(top.join("c/busy").exists());
        std::fs::remove_file(top.join("c/busy")).unwrap();
        remove_empty_tree(&top).unwrap();
        assert!(!top.exists());
        assert_eq!(
            remove_empty_tree(&top).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
}
