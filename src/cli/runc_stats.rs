//! The stats document of `siloc events` in runc's shape: runc 1.1.5's `types.Stats`
//! (types/events.go) as its `convertLibcontainerStats` (events.go) fills it from its
//! cgroup managers (libcontainer/cgroups/fs for v1, fs2 for v2). Scripts and tools
//! written for runc read these keys.
//!
//! Units as runc's: nanoseconds for CPU times, bytes for memory. Serialized with Go's
//! `encoding/json` rules: `omitempty` drops a zero number, an empty string, list or
//! map, never a struct; maps come out sorted by key (BTreeMap here).
//!
//! The figures come from libcgroups 0.7's `Stats`, converted where they differ from
//! runc's:
//! - v1: `cpuacct.stat`'s user and system time stay in USER_HZ ticks there; runc
//!   reports nanoseconds.
//! - v2: `cpu.stat`'s microseconds stay microseconds there; runc multiplies by 1000.
//!   The page cache is `memory.stat`'s `file`, swap is reported with memory as v1's
//!   `memsw` is (swap + memory usage and limits, runc's fs2/memory.go), `failcnt` is
//!   0 (v2 has none; libcgroups counts `oom` events) and so is the maximum (runc
//!   1.1.5 reports none; libcgroups reads `memory.peak`), the I/O operations are named
//!   `Read` and `Write` as v1 names them.
//!
//! and read from the cgroup files where libcgroups has no value runc reports: v1
//! `cpuset` (v2: runc 1.1.5 reports none, all zero) and v1 `blkio` (runc takes BFQ's
//! recursive files, then the throttle ones, recursive first; libcgroups reads the
//! non-recursive throttle files).
//!
//! Left out as runc leaves them out for a container made from a spec:
//! `network_interfaces` is `null` (runc reports only veth interfaces it configured
//! itself), `intel_rdt` is `{}` (libcontainer 0.7 reads no RDT figures).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use libcgroups::common::{AnyCgroupManager, AnyManagerError, CgroupManager};
use libcgroups::stats::{BlkioDeviceStat, MemoryData, Stats as LcStats};
use serde::Serialize;

use crate::numa::cpulist::CpuList;

/// Errors getting the figures: libcgroups', or reading the cgroup files libcgroups
/// does not read (naming the file).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RuncStatsError {
    #[error(transparent)]
    Cgroup(#[from] AnyManagerError),
    #[error("{path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: cannot parse {text:?}")]
    Parse { path: PathBuf, text: String },
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// runc's `types.Stats`.
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct Stats {
    pub cpu: Cpu,
    pub cpuset: CpuSet,
    pub memory: Memory,
    pub pids: Pids,
    pub blkio: Blkio,
    /// By page size (`2MB`, `1GB`).
    pub hugetlb: BTreeMap<String, Hugetlb>,
    pub intel_rdt: IntelRdt,
    /// Always `null`: see the module doc.
    pub network_interfaces: (),
}

/// runc's `types.Cpu`.
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct Cpu {
    pub usage: CpuUsage,
    pub throttling: Throttling,
}

/// runc's `types.CpuUsage`; all in nanoseconds.
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct CpuUsage {
    #[serde(skip_serializing_if = "is_zero")]
    pub total: u64,
    /// Per CPU (v1 only: `cpuacct.usage_percpu`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub percpu: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub percpu_kernel: Vec<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub percpu_user: Vec<u64>,
    pub kernel: u64,
    pub user: u64,
}

/// runc's `types.Throttling`; `throttledTime` in nanoseconds.
#[derive(Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Throttling {
    #[serde(skip_serializing_if = "is_zero")]
    pub periods: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub throttled_periods: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub throttled_time: u64,
}

/// runc's `types.CPUSet`: the v1 cpuset files (`cpuset.cpus` and `cpuset.mems` as
/// lists of numbers).
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct CpuSet {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u16>,
    pub cpu_exclusive: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mems: Vec<u16>,
    pub mem_hardwall: u64,
    pub mem_exclusive: u64,
    pub memory_migrate: u64,
    pub memory_spread_page: u64,
    pub memory_spread_slab: u64,
    pub memory_pressure: u64,
    pub sched_load_balance: u64,
    pub sched_relax_domain_level: i64,
}

