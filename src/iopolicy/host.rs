//! What the host offers for each I/O mechanism, per whole disk: what `siloc check`
//! shows, what the scenario runner checks before it measures a class, and the two
//! host-wide knobs siloc switches only when a person asks (`siloc check
//! --enable-iocost DISK`, `--scheduler DISK=NAME`), never at create.
//!
//! Sources: kernel cgroup-v2.rst ("IO Interface Files", "IO Latency", io.cost.qos),
//! block/bfq-iosched.c (bfq's weight files exist once bfq is registered, and count
//! only on a disk whose active scheduler is bfq), cgroup-v1 blkio-controller.rst.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{CgroupIo, IoLimits, Scheduler, read_scheduler};
use crate::numa::locality::DevNum;

/// Errors switching a host-wide knob; each names the file written.
#[derive(Debug, thiserror::Error)]
pub enum HostKnobError {
    #[error("{disk}: no such block device under {sysfs}")]
    NoDisk { disk: String, sysfs: PathBuf },
    #[error(
        "{disk}: scheduler {want:?} is not offered (it offers: {offered}); for bfq: modprobe bfq"
    )]
    NotOffered {
        disk: String,
        want: String,
        offered: String,
    },
    #[error("{path}: no such file: io.cost needs cgroup v2 and a kernel with blk-iocost")]
    NoIoCost { path: PathBuf },
    #[error("write {line:?} to {path}: {source}")]
    Write {
        path: PathBuf,
        line: String,
        source: std::io::Error,
    },
}

/// One mechanism on one disk: whether a class using it takes effect, and if not,
/// what is missing and the host command that would provide it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offer {
    /// `limits` (io.max / blkio.throttle), `latency` (io.latency), `weight`
    /// (io.cost's io.weight, or bfq's weight).
    pub mechanism: &'static str,
    /// The cgroup files a class writes for it on this host.
    pub files: &'static str,
    pub available: bool,
    /// What is missing, naming the disk; `None` when available.
    pub missing: Option<String>,
}

/// A whole disk and what it offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiskOffers {
    pub disk: String,
    pub dev: String,
    /// Active scheduler, `None` when the disk has no queue file.
    pub scheduler: Option<String>,
    pub offers: Vec<Offer>,
}

/// The whole disks under `sysfs/block` with a `dev` file, in name order, except
/// loop, ram and zram devices.
pub fn whole_disks(sysfs: &Path) -> Vec<(String, DevNum)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(sysfs.join("block")) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p)) {
                continue;
            }
            let dev = std::fs::read_to_string(e.path().join("dev"))
                .ok()
                .and_then(|t| DevNum::parse(t.trim()));
            if let Some(dev) = dev {
                out.push((name, dev));
            }
        }
    }
    out.sort();
    out
}

/// What `disk` (`dev`, scheduler `sched`) offers under `cgroup`: the three
/// mechanisms, each available or with what is missing.
pub fn offers(cgroup: &CgroupIo, disk: &str, dev: DevNum, sched: Option<&Scheduler>) -> Vec<Offer> {
    let limits = match cgroup {
        CgroupIo::Missing => Offer {
            mechanism: "limits",
            files: "io.max / blkio.throttle.*",
            available: false,
            missing: Some("no io (v2) or blkio (v1) cgroup controller".into()),
        },
        CgroupIo::V1 { .. } => Offer {
            mechanism: "limits",
            files: "blkio.throttle.*",
            available: true,
            missing: None,
        },
        CgroupIo::V2 { .. } => Offer {
            mechanism: "limits",
            files: "io.max",
            available: true,
            missing: None,
        },
    };
    let latency = match cgroup {
        CgroupIo::V2 {
            iolatency: true, ..
        } => Offer {
            mechanism: "latency",
            files: "io.latency",
            available: true,
            missing: None,
        },
        CgroupIo::V2 { .. } => Offer {
            mechanism: "latency",
            files: "io.latency",
            available: false,
            missing: Some(format!(
                "{disk} ({dev}): this kernel's cgroup v2 has no io.latency (CONFIG_BLK_CGROUP_IOLATENCY)"
            )),
        },
        _ => Offer {
            mechanism: "latency",
            files: "io.latency",
            available: false,
            missing: Some(format!(
                "{disk} ({dev}): io.latency needs cgroup v2 (this host: {})",
                cgroup.word()
            )),
        },
    };
    let bfq_active = sched.is_some_and(|s| s.active == "bfq");
    let bfq_offered = sched.is_some_and(|s| s.bfq_available);
    let (iocost_built, iocost_on) = match cgroup {
        CgroupIo::V2 {
            iocost, iocost_on, ..
        } => (*iocost, iocost_on.contains(&dev)),
        _ => (false, false),
    };
    let weight_files = match (cgroup, bfq_active) {
        (CgroupIo::V1 { .. }, _) => "blkio.bfq.weight",
        (CgroupIo::V2 { .. }, true) => "io.bfq.weight",
        (CgroupIo::V2 { .. }, false) => "io.weight (io.cost)",
        _ => "-",
    };
    let weight = if matches!(cgroup, CgroupIo::Missing) {
        Offer {
            mechanism: "weight",
            files: weight_files,
            available: false,
            missing: Some("no io (v2) or blkio (v1) cgroup controller".into()),
        }
    } else if bfq_active || iocost_on {
        Offer {
            mechanism: "weight",
            files: weight_files,
            available: true,
            missing: None,
        }
    } else {
        let active = sched.map_or("none", |s| s.active.as_str());
        let mut ways = Vec::new();
        if bfq_offered {
            ways.push(format!(
                "scheduler bfq (`siloc check --scheduler {disk}=bfq`)"
            ));
        } else {
            ways.push("scheduler bfq (modprobe bfq first)".to_string());
        }
        if iocost_built {
            ways.push(format!(
                "io.cost on the root (`siloc check --enable-iocost {disk}`)"
            ));
        }
        Offer {
            mechanism: "weight",
            files: weight_files,
            available: false,
            missing: Some(format!(
                "{disk} ({dev}) has scheduler {active} and no io.cost: a weight needs {}",
                ways.join(" or ")
            )),
        }
    };
    vec![limits, latency, weight]
}

