//! Placement at prepare time: find the block devices behind the container's writable
//! layer and volumes ([`crate::numa::locality`]), read the host facts (NUMA topology, cgroup
//! I/O controller, schedulers), let the pure rules decide ([`crate::numa`],
//! [`crate::iopolicy`]), log the decisions, and later write them into the final spec
//! with the annotations `siloc state` shows.
//!
//! Reading only: nothing here changes the host, so it runs before any other prepare
//! step and a refusal leaves nothing behind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_spec::runtime::{Linux, LinuxCpu};
use serde::{Deserialize, Serialize};

use crate::annotations as ann;
use crate::iopolicy::{self, CgroupIo, IoDecision};
use crate::lifecycle::plan::{Plan, RootfsPlan, UpperPlan};
use crate::numa::locality::{DevLookup, PathDevices, Resolver, StatLookup};
use crate::numa::topology::Topology;
use crate::numa::{self, NumaDecision, NumaMode};

/// Errors deciding the placement; each names the file or annotation at fault.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    #[error(transparent)]
    Locality(#[from] crate::numa::locality::LocalityError),
    #[error("NUMA topology: {0}")]
    Topology(#[from] crate::numa::topology::TopologyError),
    #[error(transparent)]
    Numa(#[from] numa::NumaError),
    #[error(transparent)]
    Io(#[from] iopolicy::IoError),
}

/// Where host facts come from: `/sys`, `/sys/fs/cgroup` and `stat(2)` on a host;
/// fixtures in tests.
pub struct HostSources<'a> {
    pub sysfs: &'a Path,
    pub cgroup_root: &'a Path,
    pub lookup: &'a dyn DevLookup,
}

impl HostSources<'static> {
    /// This host.
    pub fn system() -> HostSources<'static> {
        HostSources {
            sysfs: Path::new("/sys"),
            cgroup_root: Path::new("/sys/fs/cgroup"),
            lookup: &StatLookup,
        }
    }
}

/// The devices found and what was decided for them (kept in the record, so `siloc
/// update --io-max` can find the container's disks again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Devices behind the writable layer; `None` if not on a block device.
    pub writable: Option<PathDevices>,
    /// Devices behind each bind-mount source on a block device.
    pub volumes: Vec<PathDevices>,
    /// `None` when `io.siloc.numa` is off.
    pub numa: Option<NumaDecision>,
    /// `None` when no I/O policy applies.
    pub io: Option<IoDecision>,
}

impl Placement {
    /// The distinct whole disks (name, MAJ:MIN) behind the writable layer and volumes.
    pub fn disks(&self) -> Vec<(String, crate::numa::locality::DevNum)> {
        let mut out: Vec<(String, crate::numa::locality::DevNum)> = Vec::new();
        for p in self.writable.iter().chain(&self.volumes) {
            if !out.iter().any(|(_, d)| *d == p.dev) {
                out.push((p.disk.clone(), p.dev));
            }
        }
        out
    }
}

/// The container a placement is for: what [`place`] reads of its record.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub id: &'a str,
    /// The bundle directory: relative bind-mount sources are relative to it.
    pub bundle: &'a Path,
    /// Absolute root.path.
    pub rootfs: &'a Path,
    pub plan: &'a Plan,
}

/// The container's writable layer: the overlay upper dir (persistent, or
/// `<data_root>/containers/<id>/upper`), else root.path itself.
pub fn writable_path(rec: Target<'_>, data_root: &Path) -> PathBuf {
    match &rec.plan.rootfs {
        RootfsPlan::Overlay {
            upper: UpperPlan::Persistent(u) | UpperPlan::Snapshot { upper: u, .. },
            ..
        } => u.clone(),
        RootfsPlan::Overlay {
            upper: UpperPlan::Ephemeral,
            ..
        } => data_root.join("containers").join(rec.id).join("upper"),
        _ => rec.rootfs.to_path_buf(),
    }
}

