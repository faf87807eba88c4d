//! Disk I/O policies (DESIGN.md item 4): limits and weights from a host class
//! (`io.siloc.io.class=NAME`, `[io.class.NAME]`) and explicit annotations
//! (`io.siloc.io.max="rbps=…,wbps=…,riops=…,wiops=…"`, `io.siloc.io.weight=N`),
//! applied to the whole disks behind the container's writable layer and volumes as
//! runtime-spec `linux.resources.blockIO` (config-linux "Block IO").
//!
//! Who writes what: libcontainer's cgroup library (libcgroups 0.7) turns blockIO into
//! cgroup v1 `blkio.throttle.{read,write}_{bps,iops}_device` and `blkio.weight`
//! (`blkio.bfq.weight` when CFQ's file is absent), and into cgroup v2 `io.max` (one
//! write per key and device) and `io.bfq.weight` when it exists, else `io.weight`
//! scaled from 10..1000 to 1..10000. Gaps siloc works around: libcgroups ignores
//! `weightDevice` on v1; on v2 it never writes `io.weight` when bfq is loaded; and its
//! scaling multiplies in u16, which overflows for weights above 16 (a panic in debug
//! builds, a wrong weight in release). So on v2 siloc sets `blockIO.weight` only where
//! bfq takes it unscaled, and the exact io.weight through
//! `linux.resources.unified["io.weight"]` (libcgroups writes unified after blockIO).
//!
//! Work-conserving classes (they share instead of cap, see [`host`] for what the host
//! must offer): a weight (`weight`, above) divides the disk only while several
//! cgroups want it, and needs the bfq scheduler on the disk (v1 `blkio.bfq.weight`,
//! v2 `io.bfq.weight`) or, on v2, io.cost enabled for the disk on the root
//! (`io.cost.qos`, then `io.weight` on children). A latency target
//! (`latency_target`, `io.siloc.io.latency`) is cgroup v2's `io.latency`
//! (blk-iolatency, kernel cgroup-v2.rst "IO Latency"): while the container misses its
//! target, the kernel shrinks the queue depth of its siblings (cgroups with the same
//! parent and a higher or no target); when it is idle or meets the target, they run
//! at full speed. libcgroups 0.7 has no io.latency, and `unified` takes one line per
//! file, so siloc writes it itself once the cgroup exists ([`latency::write`]).
//! siloc never switches a host-wide knob (scheduler, root io.cost) at create; `siloc
//! check` reports them and switches them only when asked ([`host`]).
//!
//! Units: bandwidth in bytes/s, IOPS in operations/s, weight in cgroup v2 io.weight
//! terms (1..10000, default 100); cgroup v1 and bfq take 10..1000 and get it clamped;
//! latency targets in µs.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use oci_spec::runtime::{
    LinuxBlockIo, LinuxResources, LinuxThrottleDevice, LinuxThrottleDeviceBuilder,
};
use serde::{Deserialize, Serialize};

mod config;

pub use config::{IoConfig, SizeValue};

use crate::annotations::{self as ann, AnnotationError};
use crate::numa::locality::{DevNum, PathDevices};

/// Largest bandwidth accepted, bytes/s (runtime-spec rates are JSON integers; keep
/// them within i64 for every consumer).
pub const MAX_BPS: u64 = i64::MAX as u64;
/// Largest IOPS accepted: the kernel keeps IOPS limits in 32 bits, all ones = none.
pub const MAX_IOPS: u64 = u32::MAX as u64 - 1;
pub mod after_update;
pub mod host;
pub mod latency;

/// io.latency targets accepted, µs: 1 µs to 10 s (the kernel takes any u64 of µs;
/// beyond seconds a target protects nothing).
pub const LATENCY_RANGE_US: std::ops::RangeInclusive<u64> = 1..=10_000_000;

/// io.weight range (kernel cgroup-v2.rst "IO Interface Files").
pub const WEIGHT_RANGE: std::ops::RangeInclusive<u16> = 1..=10_000;
/// blkio.weight / bfq weight range, and runtime-spec's `blockIO.weight`.
pub const V1_WEIGHT_RANGE: std::ops::RangeInclusive<u16> = 10..=1000;

