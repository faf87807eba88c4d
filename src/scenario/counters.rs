//! The device's own counters, read beside fio's figures: `/proc/diskstats` of the
//! disk that holds the target directory, and a container's cgroup I/O statistics
//! (v1 `blkio.throttle.io_service_bytes_recursive`/`io_serviced_recursive`, v2
//! `io.stat`). Paths come from a host root so tests can point them at fixtures.
//!
//! Kernel doc: Documentation/admin-guide/iostats.rst (diskstats fields, sectors are
//! 512 bytes), cgroup-v1/blkio-controller.rst, cgroup-v2.rst "io.stat". Since Linux
//! 5.x the v1 throttle statistics count only on devices with a throttle limit set, so
//! a container without limits shows none there; diskstats always counts.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys::blockdev;

/// Errors finding or reading the counters; each names the file or directory.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    #[error("target {path}: {source}")]
    Stat {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "target {path} is on device {major}:{minor}, which is no block device (tmpfs or \
         overlay?): put scenario.target on the disk under test"
    )]
    NotBlock {
        path: PathBuf,
        major: u64,
        minor: u64,
    },
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: no line for disk {disk}")]
    NoDisk { path: PathBuf, disk: String },
}

/// The whole disk behind a directory: its kernel name (`vda`) and `major:minor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    pub name: String,
    pub major: u64,
    pub minor: u64,
}

/// Finds the whole disk holding `dir`: its device number, then sysfs
/// (`<host>/sys/dev/block/M:m`, a partition's parent directory is its disk).
pub fn disk_of(host: &Path, dir: &Path) -> Result<Disk, CountersError> {
    let meta = std::fs::metadata(dir).map_err(|source| CountersError::Stat {
        path: dir.to_path_buf(),
        source,
    })?;
    let dev = meta.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    disk_of_dev(host, dir, major, minor)
}

/// [`disk_of`] for a known device number.
pub fn disk_of_dev(host: &Path, dir: &Path, major: u64, minor: u64) -> Result<Disk, CountersError> {
    let not_block = || CountersError::NotBlock {
        path: dir.to_path_buf(),
        major,
        minor,
    };
    let dev = blockdev::DevNum::new(
        u32::try_from(major).map_err(|_| not_block())?,
        u32::try_from(minor).map_err(|_| not_block())?,
    );
    let real = blockdev::dev_dir(&host.join("sys"), dev).map_err(|_| not_block())?;
    let disk_dir = blockdev::whole_disk(&real);
    let disk = blockdev::read_dev(&disk_dir)
        .ok()
        .flatten()
        .ok_or_else(not_block)?;
    Ok(Disk {
        name: blockdev::name_of(&disk_dir),
        major: u64::from(disk.major),
        minor: u64::from(disk.minor),
    })
}

/// One disk's cumulative counters (iostats.rst fields 1, 3, 5, 7, 10).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskCounters {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    /// Milliseconds the disk was busy.
    pub io_ms: u64,
}

impl DiskCounters {
    /// `self - earlier`, saturating (counters wrap only on 32-bit kernels).
    pub fn since(&self, earlier: &DiskCounters) -> DiskCounters {
        DiskCounters {
            reads: self.reads.saturating_sub(earlier.reads),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            writes: self.writes.saturating_sub(earlier.writes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            io_ms: self.io_ms.saturating_sub(earlier.io_ms),
        }
    }
}

/// Reads `<host>/proc/diskstats` for `disk`.
pub fn read_disk(host: &Path, disk: &Disk) -> Result<DiskCounters, CountersError> {
    let path = host.join("proc/diskstats");
    let text = std::fs::read_to_string(&path).map_err(|source| CountersError::Read {
        path: path.clone(),
        source,
    })?;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 13 || f[2] != disk.name {
            continue;
        }
        let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
        return Ok(DiskCounters {
            reads: n(3),
            read_bytes: n(5) * 512,
            writes: n(7),
            write_bytes: n(9) * 512,
            io_ms: n(12),
        });
    }
    Err(CountersError::NoDisk {
        path,
        disk: disk.name.clone(),
    })
}