/// Decides NUMA placement and the I/O policy for `rec`, or `None` when neither is
/// asked for (runc's behaviour, nothing looked up). Logs each decision (target
/// "siloc": info; conflicts and caveats: warn).
///
/// Errors: [`PlacementError`] — a sysfs or stat failure, a node that does not exist
/// or has no usable CPUs, a policy on a host without an I/O controller.
pub fn place(
    src: &HostSources<'_>,
    rec: Target<'_>,
    data_root: &Path,
) -> Result<Option<Placement>, PlacementError> {
    let plan = rec.plan;
    if plan.numa.mode == NumaMode::Off && plan.io.limits.is_empty() {
        return Ok(None);
    }
    let r = Resolver {
        sysfs: src.sysfs,
        lookup: src.lookup,
    };
    let writable = r.resolve(&writable_path(rec, data_root))?;
    let mut volumes = Vec::new();
    for v in &plan.volumes {
        let p = if v.is_absolute() {
            v.clone()
        } else {
            rec.bundle.join(v)
        };
        if let Some(d) = r.resolve(&p)? {
            volumes.push(d);
        }
    }
    let numa = if plan.numa.mode == NumaMode::Off {
        None
    } else {
        let topo = Topology::read(src.sysfs)?;
        let d = numa::decide(&plan.numa, &topo, writable.as_ref(), &volumes)?;
        if d.spec_wins {
            tracing::warn!(target: "siloc", "container {}: NUMA placement: {}", rec.id, d.reason);
        } else {
            tracing::info!(target: "siloc", "container {}: NUMA placement: {}", rec.id, d.annotation());
        }
        Some(d)
    };
    let io = if plan.io.limits.is_empty() {
        None
    } else {
        let paths: Vec<PathDevices> = writable.iter().chain(&volumes).cloned().collect();
        let mut sched = BTreeMap::new();
        for name in paths
            .iter()
            .flat_map(|p| std::iter::once(&p.disk).chain(p.leaves.iter().map(|l| &l.name)))
        {
            if let Some(s) = iopolicy::read_scheduler(src.sysfs, name) {
                sched.insert(name.clone(), s);
            }
        }
        let cgroup = CgroupIo::read(src.cgroup_root);
        let (d, warnings) = iopolicy::decide(&plan.io, &cgroup, &paths, &sched)?;
        for w in warnings {
            tracing::warn!(target: "siloc", "container {}: {w}", rec.id);
        }
        tracing::info!(target: "siloc", "container {}: I/O policy: {}", rec.id, d.annotation(&[]));
        Some(d)
    };
    Ok(Some(Placement {
        writable,
        volumes,
        numa,
        io,
    }))
}