/// One throttle of io.max / blkio.throttle.*.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum IoKey {
    Rbps,
    Wbps,
    Riops,
    Wiops,
}

impl IoKey {
    pub const ALL: [IoKey; 4] = [IoKey::Rbps, IoKey::Wbps, IoKey::Riops, IoKey::Wiops];

    /// The io.max key (`rbps`, …).
    pub fn name(self) -> &'static str {
        match self {
            IoKey::Rbps => "rbps",
            IoKey::Wbps => "wbps",
            IoKey::Riops => "riops",
            IoKey::Wiops => "wiops",
        }
    }

    fn is_bytes(self) -> bool {
        matches!(self, IoKey::Rbps | IoKey::Wbps)
    }

    /// The blockIO list holding this key's entries.
    pub fn list(self, b: &LinuxBlockIo) -> &Option<Vec<LinuxThrottleDevice>> {
        match self {
            IoKey::Rbps => b.throttle_read_bps_device(),
            IoKey::Wbps => b.throttle_write_bps_device(),
            IoKey::Riops => b.throttle_read_iops_device(),
            IoKey::Wiops => b.throttle_write_iops_device(),
        }
    }

    fn set_list(self, b: &mut LinuxBlockIo, v: Option<Vec<LinuxThrottleDevice>>) {
        match self {
            IoKey::Rbps => b.set_throttle_read_bps_device(v),
            IoKey::Wbps => b.set_throttle_write_bps_device(v),
            IoKey::Riops => b.set_throttle_read_iops_device(v),
            IoKey::Wiops => b.set_throttle_write_iops_device(v),
        };
    }
}

impl fmt::Display for IoKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The limits of a policy; `None`: no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoLimits {
    pub rbps: Option<u64>,
    pub wbps: Option<u64>,
    pub riops: Option<u64>,
    pub wiops: Option<u64>,
    /// io.weight terms, 1..10000.
    pub weight: Option<u16>,
    /// cgroup v2 io.latency target, µs.
    #[serde(default)]
    pub latency: Option<u64>,
}

impl IoLimits {
    pub fn get(&self, k: IoKey) -> Option<u64> {
        match k {
            IoKey::Rbps => self.rbps,
            IoKey::Wbps => self.wbps,
            IoKey::Riops => self.riops,
            IoKey::Wiops => self.wiops,
        }
    }

    fn set(&mut self, k: IoKey, v: Option<u64>) {
        match k {
            IoKey::Rbps => self.rbps = v,
            IoKey::Wbps => self.wbps = v,
            IoKey::Riops => self.riops = v,
            IoKey::Wiops => self.wiops = v,
        }
    }

    /// Whether the policy asks for anything.
    pub fn is_empty(&self) -> bool {
        IoKey::ALL.iter().all(|k| self.get(*k).is_none())
            && self.weight.is_none()
            && self.latency.is_none()
    }
}

/// Parses `rbps=…,wbps=…,riops=…,wiops=…` (any subset, any order). Bandwidths take
/// K/M/G/T suffixes ([`crate::units::parse_size`]); IOPS are plain numbers; `max`
/// means "no limit" (it lifts a class's limit). Returns each key with `None` for
/// `max`. Errors: a message naming the key at fault.
pub fn parse_io_max(text: &str) -> Result<Vec<(IoKey, Option<u64>)>, String> {
    let mut out: Vec<(IoKey, Option<u64>)> = Vec::new();
    if text.trim().is_empty() {
        return Err("empty: use rbps=…,wbps=…,riops=…,wiops=…".into());
    }
    for item in text.split(',') {
        let item = item.trim();
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not key=value"))?;
        let key = IoKey::ALL
            .into_iter()
            .find(|x| x.name() == k.trim())
            .ok_or_else(|| format!("unknown key {:?}: use rbps, wbps, riops or wiops", k.trim()))?;
        if out.iter().any(|(x, _)| *x == key) {
            return Err(format!("{key} is given twice"));
        }
        let v = v.trim();
        let value = if v == "max" {
            None
        } else if key.is_bytes() {
            let b = crate::units::parse_size(v).map_err(|e| format!("{key}: {e}"))?;
            if b == 0 {
                return Err(format!("{key}: 0 is not a limit (use max for no limit)"));
            }
            if !(1..=MAX_BPS).contains(&b) {
                return Err(format!("{key}: {b} is outside 1..={MAX_BPS} bytes/s"));
            }
            Some(b)
        } else {
            let n: u64 = v
                .parse()
                .map_err(|_| format!("{key}: {v:?} is not a number of IOPS (or max)"))?;
            if n == 0 {
                return Err(format!("{key}: 0 is not a limit (use max for no limit)"));
            }
            if !(1..=MAX_IOPS).contains(&n) {
                return Err(format!("{key}: {n} is outside 1..={MAX_IOPS} IOPS"));
            }
            Some(n)
        };
        out.push((key, value));
    }
    Ok(out)
}

