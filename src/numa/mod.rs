//! NUMA-local placement (DESIGN.md item 3): keep a container's CPUs and memory on
//! the node its disks are attached to ("disk-centric siloing").
//!
//! `io.siloc.numa=auto|node:N|off` (host default `[numa] default`, off unless set).
//! Pure rules here: [`plan`] reads the annotation and the spec's cpuset; [`decide`]
//! turns the plan, the host [`Topology`] and the container's devices
//! ([`crate::numa::locality`]) into a [`NumaDecision`]; prepare applies it to
//! `linux.resources.cpu.cpus`/`mems` (runtime-spec config-linux "CPU"), which
//! libcontainer writes to `cpuset.cpus`/`cpuset.mems`.

pub(crate) mod cpulist;
pub mod locality;
pub mod topology;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use oci_spec::runtime::Spec;
use serde::{Deserialize, Serialize};

use crate::annotations as ann;
use crate::annotations::AnnotationError;
use crate::numa::locality::PathDevices;
use crate::numa::topology::{CpuList, Topology};

/// `[numa]`: NUMA-local placement (DESIGN.md item 3).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct NumaConfig {
    /// `off`, `auto` or `node:N`; `io.siloc.numa` overrides it.
    pub(crate) default: String,
}

impl Default for NumaConfig {
    fn default() -> Self {
        NumaConfig {
            default: "off".into(),
        }
    }
}

impl NumaConfig {
    /// Checks the section; errors are (key, message).
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        NumaMode::parse(&self.default)
            .map(|_| ())
            .map_err(|m| ("numa.default", m))
    }
}

/// What `io.siloc.numa` asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum NumaMode {
    /// Leave the cpuset alone (runc's behaviour).
    #[default]
    Off,
    /// The node of the container's devices.
    Auto,
    /// This node, whatever the devices.
    Node(u32),
}

impl NumaMode {
    /// Parses `auto`, `off` or `node:N`. Errors: a message saying what is accepted.
    pub(crate) fn parse(text: &str) -> Result<NumaMode, String> {
        match text.trim() {
            "off" => Ok(NumaMode::Off),
            "auto" => Ok(NumaMode::Auto),
            t => t
                .strip_prefix("node:")
                .and_then(|n| n.parse::<u32>().ok())
                .map(NumaMode::Node)
                .ok_or_else(|| format!("{text:?}: use \"auto\", \"node:N\" or \"off\"")),
        }
    }
}

impl fmt::Display for NumaMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumaMode::Off => f.write_str("off"),
            NumaMode::Auto => f.write_str("auto"),
            NumaMode::Node(n) => write!(f, "node:{n}"),
        }
    }
}

/// The NUMA part of a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NumaPlan {
    pub(crate) mode: NumaMode,
    /// `linux.resources.cpu.cpus` as the spec asks (parsed only when placing).
    spec_cpus: Option<CpuList>,
    /// `linux.resources.cpu.mems` as the spec asks.
    spec_mems: Option<CpuList>,
}

/// Reads `io.siloc.numa` (else the host default) and, when placement is on, the
/// spec's cpuset. Errors: [`AnnotationError`] naming `io.siloc.numa`, for a bad value or
/// a spec cpuset that is not a cpu list.
pub(crate) fn plan(
    a: &HashMap<String, String>,
    spec: &Spec,
    cfg: &NumaConfig,
) -> Result<NumaPlan, AnnotationError> {
    // cut to a size a CRI error carries (annotations::err)
    let bad = |msg: String| crate::annotations::err(ann::NUMA, msg);
    let mode = match a.get(ann::NUMA) {
        Some(v) => NumaMode::parse(v).map_err(bad)?,
        None => NumaMode::parse(&cfg.default)
            .map_err(|m| bad(format!("host default [numa] default: {m}")))?,
    };
    if mode == NumaMode::Off {
        return Ok(NumaPlan::default());
    }
    let cpu = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.cpu().as_ref());
    let parse = |field: &str, v: Option<&String>| -> Result<Option<CpuList>, AnnotationError> {
        match v {
            None => Ok(None),
            Some(t) if t.trim().is_empty() => Ok(None),
            Some(t) => CpuList::parse(t)
                .map(Some)
                .map_err(|e| bad(format!("spec field {field}: {e}"))),
        }
    };
    Ok(NumaPlan {
        mode,
        spec_cpus: parse(
            "linux.resources.cpu.cpus",
            cpu.and_then(|c| c.cpus().as_ref()),
        )?,
        spec_mems: parse(
            "linux.resources.cpu.mems",
            cpu.and_then(|c| c.mems().as_ref()),
        )?,
    })
}

