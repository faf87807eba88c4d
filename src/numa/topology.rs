//! The host's NUMA topology as sysfs shows it (kernel docs: ABI
//! `sysfs-devices-system-cpu`, `sysfs-devices-node`): nodes and their CPUs, distances,
//! online and isolated CPUs, and SMT siblings. Read from a sysfs root (`/sys`, or a
//! fixture under `tests/fixtures/sysfs/<host>/`), so every rule built on it is testable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use super::cpulist::{CpuList, CpuListError};

/// Errors reading the topology; each names the sysfs file.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    List { path: PathBuf, source: CpuListError },
    #[error("{path}: {text:?} is not a list of node distances")]
    Distance { path: PathBuf, text: String },
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `nodeN/cpulist`: the CPUs on this node, online or not. Empty for memory-only
    /// nodes (CXL, HBM).
    pub(crate) cpus: CpuList,
    /// `nodeN/distance`: node id → ACPI SLIT distance (10 = local).
    distances: BTreeMap<u32, u32>,
}

/// The NUMA topology of a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Online nodes by id.
    pub nodes: BTreeMap<u32, Node>,
    /// `cpu/online`.
    pub(crate) online: CpuList,
    /// `cpu/isolated` (`isolcpus=`): CPUs the admin keeps for other work; siloc
    /// never places a container on them.
    pub(crate) isolated: CpuList,
    /// `cpuN/topology/thread_siblings_list` for each online CPU: the hardware
    /// threads of its physical core (itself alone without SMT).
    pub(crate) siblings: BTreeMap<u32, CpuList>,
}