/// Which cgroup hierarchy holds the I/O controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupIo {
    /// cgroup v1 `blkio` at `/sys/fs/cgroup/blkio`: buffered writeback is charged to
    /// the root cgroup, so write limits do not hold for it.
    V1,
    /// cgroup v2 with the `io` controller.
    V2,
    None,
}

/// Detects the I/O controller's hierarchy under `<host>/sys/fs/cgroup`.
pub fn cgroup_io(host: &Path) -> CgroupIo {
    let cg = host.join("sys/fs/cgroup");
    let v2 = crate::sys::cgroup::v2_controllers(&cg).unwrap_or_default();
    if v2.iter().any(|c| c == "io") {
        CgroupIo::V2
    } else if cg
        .join("blkio/blkio.throttle.io_service_bytes_recursive")
        .exists()
        || cg.join("blkio").is_dir()
    {
        CgroupIo::V1
    } else {
        CgroupIo::None
    }
}

/// A container's cgroup I/O statistics on one disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupCounters {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
}

/// Reads the statistics of cgroup `path` (as in `linux.cgroupsPath`, absolute) for
/// `disk`. `None` when the cgroup or its files are missing (the container is gone,
/// or no controller).
pub fn read_cgroup(host: &Path, io: CgroupIo, path: &str, disk: &Disk) -> Option<CgroupCounters> {
    let rel = path.trim_start_matches('/');
    let dev = format!("{}:{}", disk.major, disk.minor);
    match io {
        CgroupIo::V2 => {
            let text =
                std::fs::read_to_string(host.join("sys/fs/cgroup").join(rel).join("io.stat"))
                    .ok()?;
            let mut c = CgroupCounters::default();
            for line in text
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(&dev))
            {
                for kv in line.split_whitespace().skip(1) {
                    let Some((k, v)) = kv.split_once('=') else {
                        continue;
                    };
                    let v: u64 = v.parse().unwrap_or(0);
                    match k {
                        "rbytes" => c.read_bytes = v,
                        "wbytes" => c.write_bytes = v,
                        "rios" => c.reads = v,
                        "wios" => c.writes = v,
                        _ => {}
                    }
                }
            }
            Some(c)
        }
        CgroupIo::V1 => {
            let dir = host.join("sys/fs/cgroup/blkio").join(rel);
            let bytes =
                std::fs::read_to_string(dir.join("blkio.throttle.io_service_bytes_recursive"))
                    .ok()?;
            let ios =
                std::fs::read_to_string(dir.join("blkio.throttle.io_serviced_recursive")).ok()?;
            let pick = |text: &str, op: &str| {
                text.lines()
                    .filter_map(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        (f.len() == 3 && f[0] == dev && f[1] == op)
                            .then(|| f[2].parse::<u64>().ok())?
                    })
                    .sum::<u64>()
            };
            Some(CgroupCounters {
                read_bytes: pick(&bytes, "Read"),
                write_bytes: pick(&bytes, "Write"),
                reads: pick(&ios, "Read"),
                writes: pick(&ios, "Write"),
            })
        }
        CgroupIo::None => None,
    }
}