/// What `limits` needs on `disk` that the host does not offer: one message per
/// missing mechanism, naming the disk and the missing piece. Empty: all applies.
pub fn unmet(
    limits: &IoLimits,
    cgroup: &CgroupIo,
    disk: &str,
    dev: DevNum,
    sched: Option<&Scheduler>,
) -> Vec<String> {
    let wants = |m: &str| match m {
        "limits" => super::IoKey::ALL.iter().any(|k| limits.get(*k).is_some()),
        "latency" => limits.latency.is_some(),
        "weight" => limits.weight.is_some(),
        _ => false,
    };
    offers(cgroup, disk, dev, sched)
        .into_iter()
        .filter(|o| wants(o.mechanism) && !o.available)
        .filter_map(|o| o.missing.map(|m| format!("{}: {m}", o.mechanism)))
        .collect()
}

/// Every whole disk of this host (`sysfs`, `cgroup_root`) and what it offers.
pub fn check(sysfs: &Path, cgroup_root: &Path) -> (CgroupIo, Vec<DiskOffers>) {
    let cgroup = CgroupIo::read(cgroup_root);
    let disks = whole_disks(sysfs)
        .into_iter()
        .map(|(name, dev)| {
            let sched = read_scheduler(sysfs, &name);
            DiskOffers {
                offers: offers(&cgroup, &name, dev, sched.as_ref()),
                scheduler: sched.map(|s| s.active),
                disk: name,
                dev: dev.to_string(),
            }
        })
        .collect();
    (cgroup, disks)
}

fn disk_dev(sysfs: &Path, disk: &str) -> Result<DevNum, HostKnobError> {
    std::fs::read_to_string(sysfs.join("block").join(disk).join("dev"))
        .ok()
        .filter(|_| !disk.contains('/') && !disk.starts_with('.'))
        .and_then(|t| DevNum::parse(t.trim()))
        .ok_or_else(|| HostKnobError::NoDisk {
            disk: disk.to_string(),
            sysfs: sysfs.to_path_buf(),
        })
}

fn write_line(path: &Path, line: &str) -> Result<(), HostKnobError> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .map_err(|source| HostKnobError::Write {
            path: path.to_path_buf(),
            line: line.to_string(),
            source,
        })
}

/// Host-wide: switches io.cost on for `disk` by writing `MAJ:MIN enable=1` to the
/// root's `io.cost.qos` (kernel cgroup-v2.rst "io.cost.qos"; the kernel's default
/// model and QoS apply until someone writes io.cost.model). Every cgroup's I/O to
/// the disk is then paced by io.cost. Returns the line written.
/// Errors: unknown disk, no io.cost.qos, the write.
pub fn enable_iocost(
    sysfs: &Path,
    cgroup_root: &Path,
    disk: &str,
) -> Result<String, HostKnobError> {
    let dev = disk_dev(sysfs, disk)?;
    let path = cgroup_root.join("io.cost.qos");
    if !path.exists() {
        return Err(HostKnobError::NoIoCost { path });
    }
    let line = format!("{dev} enable=1");
    write_line(&path, &line)?;
    Ok(line)
}

/// Host-wide: makes `want` the active scheduler of `disk`
/// (`/sys/block/DISK/queue/scheduler`, block/queue-sysfs.rst). Every process's I/O
/// to the disk then goes through it. Returns the previous one.
/// Errors: unknown disk, a scheduler the disk does not offer, the write.
pub fn set_scheduler(sysfs: &Path, disk: &str, want: &str) -> Result<String, HostKnobError> {
    disk_dev(sysfs, disk)?;
    let path = sysfs.join("block").join(disk).join("queue/scheduler");
    let now = read_scheduler(sysfs, disk).ok_or_else(|| HostKnobError::NoDisk {
        disk: disk.to_string(),
        sysfs: sysfs.to_path_buf(),
    })?;
    let offered = std::fs::read_to_string(&path).unwrap_or_default();
    let names: Vec<&str> = offered
        .split_whitespace()
        .map(|w| w.trim_matches(|c| c == '[' || c == ']'))
        .collect();
    if !names.contains(&want) {
        return Err(HostKnobError::NotOffered {
            disk: disk.to_string(),
            want: want.to_string(),
            offered: names.join(" "),
        });
    }
    write_line(&path, want)?;
    Ok(now.active)
}