/// runc's `types.MemoryEntry`; bytes (a limit of "max" is u64::MAX).
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct MemoryEntry {
    pub limit: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub usage: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max: u64,
    pub failcnt: u64,
}

/// runc's `types.Memory`; bytes.
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct Memory {
    #[serde(skip_serializing_if = "is_zero")]
    pub cache: u64,
    pub usage: MemoryEntry,
    /// Memory and swap together (v1 `memsw`; v2 added up as runc does).
    pub swap: MemoryEntry,
    pub kernel: MemoryEntry,
    #[serde(rename = "kernelTCP")]
    pub kernel_tcp: MemoryEntry,
    /// `memory.stat` as is.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub raw: BTreeMap<String, u64>,
}

/// runc's `types.Pids`; a limit of 0 is no limit.
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct Pids {
    #[serde(skip_serializing_if = "is_zero")]
    pub current: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub limit: u64,
}

/// runc's `types.BlkioEntry`: one line of a blkio file.
#[derive(Debug, Default, Serialize, PartialEq, Clone)]
pub(crate) struct BlkioEntry {
    #[serde(skip_serializing_if = "is_zero")]
    pub major: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub minor: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub op: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub value: u64,
}

/// runc's `types.Blkio` (its JSON names, `ioQueueRecursive` included).
#[derive(Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Blkio {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io_service_bytes_recursive: Vec<BlkioEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io_serviced_recursive: Vec<BlkioEntry>,
    #[serde(rename = "ioQueueRecursive", skip_serializing_if = "Vec::is_empty")]
    pub io_queued_recursive: Vec<BlkioEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io_service_time_recursive: Vec<BlkioEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io_wait_time_recursive: Vec<BlkioEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io_merged_recursive: Vec<BlkioEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub io_time_recursive: Vec<BlkioEntry>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sectors_recursive: Vec<BlkioEntry>,
}

/// runc's `types.Hugetlb`; bytes.
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct Hugetlb {
    #[serde(skip_serializing_if = "is_zero")]
    pub usage: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max: u64,
    pub failcnt: u64,
}

/// runc's `types.IntelRdt`, empty: see the module doc.
#[derive(Debug, Default, Serialize, PartialEq)]
pub(crate) struct IntelRdt {}

/// The parts of the document every layout fills the same way.
fn common(s: &LcStats) -> Stats {
    Stats {
        pids: Pids {
            current: s.pids.current,
            limit: s.pids.limit,
        },
        hugetlb: s
            .hugetlb
            .iter()
            .map(|(size, h)| {
                let h = Hugetlb {
                    usage: h.usage,
                    max: h.max_usage,
                    failcnt: h.fail_count,
                };
                (size.clone(), h)
            })
            .collect(),
        memory: Memory {
            raw: s
                .memory
                .stats
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            ..Memory::default()
        },
        ..Stats::default()
    }
}

fn entry(m: &MemoryData) -> MemoryEntry {
    MemoryEntry {
        limit: m.limit,
        usage: m.usage,
        max: m.max_usage,
        failcnt: m.fail_count,
    }
}

/// The document for a cgroup v1 container: libcgroups' figures `s`, the
/// `cpuacct.stat` tick length `clk_tck` (sysconf(_SC_CLK_TCK), USER_HZ), and the
/// cpuset and blkio figures read by [`read_v1_cpuset`] and [`read_v1_blkio`].
pub(crate) fn from_v1(s: &LcStats, clk_tck: u64, cpuset: CpuSet, blkio: Blkio) -> Stats {
    let u = &s.cpu.usage;
    let t = &s.cpu.throttling;
    let ticks_ns = |ticks: u64| {
        let ns = u128::from(ticks) * 1_000_000_000 / u128::from(clk_tck.max(1));
        u64::try_from(ns).unwrap_or(u64::MAX)
    };
    let mut out = common(s);
    out.cpu = Cpu {
        usage: CpuUsage {
            total: u.usage_total,
            percpu: u.per_core_usage_total.clone(),
            percpu_kernel: u.per_core_usage_kernel.clone(),
            percpu_user: u.per_core_usage_user.clone(),
            kernel: ticks_ns(u.usage_kernel),
            user: ticks_ns(u.usage_user),
        },
        throttling: Throttling {
            periods: t.periods,
            throttled_periods: t.throttled_periods,
            throttled_time: t.throttled_time,
        },
    };
    out.cpuset = cpuset;
    out.blkio = blkio;
    let m = &s.memory;
    out.memory.cache = m.cache;
    out.memory.usage = entry(&m.memory);
    out.memory.swap = entry(&m.memswap);
    out.memory.kernel = entry(&m.kernel);
    out.memory.kernel_tcp = entry(&m.kernel_tcp);
    out
}