/// Parses an io.weight (1..10000). Errors: a message with the range.
pub fn parse_weight(text: &str) -> Result<u16, String> {
    text.trim()
        .parse::<u16>()
        .ok()
        .filter(|w| WEIGHT_RANGE.contains(w))
        .ok_or_else(|| format!("{text:?} is not a weight in 1..=10000"))
}

/// Parses a latency target: `N` (µs), `Nus`, `Nms` or `Ns`, N a whole number, within
/// [`LATENCY_RANGE_US`]. Returns µs. Errors: a message with the accepted forms.
pub fn parse_latency(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("us") {
        (n, 1)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1000)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1_000_000)
    } else {
        (t, 1)
    };
    let us = num
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("{text:?} is not a latency: use 2ms, 500us, 1s or µs"))?;
    if !LATENCY_RANGE_US.contains(&us) {
        return Err(format!("{text:?} is outside 1us..=10s"));
    }
    Ok(us)
}

/// The I/O part of a plan: the class chosen (if any) and the limits after the
/// annotations override it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoPlan {
    pub class: Option<String>,
    pub limits: IoLimits,
    /// The limit annotations given (`io.siloc.io.max`, `.weight`, `.latency`): a
    /// warning about a limit names its annotation, else the class it came from.
    #[serde(default)]
    pub given: Vec<String>,
}

impl IoPlan {
    /// What set the limit of annotation `key`, for messages: the annotation when
    /// given, else `I/O class "NAME"` (`io.siloc.io.class` or `[io] default_class`).
    fn source(&self, key: &str) -> String {
        match &self.class {
            Some(c) if !self.given.iter().any(|g| g == key) => format!("I/O class {c:?}"),
            _ => key.to_string(),
        }
    }
}