/// Bytes of `file` resident in the host's page cache, from util-linux `fincore`
/// (mincore(2) over the file). After a phase that began with a dropped cache, a victim
/// whose O_DIRECT was honoured leaves (almost) none; a runtime that turned its I/O
/// into buffered I/O leaves what it touched. `None` when fincore is missing or fails.
pub fn page_cache_bytes(file: &Path) -> Option<u64> {
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(file)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake host root with a disk `vda` (254:0) and its partition `vda1` (254:1).
    fn host() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let disk = r.join("sys/devices/virtual/block/vda");
        std::fs::create_dir_all(disk.join("vda1")).unwrap();
        std::fs::write(disk.join("dev"), "254:0\n").unwrap();
        std::fs::write(disk.join("vda1/dev"), "254:1\n").unwrap();
        std::fs::write(disk.join("vda1/partition"), "1\n").unwrap();
        std::fs::create_dir_all(r.join("sys/dev/block")).unwrap();
        std::os::unix::fs::symlink(&disk, r.join("sys/dev/block/254:0")).unwrap();
        std::os::unix::fs::symlink(disk.join("vda1"), r.join("sys/dev/block/254:1")).unwrap();
        std::fs::create_dir_all(r.join("proc")).unwrap();
        std::fs::write(
            r.join("proc/diskstats"),
            " 253       0 zram0 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n \
             254       0 vda 100 5 2000 30 400 6 8000 70 0 90 100 0 0 0 0 0 0\n",
        )
        .unwrap();
        t
    }

    #[test]
    fn partitions_resolve_to_their_disk() {
        let h = host();
        let d = disk_of_dev(h.path(), Path::new("/x"), 254, 1).unwrap();
        assert_eq!(
            d,
            Disk {
                name: "vda".into(),
                major: 254,
                minor: 0
            }
        );
        assert_eq!(
            disk_of_dev(h.path(), Path::new("/x"), 254, 0).unwrap().name,
            "vda"
        );
        let e = disk_of_dev(h.path(), Path::new("/tmp/x"), 0, 42).unwrap_err();
        assert!(
            e.to_string().contains("/tmp/x") && e.to_string().contains("0:42"),
            "{e}"
        );
    }

    #[test]
    fn diskstats_in_bytes_and_deltas() {
        let h = host();
        let d = disk_of_dev(h.path(), Path::new("/x"), 254, 0).unwrap();
        let c = read_disk(h.path(), &d).unwrap();
        assert_eq!(
            c,
            DiskCounters {
                reads: 100,
                read_bytes: 2000 * 512,
                writes: 400,
                write_bytes: 8000 * 512,
                io_ms: 90
            }
        );
        let later = DiskCounters { reads: 150, ..c };
        assert_eq!(later.since(&c).reads, 50);
        assert_eq!(c.since(&later).reads, 0);
        let other = Disk {
            name: "vdb".into(),
            major: 254,
            minor: 16,
        };
        assert!(matches!(
            read_disk(h.path(), &other),
            Err(CountersError::NoDisk { .. })
        ));
    }

    #[test]
    fn cgroup_statistics_v1_and_v2() {
        let h = host();
        let disk = Disk {
            name: "vda".into(),
            major: 254,
            minor: 0,
        };
        let v1 = h.path().join("sys/fs/cgroup/blkio/siloc-scenario/c1");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(
            v1.join("blkio.throttle.io_service_bytes_recursive"),
            "254:0 Read 4096\n254:0 Write 8192\n254:0 Total 12288\n253:0 Write 5\nTotal 12293\n",
        )
        .unwrap();
        std::fs::write(
            v1.join("blkio.throttle.io_serviced_recursive"),
            "254:0 Read 1\n254:0 Write 2\n",
        )
        .unwrap();
        assert_eq!(cgroup_io(h.path()), CgroupIo::V1);
        let c = read_cgroup(h.path(), CgroupIo::V1, "/siloc-scenario/c1", &disk).unwrap();
        assert_eq!(
            c,
            CgroupCounters {
                read_bytes: 4096,
                write_bytes: 8192,
                reads: 1,
                writes: 2
            }
        );
        assert!(read_cgroup(h.path(), CgroupIo::V1, "/siloc-scenario/gone", &disk).is_none());

        let v2 = h.path().join("sys/fs/cgroup/siloc-scenario/c2");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(
            v2.join("io.stat"),
            "254:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n",
        )
        .unwrap();
        let c = read_cgroup(h.path(), CgroupIo::V2, "/siloc-scenario/c2", &disk).unwrap();
        assert_eq!(
            c,
            CgroupCounters {
                read_bytes: 10,
                write_bytes: 20,
                reads: 1,
                writes: 2
            }
        );
        std::fs::write(
            h.path().join("sys/fs/cgroup/cgroup.controllers"),
            "cpu io memory\n",
        )
        .unwrap();
        assert_eq!(cgroup_io(h.path()), CgroupIo::V2);
    }
}