/// The document for a cgroup v2 container from libcgroups' figures `s`.
pub(crate) fn from_v2(s: &LcStats) -> Stats {
    let u = &s.cpu.usage;
    let t = &s.cpu.throttling;
    let us_ns = |us: u64| us.saturating_mul(1000);
    let mut out = common(s);
    out.cpu = Cpu {
        usage: CpuUsage {
            total: us_ns(u.usage_total),
            kernel: us_ns(u.usage_kernel),
            user: us_ns(u.usage_user),
            ..CpuUsage::default()
        },
        throttling: Throttling {
            periods: t.periods,
            throttled_periods: t.throttled_periods,
            throttled_time: us_ns(t.throttled_time),
        },
    };
    let m = &s.memory;
    out.memory.cache = m.stats.get("file").copied().unwrap_or(0);
    out.memory.usage = MemoryEntry {
        limit: m.memory.limit,
        usage: m.memory.usage,
        // runc 1.1.5 has no maximum on v2 (1.2+ reports memory.peak, libcgroups' value)
        max: 0,
        failcnt: 0,
    };
    out.memory.swap = MemoryEntry {
        limit: if m.memswap.limit == u64::MAX {
            u64::MAX
        } else {
            m.memswap.limit.saturating_add(m.memory.limit)
        },
        usage: m.memswap.usage.saturating_add(m.memory.usage),
        max: 0,
        failcnt: 0,
    };
    let op = |d: &BlkioDeviceStat| match d.op_type.as_deref() {
        Some("read") => "Read".to_string(),
        Some("write") => "Write".to_string(),
        other => other.unwrap_or_default().to_string(),
    };
    let entries = |v: &[BlkioDeviceStat]| -> Vec<BlkioEntry> {
        let mut e: Vec<BlkioEntry> = v
            .iter()
            .map(|d| BlkioEntry {
                major: d.major,
                minor: d.minor,
                op: op(d),
                value: d.value,
            })
            .collect();
        // io.stat's order (libcgroups goes through a HashMap): by device, Read first
        e.sort_by(|a, b| (a.major, a.minor, &a.op).cmp(&(b.major, b.minor, &b.op)));
        e
    };
    out.blkio = Blkio {
        io_service_bytes_recursive: entries(&s.blkio.service_bytes),
        io_serviced_recursive: entries(&s.blkio.serviced),
        ..Blkio::default()
    };
    out
}