/// Reads the class (`io.siloc.io.class`, else `[io] default_class`) and the explicit
/// annotations on top. Errors: [`AnnotationError`] naming the annotation (unknown class,
/// bad syntax, out-of-range value).
pub fn plan(a: &HashMap<String, String>, cfg: &IoConfig) -> Result<IoPlan, AnnotationError> {
    // cut to a size a CRI error carries (annotations::err)
    let err = |key: &str, msg: String| crate::annotations::err(key, msg);
    let class = match a.get(ann::IO_CLASS) {
        Some(c) => {
            if !cfg.class.contains_key(c.as_str()) {
                let known: Vec<&str> = cfg.class.keys().map(String::as_str).collect();
                return Err(err(
                    ann::IO_CLASS,
                    format!(
                        "no class {c:?} in the host config (classes: {})",
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
            Some(c.clone())
        }
        None => cfg.default_class.clone(),
    };
    let mut limits = IoLimits::default();
    if let Some(c) = class.as_ref().and_then(|c| cfg.class.get(c)) {
        // HostConfig::check has validated the sizes.
        let bytes = |v: &Option<SizeValue>| v.as_ref().and_then(|s| s.bytes().ok());
        limits = IoLimits {
            rbps: bytes(&c.rbps),
            wbps: bytes(&c.wbps),
            riops: c.riops,
            wiops: c.wiops,
            weight: c.weight,
            latency: c.latency_target.as_ref().and_then(|l| l.micros().ok()),
        };
    }
    if let Some(t) = a.get(ann::IO_MAX) {
        for (k, v) in parse_io_max(t).map_err(|m| err(ann::IO_MAX, m))? {
            limits.set(k, v);
        }
    }
    if let Some(t) = a.get(ann::IO_WEIGHT) {
        limits.weight = Some(parse_weight(t).map_err(|m| err(ann::IO_WEIGHT, m))?);
    }
    if let Some(t) = a.get(ann::IO_LATENCY) {
        limits.latency = Some(parse_latency(t).map_err(|m| err(ann::IO_LATENCY, m))?);
    }
    let given = [ann::IO_MAX, ann::IO_WEIGHT, ann::IO_LATENCY]
        .into_iter()
        .filter(|k| a.contains_key(*k))
        .map(String::from)
        .collect();
    Ok(IoPlan {
        class,
        limits,
        given,
    })
}

/// The cgroup I/O controller the host offers, as libcgroups will use it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CgroupIo {
    /// cgroup v1 (also the v1/v2 hybrid): `blkio`. `weight`: a weight file will exist
    /// (`blkio.weight` from CFQ, or bfq's `blkio.bfq.weight`).
    V1 { weight: bool },
    /// cgroup v2 with the `io` controller. `iocost`: `io.weight` exists (blk-iocost
    /// built in); `iocost_on`: devices with `enable=1` in the root's `io.cost.qos`;
    /// `iolatency`: children have `io.latency` (blk-iolatency built in; assumed when
    /// no child has io files to tell).
    V2 {
        iocost: bool,
        iocost_on: Vec<DevNum>,
        #[serde(default)]
        iolatency: bool,
    },
    /// No blkio/io controller: limits cannot be applied.
    Missing,
}

impl CgroupIo {
    /// Reads the cgroup root (normally `/sys/fs/cgroup`): a v2 root has
    /// `cgroup.controllers`; a v1 or hybrid root has a `blkio` hierarchy.
    pub fn read(root: &Path) -> CgroupIo {
        if let Some(controllers) = crate::sys::cgroup::v2_controllers(root) {
            if !controllers.iter().any(|c| c == "io") {
                return CgroupIo::Missing;
            }
            let qos = std::fs::read_to_string(root.join("io.cost.qos"));
            let iocost_on = qos
                .as_deref()
                .unwrap_or("")
                .lines()
                .filter(|l| l.split_whitespace().any(|w| w == "enable=1"))
                .filter_map(|l| l.split_whitespace().next().and_then(DevNum::parse))
                .collect();
            return CgroupIo::V2 {
                iocost: qos.is_ok(),
                iocost_on,
                iolatency: iolatency_in_children(root),
            };
        }
        let blkio = root.join("blkio");
        if blkio.is_dir() {
            let weight = blkio.join("blkio.weight").exists()
                || blkio.join("blkio.bfq.io_service_bytes").exists();
            return CgroupIo::V1 { weight };
        }
        CgroupIo::Missing
    }

    /// The version word used in messages and the policy annotation: `v1`, `v2`,
    /// `none`.
    pub fn word(&self) -> &'static str {
        match self {
            CgroupIo::V1 { .. } => "v1",
            CgroupIo::V2 { .. } => "v2",
            CgroupIo::Missing => "none",
        }
    }
}

/// Whether the root's children offer `io.latency` (a root-level file it is not): the
/// first child with `io.max` (io enabled for it) tells; no such child: `true`.
fn iolatency_in_children(root: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(root) else {
        return true;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.join("io.max").exists() {
            return p.join("io.latency").exists();
        }
    }
    true
}

/// A block device's I/O scheduler (`/sys/block/NAME/queue/scheduler`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduler {
    /// The one in brackets (`mq-deadline`, `bfq`, `none`).
    pub active: String,
    /// Whether bfq is among the choices (so bfq's cgroup files exist).
    pub bfq_available: bool,
}

/// Reads device `name`'s scheduler under `sysfs`; `None` if it has no queue file.
pub fn read_scheduler(sysfs: &Path, name: &str) -> Option<Scheduler> {
    let text =
        std::fs::read_to_string(sysfs.join("block").join(name).join("queue/scheduler")).ok()?;
    let active = text
        .split_whitespace()
        .find(|w| w.starts_with('['))
        .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
        .unwrap_or_else(|| "none".into());
    let bfq_available = text
        .split_whitespace()
        .any(|w| w.trim_matches(|c| c == '[' || c == ']') == "bfq");
    Some(Scheduler {
        active,
        bfq_available,
    })
}

/// A policy that cannot be applied on this host.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IoError {
    #[error(
        "annotation {key}: this host has no blkio (cgroup v1) or io (cgroup v2) controller \
         to apply an I/O policy"
    )]
    NoController { key: &'static str },
}

