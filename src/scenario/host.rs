//! Host facts and host-wide actions of a scenario run: memory, free space, dropping
//! the page cache between phases, and the cgroup v1 hugetlb hierarchy crun needs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::counters::{self, CgroupIo, Disk};

/// Errors of host actions; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Counters(#[from] counters::CountersError),
}

/// What the report says about the machine the figures come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub kernel: String,
    pub cpus: usize,
    /// Bytes.
    pub mem_total: u64,
    pub cgroup_io: CgroupIo,
    /// The disk under test (the target directory's).
    pub disk: Disk,
    /// The disk's I/O scheduler (`[mq-deadline]` → `mq-deadline`), when sysfs has it.
    pub scheduler: Option<String>,
}

/// Gathers [`HostFacts`] for a run whose target directory is `target`.
pub fn facts(target: &Path) -> Result<HostFacts, HostError> {
    let host = Path::new("/");
    let disk = counters::disk_of(host, target)?;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let sched = std::fs::read_to_string(format!("/sys/block/{}/queue/scheduler", disk.name))
        .ok()
        .and_then(|s| {
            let open = s.find('[')?;
            let close = s[open..].find(']')? + open;
            Some(s[open + 1..close].to_string())
        });
    Ok(HostFacts {
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        mem_total: mem_total(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default()),
        cgroup_io: counters::cgroup_io(host),
        disk,
        scheduler: sched,
    })
}

/// `MemTotal` of /proc/meminfo text, in bytes (0 when absent).
pub fn mem_total(meminfo: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Free bytes for root on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> Result<u64, HostError> {
    let st = nix::sys::statvfs::statvfs(dir).map_err(|e| HostError::Io {
        path: dir.to_path_buf(),
        source: e.into(),
    })?;
    Ok(st.blocks_free() * st.fragment_size())
}

/// Writes dirty pages out, then drops the page cache, dentries and inodes
/// (`echo 3 > /proc/sys/vm/drop_caches`, kernel doc admin-guide/sysctl/vm.rst), so each
/// phase starts cold.
pub fn drop_caches() -> Result<(), HostError> {
    nix::unistd::sync();
    let p = Path::new("/proc/sys/vm/drop_caches");
    std::fs::write(p, "3\n").map_err(|source| HostError::Io {
        path: p.to_path_buf(),
        source,
    })
}

/// crun 1.8 refuses a cgroup v1/v2 hybrid host unless a v1 hugetlb hierarchy is
/// mounted at /sys/fs/cgroup/hugetlb (hack/setup mounts it too). Mounts it when the
/// host is such a hybrid and the controller is free; returns whether it mounted. The
/// mount stays: it is host setup, and siloc never unmounts a cgroup hierarchy.
pub fn ensure_hugetlb_for_crun() -> Result<bool, HostError> {
    let cg = Path::new("/sys/fs/cgroup");
    let target = cg.join("hugetlb");
    let v2_root = crate::sys::cgroup::is_v2(cg);
    let cgroups = std::fs::read_to_string("/proc/cgroups").unwrap_or_default();
    let hugetlb_known = cgroups
        .lines()
        .any(|l| l.split_whitespace().next() == Some("hugetlb"));
    if v2_root || !cg.is_dir() || !hugetlb_known || crate::sys::mountinfo::is_mount_point(&target) {
        return Ok(false);
    }
    std::fs::create_dir_all(&target).map_err(|source| HostError::Io {
        path: target.clone(),
        source,
    })?;
    nix::mount::mount(
        Some("cgroup"),
        &target,
        Some("cgroup"),
        nix::mount::MsFlags::empty(),
        Some("hugetlb"),
    )
    .map_err(|e| HostError::Io {
        path: target.clone(),
        source: e.into(),
    })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_total_in_bytes() {
        assert_eq!(
            mem_total("MemTotal:       24597456 kB\nMemFree: 1 kB\n"),
            24597456 * 1024
        );
        assert_eq!(mem_total(""), 0);
    }
}