/// A placement that cannot be made; each names `io.siloc.numa`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum NumaError {
    #[error("annotation io.siloc.numa: node {node} does not exist on this host (nodes: {known})")]
    NoSuchNode { node: u32, known: String },
    #[error(
        "annotation io.siloc.numa: node(s) {nodes} have no usable CPUs (all offline or \
         isolated); refusing an empty cpuset"
    )]
    NoUsableCpus { nodes: String },
}

/// What siloc decided, with the reason (also shown in `io.siloc.numa.decision`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NumaDecision {
    pub(crate) mode: NumaMode,
    /// The nodes the container is placed on; empty: not placed (cpuset untouched).
    pub(crate) nodes: Vec<u32>,
    /// The value for `linux.resources.cpu.cpus`; `None`: leave the spec's.
    pub(crate) cpus: Option<CpuList>,
    /// The value for `linux.resources.cpu.mems`; `None`: leave the spec's.
    pub(crate) mems: Option<CpuList>,
    /// The container's devices, as [`PathDevices::describe`] shows them.
    pub(crate) devices: Vec<String>,
    pub(crate) reason: String,
    /// The spec pins CPUs or memory elsewhere and keeps them (a logged conflict).
    #[serde(default)]
    pub(crate) spec_wins: bool,
}

impl NumaDecision {
    /// The `io.siloc.numa.decision` annotation: space-separated `key=value` in fixed
    /// order, `-` for "left as the spec has it", free text after `reason=`:
    /// `mode=auto nodes=0 cpus=0-23,48-71 mems=0 devices=nvme0n1@0(259:0) reason=…`.
    pub(crate) fn annotation(&self) -> String {
        let or_dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
        format!(
            "mode={} nodes={} cpus={} mems={} devices={} reason={}",
            self.mode,
            or_dash(
                self.nodes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            or_dash(
                self.cpus
                    .as_ref()
                    .map(|c| c.to_string())
                    .unwrap_or_default()
            ),
            or_dash(
                self.mems
                    .as_ref()
                    .map(|c| c.to_string())
                    .unwrap_or_default()
            ),
            or_dash(self.devices.join(",")),
            self.reason
        )
    }
}

fn join(nodes: &[u32]) -> String {
    nodes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Leaf counts per node over some paths' devices.
fn count(paths: &[&PathDevices]) -> BTreeMap<u32, usize> {
    let mut m = BTreeMap::new();
    for p in paths {
        for n in p.leaves.iter().filter_map(|l| l.node) {
            *m.entry(n).or_insert(0) += 1;
        }
    }
    m
}

/// Chooses the nodes for `auto`, with the reason. Rules, in order: one node holds
/// every known device → that node; the devices span nodes → the node holding most of
/// the writable layer's devices, ties broken by the volumes' devices; still tied
/// (RAID or multipath across nodes) → all the tied nodes; nothing known → none.
fn auto_nodes(writable: Option<&PathDevices>, volumes: &[PathDevices]) -> (Vec<u32>, String) {
    let w: Vec<&PathDevices> = writable.into_iter().collect();
    let v: Vec<&PathDevices> = volumes.iter().collect();
    let (wc, vc) = (count(&w), count(&v));
    let all: Vec<u32> = {
        let mut a: Vec<u32> = wc.keys().chain(vc.keys()).copied().collect();
        a.sort_unstable();
        a.dedup();
        a
    };
    match all.as_slice() {
        [] => {
            return (
                Vec::new(),
                "NUMA node of the container's devices unknown".into(),
            );
        }
        [n] => return (vec![*n], format!("all devices on node {n}")),
        _ => {}
    }
    // Rank by (writable count, volume count); the top rank wins.
    let rank = |n: &u32| {
        (
            wc.get(n).copied().unwrap_or(0),
            vc.get(n).copied().unwrap_or(0),
        )
    };
    let best = all.iter().map(rank).max().unwrap_or((0, 0));
    let top: Vec<u32> = all.iter().copied().filter(|n| rank(n) == best).collect();
    let span = format!("devices span nodes {}", join(&all));
    let w_best = wc.values().copied().max().unwrap_or(0);
    let w_top = wc.values().filter(|c| **c == w_best).count();
    let reason = match top.as_slice() {
        [n] if wc.len() == 1 => format!("{span}; chose node {n}, which holds the writable layer"),
        [n] if wc.is_empty() => format!(
            "{span}; the writable layer's node is unknown; chose node {n}, which holds most volumes"
        ),
        [n] if w_top == 1 => {
            format!("{span}; chose node {n}, which holds most of the writable layer")
        }
        [n] => format!(
            "{span}; the writable layer spans nodes equally; chose node {n}, which holds most volumes"
        ),
        t => format!(
            "{span}; no node holds more of them; placed on nodes {}",
            join(t)
        ),
    };
    (top, reason)
}

/// Decides the placement. `writable` holds the devices behind the writable layer
/// (`None` if not on a block device), `volumes` those behind bind-mount sources.
///
/// The result never widens what the spec asks (it is intersected with the spec's
/// cpus and mems); where the spec pins CPUs or memory elsewhere the spec wins and the
/// reason says so; it is never an empty cpuset; `auto` on a one-node host places
/// nothing. CPUs are the nodes' usable CPUs as whole cores
/// ([`Topology::usable_cpus`]).
///
/// Errors: [`NumaError`] for a node that does not exist or has no usable CPUs.
pub(crate) fn decide(
    plan: &NumaPlan,
    topo: &Topology,
    writable: Option<&PathDevices>,
    volumes: &[PathDevices],
) -> Result<NumaDecision, NumaError> {
    let devices = {
        let mut d: Vec<String> = writable
            .into_iter()
            .chain(volumes)
            .map(PathDevices::describe)
            .collect();
        let mut seen = std::collections::HashSet::new();
        d.retain(|x| seen.insert(x.clone()));
        d
    };
    let unplaced = |reason: String| NumaDecision {
        mode: plan.mode,
        nodes: Vec::new(),
        cpus: None,
        mems: None,
        devices: devices.clone(),
        reason,
        spec_wins: false,
    };
    let (nodes, reason) = match plan.mode {
        NumaMode::Off => return Ok(unplaced("off".into())),
        NumaMode::Node(n) => {
            if !topo.nodes.contains_key(&n) {
                return Err(NumaError::NoSuchNode {
                    node: n,
                    known: join(&topo.nodes.keys().copied().collect::<Vec<_>>()),
                });
            }
            let mut on: Vec<u32> = writable
                .into_iter()
                .chain(volumes)
                .flat_map(PathDevices::nodes)
                .collect();
            on.sort_unstable();
            on.dedup();
            let reason = if on.is_empty() || on == [n] {
                format!("node {n} asked for")
            } else {
                format!(
                    "node {n} asked for; the devices are on node(s) {}",
                    join(&on)
                )
            };
            (vec![n], reason)
        }
        NumaMode::Auto => {
            if !topo.is_multi_node() {
                return Ok(unplaced(
                    "one NUMA node on this host: nothing to place".into(),
                ));
            }
            let (nodes, reason) = auto_nodes(writable, volumes);
            if nodes.is_empty() {
                return Ok(unplaced(format!("{reason}: left unplaced")));
            }
            if nodes.len() == topo.nodes.len() {
                return Ok(unplaced(format!(
                    "{reason}, which is every node: left unplaced"
                )));
            }
            (nodes, reason)
        }
    };
    let cpus = nodes.iter().fold(CpuList::default(), |acc, n| {
        acc.union(&topo.usable_cpus(*n))
    });
    if cpus.is_empty() {
        return Err(NumaError::NoUsableCpus {
            nodes: join(&nodes),
        });
    }
    let mems = CpuList::from_ids(nodes.iter().copied());
    let cpus_in_spec = match &plan.spec_cpus {
        Some(s) => cpus.intersection(s),
        None => cpus,
    };
    let mems_in_spec = match &plan.spec_mems {
        Some(s) => mems.intersection(s),
        None => mems,
    };
    let conflict = |reason: String| NumaDecision {
        spec_wins: true,
        ..unplaced(reason)
    };
    if cpus_in_spec.is_empty() {
        let s = plan
            .spec_cpus
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        return Ok(conflict(format!(
            "{reason}; but the spec pins CPUs {s}, none usable on node(s) {}: the spec wins",
            join(&nodes)
        )));
    }
    if mems_in_spec.is_empty() {
        let s = plan
            .spec_mems
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        return Ok(conflict(format!(
            "{reason}; but the spec pins memory to node(s) {s}, not {}: the spec wins",
            join(&nodes)
        )));
    }
    Ok(NumaDecision {
        mode: plan.mode,
        nodes,
        cpus: Some(cpus_in_spec),
        mems: Some(mems_in_spec),
        devices,
        reason,
        spec_wins: false,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::numa::locality::{MapLookup, Resolver};
    use crate::numa::topology::fixture;

    /// Places a container whose writable layer is at /w and volumes at /v0, /v1, …
    /// on fixture `host`, with `table` saying which device holds each path.
    fn place(
        host: &str,
        mode: NumaMode,
        table: &[(&str, (u32, u32))],
        nvolumes: usize,
        spec: (Option<&str>, Option<&str>),
    ) -> Result<NumaDecision, NumaError> {
        let sysfs = fixture(host);
        let lookup = MapLookup::of(table);
        let r = Resolver {
            sysfs: &sysfs,
            lookup: &lookup,
        };
        let w = r.resolve(Path::new("/w")).unwrap();
        let v: Vec<PathDevices> = (0..nvolumes)
            .filter_map(|i| r.resolve(Path::new(&format!("/v{i}"))).unwrap())
            .collect();
        let topo = Topology::read(&sysfs).unwrap();
        let plan = NumaPlan {
            mode,
            spec_cpus: spec.0.map(|c| CpuList::parse(c).unwrap()),
            spec_mems: spec.1.map(|c| CpuList::parse(c).unwrap()),
        };
        decide(&plan, &topo, w.as_ref(), &v)
    }

    fn auto(host: &str, table: &[(&str, (u32, u32))], nvolumes: usize) -> NumaDecision {
        place(host, NumaMode::Auto, table, nvolumes, (None, None)).unwrap()
    }

    fn placed(d: &NumaDecision) -> (String, String) {
        (
            d.cpus.as_ref().map(|c| c.to_string()).unwrap_or_default(),
            d.mems.as_ref().map(|c| c.to_string()).unwrap_or_default(),
        )
    }

    fn pair(c: &str, m: &str) -> (String, String) {
        (c.to_string(), m.to_string())
    }

    #[test]
    fn parse_modes() {
        assert_eq!(NumaMode::parse("auto"), Ok(NumaMode::Auto));
        assert_eq!(NumaMode::parse("off"), Ok(NumaMode::Off));
        assert_eq!(NumaMode::parse("node:3"), Ok(NumaMode::Node(3)));
        for bad in ["", "on", "node:", "node:-1", "node:x", "node3", "Auto"] {
            assert!(NumaMode::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(NumaMode::Node(2).to_string(), "node:2");
    }

    #[test]
    fn intel_two_sockets_writable_layer_wins() {
        // upper on nvme0n1p1 (node 0), a volume on nvme1n1p1 (node 1)
        let d = auto("intel-2s-ht", &[("/w", (259, 1)), ("/v0", (259, 4))], 1);
        assert_eq!(d.nodes, vec![0]);
        // cpu 2 is isolated: it and its sibling 50 are left out
        assert_eq!(placed(&d), pair("0-1,3-23,48-49,51-71", "0"));
        assert!(
            d.reason.contains("span") && d.reason.contains("writable layer"),
            "{}",
            d.reason
        );
        assert_eq!(d.devices, vec!["nvme0n1@0(259:0)", "nvme1n1@1(259:3)"]);
        let d = auto("intel-2s-ht", &[("/w", (259, 4))], 0);
        assert_eq!(placed(&d), pair("24-47,72-95", "1"));
        assert_eq!(d.reason, "all devices on node 1");
    }

    #[test]
    fn amd_nps4_picks_one_of_eight_nodes() {
        let d = auto("amd-nps4", &[("/w", (259, 1))], 0);
        // cpu 95 is offline; its sibling 31 stays (whole among online CPUs)
        assert_eq!(placed(&d), pair("24-31,88-94", "3"));
        let d = auto("amd-nps4", &[("/w", (259, 3))], 0);
        assert_eq!(placed(&d), pair("48-55,112-119", "6"));
    }

    #[test]
    fn lvm_on_nvme_follows_the_physical_volume() {
        let d = auto("lvm-nvme", &[("/w", (253, 0))], 0);
        assert_eq!(placed(&d), pair("4-7,12-15", "1"));
        assert_eq!(d.devices, vec!["dm-0(253:0)>nvme1n1@1"]);
    }

    #[test]
    fn md_raid_across_nodes() {
        // raid1 over both nodes on a two-node host: every node, so nothing to place
        let d = auto("md-raid", &[("/w", (9, 0))], 0);
        assert!(d.nodes.is_empty() && d.cpus.is_none() && d.mems.is_none());
        assert!(d.reason.contains("every node"), "{}", d.reason);
        // a volume on node 1 breaks the tie
        let d = auto("md-raid", &[("/w", (9, 0)), ("/v0", (259, 5))], 1);
        assert_eq!(placed(&d), pair("4-7,12-15", "1"));
        // raid0 whose legs are both on node 1
        let d = auto("md-raid", &[("/w", (9, 1))], 0);
        assert_eq!(placed(&d), pair("4-7,12-15", "1"));
    }

    #[test]
    fn loop_device_follows_its_backing_file() {
        let d = auto("loop-file", &[("/w", (7, 0)), ("/srv/images", (259, 3))], 0);
        assert_eq!(placed(&d), pair("4-7,12-15", "1"));
        assert_eq!(d.devices, vec!["loop0(7:0)>nvme1n1@1"]);
    }

    #[test]
    fn multipath_across_both_nodes_is_left_unplaced() {
        let d = auto("nvme-mpath", &[("/w", (259, 0))], 0);
        assert!(d.nodes.is_empty(), "{d:?}");
    }

    #[test]
    fn virtio_vms() {
        // one node: a logged no-op
        let d = auto("vm-virtio", &[("/w", (254, 1))], 0);
        assert!(d.cpus.is_none() && d.mems.is_none());
        assert!(d.reason.contains("one NUMA node"), "{}", d.reason);
        assert!(
            d.annotation()
                .starts_with("mode=auto nodes=- cpus=- mems=- devices=vda@?(254:0) reason=")
        );
        // two nodes: vda's node is unknown (-1), the volume on vdb is on node 1
        let d = auto("vm-2node", &[("/w", (254, 0)), ("/v0", (254, 16))], 1);
        assert_eq!(placed(&d), pair("2-3", "1"));
        // only the unknown disk: nothing to go on
        let d = auto("vm-2node", &[("/w", (254, 0))], 0);
        assert!(
            d.nodes.is_empty() && d.reason.contains("unknown"),
            "{}",
            d.reason
        );
    }

    #[test]
    fn explicit_node_and_its_errors() {
        let d = place(
            "vm-virtio",
            NumaMode::Node(0),
            &[("/w", (254, 1))],
            0,
            (None, None),
        )
        .unwrap();
        assert_eq!(placed(&d), pair("0-3", "0"));
        let e = place(
            "intel-2s-ht",
            NumaMode::Node(5),
            &[("/w", (259, 1))],
            0,
            (None, None),
        )
        .unwrap_err();
        assert_eq!(
            e,
            NumaError::NoSuchNode {
                node: 5,
                known: "0,1".into()
            }
        );
        assert!(e.to_string().contains("io.siloc.numa"));
        let d = place(
            "intel-2s-ht",
            NumaMode::Node(1),
            &[("/w", (259, 1))],
            0,
            (None, None),
        )
        .unwrap();
        assert_eq!(placed(&d), pair("24-47,72-95", "1"));
        assert_eq!(d.reason, "node 1 asked for; the devices are on node(s) 0");
    }

    #[test]
    fn node_without_usable_cpus_is_an_error() {
        let mut topo = Topology::read(&fixture("intel-2s-ht")).unwrap();
        topo.isolated = CpuList::parse("24-47").unwrap();
        let plan = NumaPlan {
            mode: NumaMode::Node(1),
            ..Default::default()
        };
        let e = decide(&plan, &topo, None, &[]).unwrap_err();
        assert!(matches!(e, NumaError::NoUsableCpus { .. }));
        assert!(e.to_string().contains("empty cpuset"), "{e}");
    }

    #[test]
    fn never_wider_than_the_spec_and_the_spec_wins_conflicts() {
        let t = [("/w", (259, 1))];
        let d = place(
            "intel-2s-ht",
            NumaMode::Auto,
            &t,
            0,
            (Some("0-3,24-27"), None),
        )
        .unwrap();
        assert_eq!(placed(&d), pair("0-1,3", "0"));
        let d = place("intel-2s-ht", NumaMode::Auto, &t, 0, (Some("24-27"), None)).unwrap();
        assert!(d.cpus.is_none() && d.mems.is_none());
        assert!(
            d.spec_wins && d.reason.contains("spec wins"),
            "{}",
            d.reason
        );
        let d = place("intel-2s-ht", NumaMode::Auto, &t, 0, (None, Some("1"))).unwrap();
        assert!(
            d.cpus.is_none() && d.reason.contains("spec wins"),
            "{}",
            d.reason
        );
        let d = place("intel-2s-ht", NumaMode::Auto, &t, 0, (None, Some("0-1"))).unwrap();
        assert_eq!(placed(&d), pair("0-1,3-23,48-49,51-71", "0"));
    }

    #[test]
    fn plan_reads_annotation_default_and_spec() {
        let spec: Spec = serde_json::from_str(
            r#"{"ociVersion":"1.0.2","root":{"path":"r"},"process":{"cwd":"/","args":["sh"],
            "user":{"uid":0,"gid":0}},"linux":{"resources":{"cpu":{"cpus":"0-3","mems":""}}}}"#,
        )
        .unwrap();
        let mut cfg = NumaConfig::default();
        let a = |v: &str| HashMap::from([(ann::NUMA.to_string(), v.to_string())]);
        assert_eq!(
            plan(&HashMap::new(), &spec, &cfg).unwrap(),
            NumaPlan::default()
        );
        let p = plan(&a("auto"), &spec, &cfg).unwrap();
        assert_eq!(p.mode, NumaMode::Auto);
        assert_eq!(p.spec_cpus, Some(CpuList::parse("0-3").unwrap()));
        assert_eq!(p.spec_mems, None);
        cfg.default = "node:1".into();
        assert_eq!(
            plan(&HashMap::new(), &spec, &cfg).unwrap().mode,
            NumaMode::Node(1)
        );
        assert_eq!(plan(&a("off"), &spec, &cfg).unwrap().mode, NumaMode::Off);
        // a CRI error reply carries it (annotations::err), not 120 KB
        let e = plan(&a(&"x".repeat(120_000)), &spec, &cfg).unwrap_err();
        assert!(e.key == ann::NUMA && e.msg.len() < 1024, "{}", e.msg.len());
        let e = plan(&a("yes"), &spec, &cfg).unwrap_err();
        assert_eq!(e.key, ann::NUMA);
        let bad: Spec =
            serde_json::from_str(&serde_json::to_string(&spec).unwrap().replace("0-3", "0-x"))
                .unwrap();
        let e = plan(&a("auto"), &bad, &cfg).unwrap_err();
        assert!(e.msg.contains("linux.resources.cpu.cpus"), "{e}");
    }
}