fn read(path: &Path) -> Result<Option<String>, RuncStatsError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RuncStatsError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The cpuset figures of v1 cpuset cgroup `dir`, as runc's fs/cpuset.go reads them:
/// a missing file reads as 0 (or an empty list).
pub(crate) fn read_v1_cpuset(dir: &Path) -> Result<CpuSet, RuncStatsError> {
    let text = |name: &str| -> Result<Option<(PathBuf, String)>, RuncStatsError> {
        let p = dir.join(name);
        Ok(read(&p)?.map(|t| (p, t.trim().to_string())))
    };
    let bad = |p: PathBuf, t: String| RuncStatsError::Parse { path: p, text: t };
    let list = |name: &str| -> Result<Vec<u16>, RuncStatsError> {
        let Some((p, t)) = text(name)? else {
            return Ok(Vec::new());
        };
        let ids = CpuList::parse(&t).map_err(|_| bad(p.clone(), t.clone()))?;
        ids.iter()
            .map(|i| u16::try_from(i).map_err(|_| bad(p.clone(), t.clone())))
            .collect()
    };
    let num = |name: &str| -> Result<i64, RuncStatsError> {
        match text(name)? {
            None => Ok(0),
            Some((p, t)) => t.parse().map_err(|_| bad(p, t)),
        }
    };
    let unum = |name: &str| -> Result<u64, RuncStatsError> { Ok(num(name)?.max(0).unsigned_abs()) };
    Ok(CpuSet {
        cpus: list("cpuset.cpus")?,
        cpu_exclusive: unum("cpuset.cpu_exclusive")?,
        mems: list("cpuset.mems")?,
        mem_hardwall: unum("cpuset.mem_hardwall")?,
        mem_exclusive: unum("cpuset.mem_exclusive")?,
        memory_migrate: unum("cpuset.memory_migrate")?,
        memory_spread_page: unum("cpuset.memory_spread_page")?,
        memory_spread_slab: unum("cpuset.memory_spread_slab")?,
        memory_pressure: unum("cpuset.memory_pressure")?,
        sched_load_balance: unum("cpuset.sched_load_balance")?,
        sched_relax_domain_level: num("cpuset.sched_relax_domain_level")?,
    })
}