fn read(path: &Path) -> Result<String, TopologyError> {
    std::fs::read_to_string(path).map_err(|source| TopologyError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_list(path: &Path) -> Result<CpuList, TopologyError> {
    CpuList::parse(&read(path)?).map_err(|source| TopologyError::List {
        path: path.to_path_buf(),
        source,
    })
}

/// Like [`read_list`], but a missing file is the empty list.
fn read_list_or_empty(path: &Path) -> Result<CpuList, TopologyError> {
    if path.exists() {
        read_list(path)
    } else {
        Ok(CpuList::default())
    }
}

impl Topology {
    /// Reads the topology under `sysfs` (normally `/sys`). A kernel without NUMA
    /// support (no `devices/system/node`) is one node 0 holding every online CPU.
    ///
    /// Errors: [`TopologyError`] naming the file that is missing or malformed;
    /// `cpu/online` is required, `cpu/isolated` and sibling lists are optional.
    pub fn read(sysfs: &Path) -> Result<Topology, TopologyError> {
        let cpu_dir = sysfs.join("devices/system/cpu");
        let online = read_list(&cpu_dir.join("online"))?;
        let isolated = read_list_or_empty(&cpu_dir.join("isolated"))?;
        let mut siblings = BTreeMap::new();
        for c in online.iter() {
            let p = cpu_dir.join(format!("cpu{c}/topology/thread_siblings_list"));
            let s = read_list_or_empty(&p)?;
            siblings.insert(
                c,
                if s.is_empty() {
                    CpuList::from_ids([c])
                } else {
                    s
                },
            );
        }
        let node_dir = sysfs.join("devices/system/node");
        let mut nodes = BTreeMap::new();
        if !node_dir.is_dir() {
            nodes.insert(
                0,
                Node {
                    cpus: online.clone(),
                    distances: BTreeMap::from([(0, 10)]),
                },
            );
        } else {
            let ids = read_list(&node_dir.join("online"))?;
            for id in ids.iter() {
                let d = node_dir.join(format!("node{id}"));
                let cpus = read_list_or_empty(&d.join("cpulist"))?;
                let dpath = d.join("distance");
                let text = read(&dpath)?;
                let bad = || TopologyError::Distance {
                    path: dpath.clone(),
                    text: text.trim().to_string(),
                };
                // The kernel prints one distance per online node, in node order.
                let values: Vec<u32> = text
                    .split_whitespace()
                    .map(|v| v.parse().map_err(|_| bad()))
                    .collect::<Result<_, _>>()?;
                if values.len() != ids.len() {
                    return Err(bad());
                }
                let distances = ids.iter().zip(values).collect();
                nodes.insert(id, Node { cpus, distances });
            }
        }
        Ok(Topology {
            nodes,
            online,
            isolated,
            siblings,
        })
    }

    /// Whether placement can matter: more than one online node.
    pub fn is_multi_node(&self) -> bool {
        self.nodes.len() > 1
    }

    /// The CPUs a container placed on `node` may use: the node's online CPUs that
    /// are not isolated, as whole physical cores — a core counts only when all of its
    /// online SMT siblings are usable, so a container never shares a core with an
    /// isolated thread. Empty for an unknown node or one without usable CPUs.
    pub fn usable_cpus(&self, node: u32) -> CpuList {
        let Some(n) = self.nodes.get(&node) else {
            return CpuList::default();
        };
        let base = n.cpus.intersection(&self.online).difference(&self.isolated);
        base.iter()
            .filter(|c| {
                self.siblings
                    .get(c)
                    .is_none_or(|s| s.intersection(&self.online).is_subset(&base))
            })
            .collect()
    }

    /// The node holding `cpu`, if any.
    #[cfg(test)]
    fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.nodes
            .iter()
            .find(|(_, n)| n.cpus.contains(cpu))
            .map(|(id, _)| *id)
    }

    /// SLIT distance from node `a` to node `b`, if both are known.
    #[cfg(test)]
    fn distance(&self, a: u32, b: u32) -> Option<u32> {
        self.nodes
            .get(&a)
            .and_then(|n| n.distances.get(&b).copied())
    }
}

/// The fixture sysfs trees under `tests/fixtures/sysfs/` (for tests in any module).
#[cfg(test)]
pub(crate) fn fixture(host: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> CpuList {
        CpuList::parse(s).unwrap()
    }

    #[test]
    fn two_socket_intel_with_hyperthreads() {
        let t = Topology::read(&fixture("intel-2s-ht")).unwrap();
        assert!(t.is_multi_node());
        assert_eq!(t.nodes.len(), 2);
        assert_eq!(t.nodes[&0].cpus, list("0-23,48-71"));
        assert_eq!(t.siblings[&5], list("5,53"));
        assert_eq!(t.distance(0, 1), Some(21));
        assert_eq!(t.distance(1, 1), Some(10));
        // cpu 2 is isolated, so its sibling 50 goes too (whole cores only)
        assert_eq!(t.isolated, list("2"));
        assert_eq!(t.usable_cpus(0), list("0-1,3-23,48-49,51-71"));
        assert_eq!(t.usable_cpus(1), list("24-47,72-95"));
        assert_eq!(t.node_of_cpu(72), Some(1));
        assert!(t.usable_cpus(7).is_empty());
    }

    #[test]
    fn amd_nps4_has_eight_nodes() {
        let t = Topology::read(&fixture("amd-nps4")).unwrap();
        assert_eq!(
            t.nodes.keys().copied().collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(t.nodes[&3].cpus, list("24-31,88-95"));
        assert_eq!(t.distance(0, 1), Some(12));
        assert_eq!(t.distance(0, 4), Some(32));
        // cpu 95 is offline: its sibling 31 is still a whole core among online CPUs
        assert_eq!(t.usable_cpus(3), list("24-31,88-94"));
    }

    #[test]
    fn single_node_vm() {
        let t = Topology::read(&fixture("vm-virtio")).unwrap();
        assert!(!t.is_multi_node());
        assert_eq!(t.usable_cpus(0), list("0-3"));
    }

    #[test]
    fn missing_node_dir_is_one_node() {
        let d = tempfile::tempdir().unwrap();
        let cpu = d.path().join("devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), "0-3\n").unwrap();
        let t = Topology::read(d.path()).unwrap();
        assert!(!t.is_multi_node());
        assert_eq!(t.usable_cpus(0), list("0-3"));
    }

    #[test]
    fn errors_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        let e = Topology::read(d.path()).unwrap_err();
        assert!(e.to_string().contains("devices/system/cpu/online"), "{e}");
        let cpu = d.path().join("devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), "0-x\n").unwrap();
        let e = Topology::read(d.path()).unwrap_err();
        assert!(
            e.to_string().contains("online") && e.to_string().contains("0-x"),
            "{e}"
        );
        std::fs::write(cpu.join("online"), "0-1\n").unwrap();
        let node = d.path().join("devices/system/node");
        std::fs::create_dir_all(node.join("node0")).unwrap();
        std::fs::write(node.join("online"), "0\n").unwrap();
        std::fs::write(node.join("node0/distance"), "10 20\n").unwrap();
        let e = Topology::read(d.path()).unwrap_err();
        assert!(e.to_string().contains("node0/distance"), "{e}");
    }
}