/// Writes the placement into the final spec's `linux.resources` (cpuset, blockIO,
/// unified) and returns the annotations that report it: `io.siloc.numa.decision`
/// ([`NumaDecision::annotation`]) and `io.siloc.io.policy` ([`IoDecision::annotation`]).
pub fn finalize(linux: &mut Linux, p: &Placement) -> Vec<(&'static str, String)> {
    let mut notes = Vec::new();
    let mut res = linux.resources().clone().unwrap_or_default();
    if let Some(d) = &p.numa {
        if d.cpus.is_some() || d.mems.is_some() {
            let mut cpu: LinuxCpu = res.cpu().clone().unwrap_or_default();
            if let Some(c) = &d.cpus {
                cpu.set_cpus(Some(c.to_string()));
            }
            if let Some(m) = &d.mems {
                cpu.set_mems(Some(m.to_string()));
            }
            res.set_cpu(Some(cpu));
        }
        notes.push((ann::OUT_NUMA_DECISION, d.annotation()));
    }
    if let Some(d) = &p.io {
        let won = iopolicy::apply(&mut res, d);
        if !won.is_empty() {
            tracing::info!(target: "siloc", "I/O policy: the spec's own blockIO wins for {}", won.join(", "));
        }
        notes.push((ann::OUT_IO_POLICY, d.annotation(&won)));
    }
    linux.set_resources(Some(res));
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::plan::{UsernsPlan, volumes};
    use crate::numa::locality::MapLookup;
    use crate::numa::topology::fixture;
    use oci_spec::runtime::Spec;

    fn record(plan: &Plan) -> Target<'_> {
        Target {
            id: "c1",
            bundle: Path::new("/b"),
            rootfs: Path::new("/b/rootfs"),
            plan,
        }
    }

    fn spec_with(annotations: &str, extra: &str) -> Spec {
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2","root":{{"path":"rootfs"}},
            "process":{{"cwd":"/","args":["sh"],"user":{{"uid":0,"gid":0}}}},
            "annotations":{annotations},
            "mounts":[{{"destination":"/proc","type":"proc","source":"proc"}},
                      {{"destination":"/data","type":"bind","source":"/data/vol"}},
                      {{"destination":"/cfg","source":"cfg","options":["rbind","ro"]}}],
            "linux":{{"namespaces":[{{"type":"mount"}}]{extra}}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn volumes_are_bind_sources() {
        let s = spec_with("{}", "");
        assert_eq!(
            volumes(&s),
            vec![PathBuf::from("/data/vol"), PathBuf::from("cfg")]
        );
    }

    #[test]
    fn writable_layer_paths() {
        let mut p =
            crate::lifecycle::plan::plan(&spec_with("{}", ""), &Default::default()).unwrap();
        let rec = record(&p);
        assert_eq!(
            writable_path(rec, Path::new("/d")),
            PathBuf::from("/b/rootfs")
        );
        p.rootfs = RootfsPlan::Overlay {
            layers: vec!["/l".into()],
            upper: UpperPlan::Ephemeral,
        };
        assert_eq!(
            writable_path(record(&p), Path::new("/d")),
            PathBuf::from("/d/containers/c1/upper")
        );
        p.rootfs = RootfsPlan::Overlay {
            layers: vec!["/l".into()],
            upper: UpperPlan::Persistent("/up".into()),
        };
        assert_eq!(
            writable_path(record(&p), Path::new("/d")),
            PathBuf::from("/up")
        );
    }

    /// The whole path on a fixture host: annotations → plan → place → final spec.
    #[test]
    fn intel_host_end_to_end() {
        let cfg = crate::config::HostConfig::parse(
            "[io.class.guaranteed]\nrbps = \"200M\"\nwbps = \"100M\"\n",
            Path::new("/etc/siloc/siloc.toml"),
        )
        .unwrap();
        let spec = spec_with(
            r#"{"io.siloc.numa":"auto","io.siloc.io.class":"guaranteed","io.siloc.io.max":"wiops=500"}"#,
            r#","resources":{"cpu":{"cpus":"0-7,24-31"},"blockIO":{"weight":300}}"#,
        );
        let mut plan = crate::lifecycle::plan::plan(&spec, &cfg).unwrap();
        plan.userns = UsernsPlan::Host;
        let rec = record(&plan);
        let sysfs = fixture("intel-2s-ht");
        let cg = tempfile::tempdir().unwrap();
        std::fs::create_dir(cg.path().join("blkio")).unwrap();
        // rootfs on nvme0n1p2, the data volume on nvme1n1p1, cfg (bundle) on nvme0n1p2
        let lookup = MapLookup::of(&[("/b", (259, 2)), ("/data", (259, 4))]);
        let src = HostSources {
            sysfs: &sysfs,
            cgroup_root: cg.path(),
            lookup: &lookup,
        };
        let p = place(&src, rec, Path::new("/var/lib/siloc"))
            .unwrap()
            .unwrap();
        assert_eq!(p.volumes.len(), 2);
        let mut linux = spec.linux().clone().unwrap();
        let notes = finalize(&mut linux, &p);
        let res = linux.resources().clone().unwrap();
        let cpu = res.cpu().clone().unwrap();
        assert_eq!(cpu.cpus().as_deref(), Some("0-1,3-7"));
        assert_eq!(cpu.mems().as_deref(), Some("0"));
        let lines = iopolicy::io_max_lines(res.block_io().as_ref().unwrap());
        assert_eq!(
            lines,
            vec![
                "259:0 rbps=209715200 wbps=104857600 riops=max wiops=500",
                "259:3 rbps=209715200 wbps=104857600 riops=max wiops=500",
            ]
        );
        assert_eq!(res.block_io().as_ref().unwrap().weight(), Some(300));
        let notes: BTreeMap<_, _> = notes.into_iter().collect();
        assert_eq!(
            notes[ann::OUT_NUMA_DECISION],
            "mode=auto nodes=0 cpus=0-1,3-7 mems=0 devices=nvme0n1@0(259:0),nvme1n1@1(259:3) \
             reason=devices span nodes 0,1; chose node 0, which holds the writable layer"
        );
        assert_eq!(
            notes[ann::OUT_IO_POLICY],
            "class=guaranteed cgroup=v1 devices=nvme0n1(259:0),nvme1n1(259:3) rbps=209715200 \
             wbps=104857600 riops=- wiops=500 weight=- spec=-"
        );
    }

    #[test]
    fn nothing_asked_looks_nothing_up() {
        let spec = spec_with("{}", "");
        let plan = crate::lifecycle::plan::plan(&spec, &Default::default()).unwrap();
        let rec = record(&plan);
        let lookup = MapLookup::default(); // any lookup would fail
        let src = HostSources {
            sysfs: Path::new("/nonexistent"),
            cgroup_root: Path::new("/nonexistent"),
            lookup: &lookup,
        };
        assert_eq!(place(&src, rec, Path::new("/d")).unwrap(), None);
    }

    #[test]
    fn bad_node_is_refused_before_anything_happens() {
        let spec = spec_with(r#"{"io.siloc.numa":"node:2"}"#, "");
        let plan = crate::lifecycle::plan::plan(&spec, &Default::default()).unwrap();
        let rec = record(&plan);
        let sysfs = fixture("vm-virtio");
        let lookup = MapLookup::of(&[("/", (254, 1))]);
        let src = HostSources {
            sysfs: &sysfs,
            cgroup_root: Path::new("/nonexistent"),
            lookup: &lookup,
        };
        let e = place(&src, rec, Path::new("/d")).unwrap_err();
        assert!(
            e.to_string().contains("io.siloc.numa") && e.to_string().contains("node 2"),
            "{e}"
        );
    }
}