/// What siloc applies, per whole disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoDecision {
    pub class: Option<String>,
    /// The limits to apply (a weight the host cannot write is dropped).
    pub limits: IoLimits,
    /// The whole disks (name, MAJ:MIN) behind the writable layer and volumes.
    pub disks: Vec<(String, DevNum)>,
    pub cgroup: CgroupIo,
    /// Whether bfq is registered (then cgroup v2 has `io.bfq.weight`).
    pub bfq: bool,
}

/// Decides the policy for the container's devices. `paths` are the devices behind
/// its writable layer and volumes; `sched` the schedulers of those disks and their
/// leaves. Returns the decision and the warnings to show (target "siloc"): the
/// cgroup v1 writeback caveat when write limits rely on v1, a weight that the
/// devices' schedulers ignore, a policy with no block device to act on.
///
/// Errors: [`IoError::NoController`] when a policy is asked for and the host has no
/// I/O controller.
pub fn decide(
    plan: &IoPlan,
    cgroup: &CgroupIo,
    paths: &[PathDevices],
    sched: &BTreeMap<String, Scheduler>,
) -> Result<(IoDecision, Vec<String>), IoError> {
    let mut warnings = Vec::new();
    let mut disks: Vec<(String, DevNum)> = Vec::new();
    for p in paths {
        if !disks.iter().any(|(_, d)| *d == p.dev) {
            disks.push((p.disk.clone(), p.dev));
        }
    }
    let mut limits = plan.limits.clone();
    let no_max = IoKey::ALL.iter().all(|k| limits.get(*k).is_none());
    let asked = if plan.class.is_some() {
        ann::IO_CLASS
    } else if limits.weight.is_some() && no_max {
        ann::IO_WEIGHT
    } else if limits.latency.is_some() && no_max {
        ann::IO_LATENCY
    } else {
        ann::IO_MAX
    };
    if !limits.is_empty() && *cgroup == CgroupIo::Missing {
        return Err(IoError::NoController { key: asked });
    }
    if !limits.is_empty() && disks.is_empty() {
        warnings.push(format!(
            "{asked}: the container's writable layer and volumes are on no block device; \
             the I/O policy has nothing to apply to"
        ));
    }
    let names: Vec<&str> = disks
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(
            paths
                .iter()
                .flat_map(|p| p.leaves.iter().map(|l| l.name.as_str())),
        )
        .collect();
    let bfq_available = names
        .iter()
        .any(|n| sched.get(*n).is_some_and(|s| s.bfq_available));
    if let Some(w) = limits.weight {
        let writable = match cgroup {
            CgroupIo::V1 { weight } => *weight,
            CgroupIo::V2 { iocost, .. } => *iocost || bfq_available,
            CgroupIo::Missing => false,
        };
        if !writable {
            warnings.push(format!(
                "{}: weight {w} dropped: this host's {} cgroups have no weight file \
                 (needs bfq, or blk-iocost on cgroup v2)",
                plan.source(ann::IO_WEIGHT),
                cgroup.word()
            ));
            limits.weight = None;
        } else if !disks.is_empty() {
            let effective = disks.iter().any(|(name, dev)| {
                let bfq = |n: &str| sched.get(n).is_some_and(|s| s.active == "bfq");
                let on = match cgroup {
                    CgroupIo::V2 { iocost_on, .. } => iocost_on.contains(dev),
                    _ => false,
                };
                on || bfq(name)
                    || paths
                        .iter()
                        .filter(|p| p.dev == *dev)
                        .flat_map(|p| &p.leaves)
                        .any(|l| bfq(&l.name))
            });
            if !effective {
                let shown: Vec<String> = disks
                    .iter()
                    .map(|(n, _)| {
                        let s = sched.get(n).map_or("none", |s| s.active.as_str());
                        format!("{n} (scheduler {s})")
                    })
                    .collect();
                warnings.push(format!(
                    "{}: weight {w} has no effect on {}: proportional weights need the bfq \
                     scheduler{}",
                    plan.source(ann::IO_WEIGHT),
                    shown.join(", "),
                    if matches!(cgroup, CgroupIo::V2 { .. }) {
                        " or io.cost enabled for the device"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    if let Some(us) = limits.latency {
        let missing = match cgroup {
            CgroupIo::V2 {
                iolatency: true, ..
            } => None,
            CgroupIo::V2 { .. } => {
                Some("this kernel's cgroup v2 has no io.latency (blk-iolatency)")
            }
            _ => Some("io.latency is cgroup v2 only; this host runs containers under cgroup v1"),
        };
        if let Some(m) = missing {
            let shown: Vec<String> = disks.iter().map(|(n, d)| format!("{n} ({d})")).collect();
            warnings.push(format!(
                "{}: latency target {us} us dropped for {}: {m}",
                plan.source(ann::IO_LATENCY),
                if shown.is_empty() {
                    "the container".to_string()
                } else {
                    shown.join(", ")
                }
            ));
            limits.latency = None;
        }
    }
    if matches!(cgroup, CgroupIo::V1 { .. })
        && !disks.is_empty()
        && (limits.wbps.is_some() || limits.wiops.is_some())
    {
        warnings.push(
            "cgroup v1 charges writeback by the kernel's flusher threads to the root cgroup: \
             buffered writes this container never fsyncs escape its write limit (wbps/wiops); \
             direct I/O and fsync'd writes are held. cgroup v2 holds all writes."
                .to_string(),
        );
    }
    Ok((
        IoDecision {
            class: plan.class.clone(),
            limits,
            disks,
            cgroup: cgroup.clone(),
            bfq: bfq_available,
        },
        warnings,
    ))
}

fn throttle(dev: DevNum, rate: u64) -> LinuxThrottleDevice {
    // The builder has a default for every field, so build() cannot fail.
    LinuxThrottleDeviceBuilder::default()
        .major(i64::from(dev.major))
        .minor(i64::from(dev.minor))
        .rate(rate)
        .build()
        .unwrap_or_default()
}

fn is_dev(t: &LinuxThrottleDevice, dev: DevNum) -> bool {
    t.major() == i64::from(dev.major) && t.minor() == i64::from(dev.minor)
}

/// Sets (`Some`) or removes (`None`) the `key` limit for `dev` in `b`, replacing an
/// entry for the same device. Used by create (through [`apply`]) and `siloc update`.
pub fn set_limit(b: &mut LinuxBlockIo, key: IoKey, dev: DevNum, rate: Option<u64>) {
    let mut list = key.list(b).clone().unwrap_or_default();
    list.retain(|t| !is_dev(t, dev));
    if let Some(r) = rate {
        list.push(throttle(dev, r));
    }
    key.set_list(b, if list.is_empty() { None } else { Some(list) });
}

/// Merges the decision into `res` (`linux.resources`): a throttle entry per disk and
/// limit, and the weight (v1, and v2 with bfq: clamped to 10..1000 in
/// `blockIO.weight`; v2 with blk-iocost: the exact `unified["io.weight"] =
/// "default N"`). Entries the
/// spec already has for a device, and a weight the spec sets, win. Returns what the
/// spec won, as `key@MAJ:MIN` and `weight`.
pub fn apply(res: &mut LinuxResources, d: &IoDecision) -> Vec<String> {
    let mut spec_won = Vec::new();
    let mut b = res.block_io().clone().unwrap_or_default();
    for key in IoKey::ALL {
        let Some(rate) = d.limits.get(key) else {
            continue;
        };
        for (_, dev) in &d.disks {
            if key.list(&b).iter().flatten().any(|t| is_dev(t, *dev)) {
                spec_won.push(format!("{key}@{dev}"));
            } else {
                set_limit(&mut b, key, *dev, Some(rate));
            }
        }
    }
    if let (Some(w), false) = (d.limits.weight, d.disks.is_empty()) {
        let spec_unified = res
            .unified()
            .as_ref()
            .is_some_and(|u| u.contains_key("io.weight"));
        if b.weight().is_some() || spec_unified {
            spec_won.push("weight".into());
        } else {
            let clamped = w.clamp(*V1_WEIGHT_RANGE.start(), *V1_WEIGHT_RANGE.end());
            match d.cgroup {
                CgroupIo::V1 { .. } => {
                    b.set_weight(Some(clamped));
                }
                CgroupIo::V2 { iocost, .. } => {
                    if d.bfq {
                        b.set_weight(Some(clamped));
                    }
                    if iocost {
                        let mut u = res.unified().clone().unwrap_or_default();
                        u.insert("io.weight".into(), format!("default {w}"));
                        res.set_unified(Some(u));
                    }
                }
                CgroupIo::Missing => {}
            }
        }
    }
    if b != LinuxBlockIo::default() {
        res.set_block_io(Some(b));
    }
    spec_won
}

impl IoDecision {
    /// The `io.siloc.io.policy` annotation: space-separated `key=value`, `-` for
    /// none: `class=NAME cgroup=v1|v2 devices=vda(254:0),… rbps=N wbps=N riops=N
    /// wiops=N weight=N [latency=µs] spec=wbps@254:0,…` (bytes/s, IOPS, io.weight,
    /// io.latency target, the latter only when set; `spec` lists entries where the
    /// spec's own blockIO won).
    pub fn annotation(&self, spec_won: &[String]) -> String {
        let dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
        let num = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
        format!(
            "class={} cgroup={} devices={} rbps={} wbps={} riops={} wiops={} weight={}{} spec={}",
            self.class.clone().unwrap_or_else(|| "-".into()),
            self.cgroup.word(),
            dash(
                self.disks
                    .iter()
                    .map(|(n, d)| format!("{n}({d})"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            num(self.limits.rbps),
            num(self.limits.wbps),
            num(self.limits.riops),
            num(self.limits.wiops),
            num(self.limits.weight.map(u64::from)),
            self.limits
                .latency
                .map_or(String::new(), |l| format!(" latency={l}")),
            dash(spec_won.join(","))
        )
    }
}

/// What cgroup v2's `io.max` reads back for `b` (kernel cgroup-v2.rst): one line
/// per device with any limit, `MAJ:MIN rbps=N wbps=N riops=N wiops=N`, `max` where
/// unlimited; devices in ascending order.
#[cfg(test)]
pub fn io_max_lines(b: &LinuxBlockIo) -> Vec<String> {
    let mut per: BTreeMap<(i64, i64), [Option<u64>; 4]> = BTreeMap::new();
    for (i, key) in IoKey::ALL.into_iter().enumerate() {
        for t in key.list(b).iter().flatten() {
            per.entry((t.major(), t.minor())).or_default()[i] = Some(t.rate());
        }
    }
    per.into_iter()
        .map(|((ma, mi), v)| {
            let f = |x: Option<u64>| x.map_or("max".to_string(), |n| n.to_string());
            format!(
                "{ma}:{mi} rbps={} wbps={} riops={} wiops={}",
                f(v[0]),
                f(v[1]),
                f(v[2]),
                f(v[3])
            )
        })
        .collect()
}

pub mod zero_rate;

#[cfg(test)]
mod tests;