/// The entries of one v1 blkio file (`MAJ:MIN [OP] VALUE` lines; the `Total N` line
/// left out), or `None` when the file is missing or lists nothing.
fn blkio_file(path: &Path) -> Result<Option<Vec<BlkioEntry>>, RuncStatsError> {
    let Some(text) = read(path)? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split([' ', ':']).filter(|s| !s.is_empty()).collect();
        let bad = || RuncStatsError::Parse {
            path: path.to_path_buf(),
            text: line.to_string(),
        };
        let n = |s: &str| s.parse::<u64>().map_err(|_| bad());
        match f.as_slice() {
            [] | ["Total", _] => continue,
            [maj, min, v] => out.push(BlkioEntry {
                major: n(maj)?,
                minor: n(min)?,
                op: String::new(),
                value: n(v)?,
            }),
            [maj, min, op, v] => out.push(BlkioEntry {
                major: n(maj)?,
                minor: n(min)?,
                op: (*op).to_string(),
                value: n(v)?,
            }),
            _ => return Err(bad()),
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// Which field of [`Blkio`] a file fills.
#[derive(Clone, Copy)]
enum Field {
    ServiceBytes,
    Serviced,
    Queued,
    ServiceTime,
    WaitTime,
    Merged,
    Time,
    Sectors,
}

/// runc's groups of v1 blkio files (fs/blkio.go), tried in this order: the first
/// group whose first file lists anything is taken, up to its first file that
/// lists nothing.
const BLKIO_GROUPS: &[&[(&str, Field)]] = &[
    // BFQ with CONFIG_BFQ_CGROUP_DEBUG
    &[
        ("blkio.bfq.sectors_recursive", Field::Sectors),
        ("blkio.bfq.io_service_time_recursive", Field::ServiceTime),
        ("blkio.bfq.io_wait_time_recursive", Field::WaitTime),
        ("blkio.bfq.io_merged_recursive", Field::Merged),
        ("blkio.bfq.io_queued_recursive", Field::Queued),
        ("blkio.bfq.time_recursive", Field::Time),
        ("blkio.bfq.io_serviced_recursive", Field::Serviced),
        ("blkio.bfq.io_service_bytes_recursive", Field::ServiceBytes),
    ],
    &[
        ("blkio.bfq.io_serviced_recursive", Field::Serviced),
        ("blkio.bfq.io_service_bytes_recursive", Field::ServiceBytes),
    ],
    // CFQ (kernels before 5.0)
    &[
        ("blkio.sectors_recursive", Field::Sectors),
        ("blkio.io_service_time_recursive", Field::ServiceTime),
        ("blkio.io_wait_time_recursive", Field::WaitTime),
        ("blkio.io_merged_recursive", Field::Merged),
        ("blkio.io_queued_recursive", Field::Queued),
        ("blkio.time_recursive", Field::Time),
        ("blkio.io_serviced_recursive", Field::Serviced),
        ("blkio.io_service_bytes_recursive", Field::ServiceBytes),
    ],
    &[
        ("blkio.throttle.io_serviced_recursive", Field::Serviced),
        (
            "blkio.throttle.io_service_bytes_recursive",
            Field::ServiceBytes,
        ),
    ],
    &[
        ("blkio.throttle.io_serviced", Field::Serviced),
        ("blkio.throttle.io_service_bytes", Field::ServiceBytes),
    ],
];

/// The blkio figures of v1 blkio cgroup `dir`, from the files runc reads
/// ([`BLKIO_GROUPS`]). On kernels 5.x and later the throttle files count only I/O to
/// devices with a throttle limit, the BFQ ones only I/O to BFQ devices.
pub(crate) fn read_v1_blkio(dir: &Path) -> Result<Blkio, RuncStatsError> {
    let mut b = Blkio::default();
    for group in BLKIO_GROUPS {
        for (i, (file, field)) in group.iter().enumerate() {
            let Some(entries) = blkio_file(&dir.join(file))? else {
                if i == 0 {
                    break;
                }
                return Ok(b);
            };
            *match field {
                Field::ServiceBytes => &mut b.io_service_bytes_recursive,
                Field::Serviced => &mut b.io_serviced_recursive,
                Field::Queued => &mut b.io_queued_recursive,
                Field::ServiceTime => &mut b.io_service_time_recursive,
                Field::WaitTime => &mut b.io_wait_time_recursive,
                Field::Merged => &mut b.io_merged_recursive,
                Field::Time => &mut b.io_time_recursive,
                Field::Sectors => &mut b.sectors_recursive,
            } = entries;
            if i == group.len() - 1 {
                return Ok(b);
            }
        }
    }
    Ok(b)
}

/// Where a container's figures come from: its cgroup manager (libcgroups), and on
/// cgroup v1 the init's cpuset and blkio directories, found once.
pub(crate) struct Source {
    manager: AnyCgroupManager,
    /// `None` on cgroup v2 (libcgroups' v2 and systemd managers).
    v1: Option<V1Dirs>,
    clk_tck: u64,
}

struct V1Dirs {
    cpuset: Option<PathBuf>,
    blkio: Option<PathBuf>,
}

impl Source {
    /// The source for the container whose cgroup `manager` handles and whose init is
    /// `pid` (its v1 directories read from /proc/PID/cgroup and the host's mount
    /// table; a controller it is not in reads as runc reads a missing one: zero).
    pub(crate) fn new(manager: AnyCgroupManager, pid: Option<i32>) -> Source {
        let v1 = matches!(manager, AnyCgroupManager::V1(_)).then(|| {
            let mounts = crate::sys::cgroup_mounts::read().unwrap_or_default();
            let dir = |ctl| pid.and_then(|p| crate::sys::cgroup::v1_dir_of(&mounts, p, ctl));
            V1Dirs {
                cpuset: dir("cpuset"),
                blkio: dir("blkio"),
            }
        });
        // USER_HZ: 100 on every Linux architecture siloc builds for
        let clk_tck = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(100);
        Source {
            manager,
            v1,
            clk_tck,
        }
    }

    /// The container's figures now, in runc's shape.
    pub(crate) fn collect(&self) -> Result<Stats, RuncStatsError> {
        let s = self.manager.stats()?;
        let Some(v1) = &self.v1 else {
            return Ok(from_v2(&s));
        };
        let cpuset = match &v1.cpuset {
            Some(d) => read_v1_cpuset(d)?,
            None => CpuSet::default(),
        };
        let blkio = match &v1.blkio {
            Some(d) => read_v1_blkio(d)?,
            None => Blkio::default(),
        };
        Ok(from_v1(&s, self.clk_tck, cpuset, blkio))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use libcgroups::stats::{CpuThrottling, CpuUsage as LcUsage, HugeTlbStats, PidStats};
    use serde_json::{Value, json};

    use super::*;

    fn fixture(kind: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/runc_stats")
            .join(kind)
    }

    fn json_file(p: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    fn u(v: &Value) -> u64 {
        v.as_u64().unwrap()
    }

    fn list(v: &Value) -> Vec<u64> {
        v.as_array().unwrap().iter().map(u).collect()
    }

    fn mem(v: &Value) -> MemoryData {
        MemoryData {
            usage: u(&v["usage"]),
            max_usage: u(&v["max_usage"]),
            fail_count: u(&v["fail_count"]),
            limit: u(&v["limit"]),
        }
    }

    fn devs(v: &Value) -> Vec<BlkioDeviceStat> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| BlkioDeviceStat {
                major: u(&d["major"]),
                minor: u(&d["minor"]),
                op_type: d["op_type"].as_str().map(str::to_string),
                value: u(&d["value"]),
            })
            .collect()
    }

    /// libcgroups' Stats from its JSON (it has Serialize only).
    fn lc_stats(v: &Value) -> LcStats {
        let c = &v["cpu"];
        let m = &v["memory"];
        let mut s = LcStats::default();
        s.cpu.usage = LcUsage {
            usage_total: u(&c["usage"]["usage_total"]),
            usage_user: u(&c["usage"]["usage_user"]),
            usage_kernel: u(&c["usage"]["usage_kernel"]),
            per_core_usage_total: list(&c["usage"]["per_core_usage_total"]),
            per_core_usage_user: list(&c["usage"]["per_core_usage_user"]),
            per_core_usage_kernel: list(&c["usage"]["per_core_usage_kernel"]),
        };
        s.cpu.throttling = CpuThrottling {
            periods: u(&c["throttling"]["periods"]),
            throttled_periods: u(&c["throttling"]["throttled_periods"]),
            throttled_time: u(&c["throttling"]["throttled_time"]),
        };
        s.pids = PidStats {
            current: u(&v["pids"]["current"]),
            limit: u(&v["pids"]["limit"]),
        };
        s.hugetlb = v["hugetlb"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, h)| {
                let h = HugeTlbStats {
                    usage: u(&h["usage"]),
                    max_usage: u(&h["max_usage"]),
                    fail_count: u(&h["fail_count"]),
                };
                (k.clone(), h)
            })
            .collect();
        s.blkio.service_bytes = devs(&v["blkio"]["service_bytes"]);
        s.blkio.serviced = devs(&v["blkio"]["serviced"]);
        s.memory.memory = mem(&m["memory"]);
        s.memory.memswap = mem(&m["memswap"]);
        s.memory.kernel = mem(&m["kernel"]);
        s.memory.kernel_tcp = mem(&m["kernel_tcp"]);
        s.memory.cache = u(&m["cache"]);
        s.memory.stats = m["stats"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, n)| (k.clone(), u(n)))
            .collect::<HashMap<_, _>>();
        s
    }

    /// Every key path of a JSON document (`memory.usage.limit`, `blkio.x.0.op`).
    fn paths(v: &Value, at: &str, out: &mut BTreeSet<String>) {
        let mut add = |k: String, child: &Value| {
            let p = if at.is_empty() {
                k
            } else {
                format!("{at}.{k}")
            };
            out.insert(p.clone());
            paths(child, &p, out);
        };
        match v {
            Value::Object(o) => o.iter().for_each(|(k, c)| add(k.clone(), c)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, c)| add(i.to_string(), c)),
            _ => {}
        }
    }

    fn key_paths(v: &Value) -> BTreeSet<String> {
        let mut s = BTreeSet::new();
        paths(v, "", &mut s);
        s
    }

    /// `ours` against runc's `data`: the same keys (the same ones left out as zero),
    /// in runc's order, with runc's values.
    fn assert_runc_shaped(kind: &str, ours: &Value, runc: &Value) {
        assert_eq!(key_paths(ours), key_paths(runc), "{kind}");
        let order = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(order(ours), order(runc), "{kind}");
        assert_eq!(order(&ours["memory"]), order(&runc["memory"]), "{kind}");
        for (k, v) in ours.as_object().unwrap() {
            assert_eq!(v, &runc[k], "{kind}: {k}");
        }
    }

    /// From the recorded libcgroups figures and cgroup files (v1 host), the document
    /// runc printed for the same container.
    #[test]
    fn v1_is_what_runc_printed() {
        for kind in ["v1-idle", "v1-limited"] {
            let dir = fixture(kind);
            let lc = lc_stats(&json_file(&dir.join("libcgroups.json")));
            let cpuset = read_v1_cpuset(&dir.join("cpuset")).unwrap();
            let blkio = read_v1_blkio(&dir.join("blkio")).unwrap();
            let ours = serde_json::to_value(from_v1(&lc, 100, cpuset, blkio)).unwrap();
            let runc = json_file(&dir.join("runc.json"))["data"].clone();
            assert_runc_shaped(kind, &ours, &runc);
        }
    }

    /// From the recorded libcgroups figures (hack/vm, pure v2), the document runc
    /// printed for the same container.
    #[test]
    fn v2_is_what_runc_printed() {
        for kind in ["v2-idle", "v2-limited"] {
            let dir = fixture(kind);
            let lc = lc_stats(&json_file(&dir.join("libcgroups.json")));
            let ours = serde_json::to_value(from_v2(&lc)).unwrap();
            let runc = json_file(&dir.join("runc.json"))["data"].clone();
            assert_runc_shaped(kind, &ours, &runc);
        }
    }

    #[test]
    fn v1_cpu_ticks_become_nanoseconds() {
        let mut lc = LcStats::default();
        lc.cpu.usage.usage_user = 5;
        lc.cpu.usage.usage_kernel = u64::MAX;
        let s = from_v1(&lc, 100, CpuSet::default(), Blkio::default());
        assert_eq!(s.cpu.usage.user, 50_000_000);
        assert_eq!(s.cpu.usage.kernel, u64::MAX);
        let s = from_v1(&lc, 250, CpuSet::default(), Blkio::default());
        assert_eq!(s.cpu.usage.user, 20_000_000);
    }

    /// v2, after runc 1.1.5's fs2: microseconds to nanoseconds, no per-CPU lists, the
    /// page cache from `file`, swap added to memory, no failcnt or maximum,
    /// `Read`/`Write` in device order, cpuset all zero.
    #[test]
    fn v2_as_runc_fs2_reports_it() {
        let mut lc = LcStats::default();
        lc.cpu.usage.usage_total = 1500;
        lc.cpu.usage.usage_user = 1000;
        lc.cpu.usage.usage_kernel = 500;
        lc.cpu.throttling.periods = 10;
        lc.cpu.throttling.throttled_periods = 4;
        lc.cpu.throttling.throttled_time = 20;
        lc.memory.memory = MemoryData {
            usage: 4096,
            max_usage: 8192,
            fail_count: 3,
            limit: 65536,
        };
        lc.memory.memswap = MemoryData {
            usage: 100,
            max_usage: 200,
            fail_count: 1,
            limit: 1000,
        };
        lc.memory.stats = HashMap::from([("file".to_string(), 12288), ("anon".into(), 4096)]);
        lc.pids = PidStats {
            current: 2,
            limit: 0,
        };
        let dev = |op: &str, value| BlkioDeviceStat {
            major: 8,
            minor: 0,
            op_type: Some(op.to_string()),
            value,
        };
        lc.blkio.service_bytes = vec![dev("write", 0), dev("read", 512)];
        lc.blkio.serviced = vec![dev("read", 1), dev("write", 0)];
        lc.hugetlb.insert(
            "2MB".into(),
            HugeTlbStats {
                usage: 2097152,
                max_usage: 0,
                fail_count: 0,
            },
        );
        let ours = serde_json::to_value(from_v2(&lc)).unwrap();
        assert_eq!(
            ours,
            json!({
                "cpu": {
                    "usage": {"total": 1_500_000, "kernel": 500_000, "user": 1_000_000},
                    "throttling": {"periods": 10, "throttledPeriods": 4, "throttledTime": 20_000}
                },
                "cpuset": {"cpu_exclusive": 0, "mem_hardwall": 0, "mem_exclusive": 0,
                    "memory_migrate": 0, "memory_spread_page": 0, "memory_spread_slab": 0,
                    "memory_pressure": 0, "sched_load_balance": 0,
                    "sched_relax_domain_level": 0},
                "memory": {
                    "cache": 12288,
                    "usage": {"limit": 65536, "usage": 4096, "failcnt": 0},
                    "swap": {"limit": 66536, "usage": 4196, "failcnt": 0},
                    "kernel": {"limit": 0, "failcnt": 0},
                    "kernelTCP": {"limit": 0, "failcnt": 0},
                    "raw": {"anon": 4096, "file": 12288}
                },
                "pids": {"current": 2},
                "blkio": {
                    "ioServiceBytesRecursive": [
                        {"major": 8, "op": "Read", "value": 512},
                        {"major": 8, "op": "Write"}
                    ],
                    "ioServicedRecursive": [
                        {"major": 8, "op": "Read", "value": 1},
                        {"major": 8, "op": "Write"}
                    ]
                },
                "hugetlb": {"2MB": {"usage": 2097152, "failcnt": 0}},
                "intel_rdt": {},
                "network_interfaces": null
            })
        );
        // no swap limit: "max" stays max
        lc.memory.memswap.limit = u64::MAX;
        assert_eq!(from_v2(&lc).memory.swap.limit, u64::MAX);
    }

    #[test]
    fn blkio_takes_runcs_first_group_that_lists_anything() {
        let d = tempfile::tempdir().unwrap();
        let w = |f: &str, t: &str| std::fs::write(d.path().join(f), t).unwrap();
        // nothing at all: {}
        assert_eq!(read_v1_blkio(d.path()).unwrap(), Blkio::default());
        w("blkio.bfq.io_serviced_recursive", "Total 0\n");
        w("blkio.bfq.io_service_bytes_recursive", "Total 0\n");
        w(
            "blkio.throttle.io_serviced_recursive",
            "8:16 Read 3\nTotal 3\n",
        );
        w(
            "blkio.throttle.io_service_bytes_recursive",
            "8:16 Read 4096\nTotal 4096\n",
        );
        w("blkio.throttle.io_serviced", "8:16 Read 99\n");
        let b = read_v1_blkio(d.path()).unwrap();
        let e = |value| BlkioEntry {
            major: 8,
            minor: 16,
            op: "Read".into(),
            value,
        };
        assert_eq!(b.io_serviced_recursive, vec![e(3)]);
        assert_eq!(b.io_service_bytes_recursive, vec![e(4096)]);
        // BFQ's files win once they list something; a line without an op
        w("blkio.bfq.io_serviced_recursive", "8:16 7\n");
        w("blkio.bfq.io_service_bytes_recursive", "8:16 Write 1\n");
        let b = read_v1_blkio(d.path()).unwrap();
        assert_eq!(b.io_serviced_recursive[0].op, "");
        assert_eq!(b.io_serviced_recursive[0].value, 7);
        assert_eq!(b.io_service_bytes_recursive[0].op, "Write");
        w("blkio.bfq.io_serviced_recursive", "8:16 Read x\n");
        let e = read_v1_blkio(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("blkio.bfq.io_serviced_recursive") && e.contains("8:16 Read x"),
            "{e}"
        );
    }

    #[test]
    fn cpuset_files_as_runc_reads_them() {
        let d = tempfile::tempdir().unwrap();
        let w = |f: &str, t: &str| std::fs::write(d.path().join(f), t).unwrap();
        // all missing: zero
        assert_eq!(read_v1_cpuset(d.path()).unwrap(), CpuSet::default());
        w("cpuset.cpus", "0-2,5\n");
        w("cpuset.mems", "1\n");
        w("cpuset.sched_relax_domain_level", "-1\n");
        w("cpuset.sched_load_balance", "1\n");
        let c = read_v1_cpuset(d.path()).unwrap();
        assert_eq!(c.cpus, vec![0, 1, 2, 5]);
        assert_eq!(c.mems, vec![1]);
        assert_eq!(c.sched_relax_domain_level, -1);
        assert_eq!(c.sched_load_balance, 1);
        w("cpuset.cpus", "0-x\n");
        let e = read_v1_cpuset(d.path()).unwrap_err().to_string();
        assert!(e.contains("cpuset.cpus") && e.contains("0-x"), "{e}");
    }
}
