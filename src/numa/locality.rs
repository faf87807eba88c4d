//! Device locality: which block devices sit behind a path, and on which NUMA node
//! they are attached. Shared by NUMA placement (the node) and I/O policies (the
//! whole disk that `io.max` and `blkio.throttle.*` accept).
//!
//! The walk, all in sysfs (kernel ABI `sysfs-dev`, `sysfs-block`):
//! path → `st_dev` → `/sys/dev/block/MAJ:MIN` → whole disk (a partition's parent
//! directory) → the physical devices under it: device-mapper and md stacks through
//! `slaves/` (recursively), a loop device through its `loop/backing_file`'s own
//! device, an NVMe multipath head through `multipath/` to each path's controller →
//! the first `numa_node` found walking up from the device's `device` link. For a
//! virtio disk that is the PCI function above the virtio device
//! (`/sys/block/vdX/device/../numa_node`; `device/numa_node` does not exist).
//! `-1` (no affinity, e.g. virtio on a one-node VM) is `None`: unknown, not an error.
//!
//! Both the sysfs root and the `st_dev` lookup are parameters, so fixtures under
//! `tests/fixtures/sysfs/` can say "this path is on 259:1".

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::sys::blockdev::DevNum;
use crate::sys::blockdev::{name_of, whole_disk};

/// Errors resolving a path to devices; each names the path or sysfs file.
#[derive(Debug, thiserror::Error)]
pub enum LocalityError {
    #[error("stat {path}: {source}")]
    Lookup {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("read {path}: {source}")]
    Sysfs {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {text:?} is not a MAJ:MIN device number")]
    DevNum { path: PathBuf, text: String },
    #[error("{path}: device stack deeper than {MAX_DEPTH} levels (a cycle?)")]
    TooDeep { path: PathBuf },
}

/// How deep dm/md/loop stacks may go before the walk gives up.
const MAX_DEPTH: usize = 16;

/// Finds the device (`st_dev`) of the filesystem holding a path.
pub trait DevLookup {
    /// Errors: the path (or, for [`StatLookup`], each of its ancestors) cannot be
    /// examined.
    fn dev_of(&self, path: &Path) -> std::io::Result<DevNum>;
}

/// The host: `stat(2)` of the path, or of its nearest existing ancestor (so a
/// writable layer siloc has not made yet resolves to the filesystem it will be on).
pub struct StatLookup;

impl DevLookup for StatLookup {
    fn dev_of(&self, path: &Path) -> std::io::Result<DevNum> {
        let mut p = path;
        loop {
            match nix::sys::stat::stat(p) {
                Ok(st) => return Ok(DevNum::from_raw(st.st_dev)),
                Err(nix::errno::Errno::ENOENT) => match p.parent() {
                    Some(parent) => p = parent,
                    None => return Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
                },
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// A fixed table for tests: the longest listed prefix of a path gives its device.
#[cfg(test)]
#[derive(Debug, Clone, Default)]
pub(crate) struct MapLookup(pub std::collections::BTreeMap<PathBuf, DevNum>);

#[cfg(test)]
impl MapLookup {
    /// A table from `(path prefix, (major, minor))` pairs.
    pub(crate) fn of(entries: &[(&str, (u32, u32))]) -> MapLookup {
        MapLookup(
            entries
                .iter()
                .map(|(p, (a, b))| (PathBuf::from(p), DevNum::new(*a, *b)))
                .collect(),
        )
    }
}

#[cfg(test)]
impl DevLookup for MapLookup {
    fn dev_of(&self, path: &Path) -> std::io::Result<DevNum> {
        self.0
            .iter()
            .filter(|(prefix, _)| path.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.components().count())
            .map(|(_, d)| *d)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

/// A physical device at the bottom of a stack, with its NUMA node (`None`: unknown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Leaf {
    /// Whole-disk name (`nvme0n1`, `vda`), or a multipath path (`nvme0c1n1`).
    pub(crate) name: String,
    pub(crate) node: Option<u32>,
}

/// The devices behind one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathDevices {
    pub(crate) path: PathBuf,
    /// The whole disk holding the path's filesystem (a partition's parent; a dm,
    /// md or loop device itself): what `io.max` and `blkio.throttle.*` take.
    pub(crate) disk: String,
    pub dev: DevNum,
    /// The physical devices under `disk`, with their nodes.
    pub(crate) leaves: Vec<Leaf>,
}

impl PathDevices {
    /// The distinct known nodes of the leaves, ascending.
    pub(crate) fn nodes(&self) -> Vec<u32> {
        let mut n: Vec<u32> = self.leaves.iter().filter_map(|l| l.node).collect();
        n.sort_unstable();
        n.dedup();
        n
    }

    /// `disk(MAJ:MIN)` and, when the leaves differ from it, `→ leaf@node,…`; `?` for
    /// an unknown node. For logs and the decision annotations.
    pub(crate) fn describe(&self) -> String {
        let leaf = |l: &Leaf| match l.node {
            Some(n) => format!("{}@{n}", l.name),
            None => format!("{}@?", l.name),
        };
        match self.leaves.as_slice() {
            [l] if l.name == self.disk => format!("{}({})", leaf(l), self.dev),
            ls => format!(
                "{}({})>{}",
                self.disk,
                self.dev,
                ls.iter().map(leaf).collect::<Vec<_>>().join("+")
            ),
        }
    }
}

/// Resolves devices under a sysfs root with a `st_dev` lookup.
pub struct Resolver<'a> {
    pub sysfs: &'a Path,
    pub lookup: &'a dyn DevLookup,
}

fn sysfs_err(path: &Path) -> impl Fn(std::io::Error) -> LocalityError + '_ {
    move |source| LocalityError::Sysfs {
        path: path.to_path_buf(),
        source,
    }
}

impl Resolver<'_> {
    /// The devices behind `path`, or `None` when its filesystem is not on a block
    /// device (tmpfs, proc, overlayfs' own st_dev, NFS; btrfs reports an anonymous
    /// device and lands here too).
    ///
    /// Errors: [`LocalityError`] when the lookup or a sysfs read fails.
    pub fn resolve(&self, path: &Path) -> Result<Option<PathDevices>, LocalityError> {
        let dev = self
            .lookup
            .dev_of(path)
            .map_err(|source| LocalityError::Lookup {
                path: path.to_path_buf(),
                source,
            })?;
        let Some(dir) = self.dev_dir(dev)? else {
            return Ok(None);
        };
        let disk_dir = whole_disk(&dir);
        let disk_dev = read_dev(&disk_dir)?;
        let mut leaves = Vec::new();
        self.leaves(&disk_dir, 0, &mut leaves)?;
        Ok(Some(PathDevices {
            path: path.to_path_buf(),
            disk: name_of(&disk_dir),
            dev: disk_dev,
            leaves,
        }))
    }

    /// `/sys/dev/block/MAJ:MIN`, canonical; `None` when there is no such device.
    fn dev_dir(&self, dev: DevNum) -> Result<Option<PathBuf>, LocalityError> {
        match crate::sys::blockdev::dev_dir(self.sysfs, dev) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(sysfs_err(
                &self.sysfs.join("dev/block").join(dev.to_string()),
            )(e)),
        }
    }

    fn leaves(&self, disk: &Path, depth: usize, out: &mut Vec<Leaf>) -> Result<(), LocalityError> {
        if depth > MAX_DEPTH {
            return Err(LocalityError::TooDeep {
                path: disk.to_path_buf(),
            });
        }
        let mut push = |l: Leaf| {
            if !out.contains(&l) {
                out.push(l);
            }
        };
        // dm and md: the devices they are built from (partitions → their disks).
        let below = list_links(&disk.join("slaves"))?;
        if !below.is_empty() {
            for s in below {
                self.leaves(&whole_disk(&s), depth + 1, out)?;
            }
            return Ok(());
        }
        // NVMe native multipath head: one path per controller.
        let paths = list_links(&disk.join("multipath"))?;
        if !paths.is_empty() {
            for p in paths {
                push(Leaf {
                    name: name_of(&p),
                    node: self.numa_node(&p)?,
                });
            }
            return Ok(());
        }
        // loop: the device holding the backing file.
        let backing = disk.join("loop/backing_file");
        if backing.exists() {
            let text = std::fs::read_to_string(&backing).map_err(sysfs_err(&backing))?;
            let file = text.trim_end_matches('\n');
            let resolved = if file.ends_with(" (deleted)") {
                None
            } else {
                match self.lookup.dev_of(Path::new(file)) {
                    Ok(dev) => self.dev_dir(dev)?,
                    // The file may be out of reach (another mount namespace).
                    Err(_) => None,
                }
            };
            match resolved {
                Some(d) => return self.leaves(&whole_disk(&d), depth + 1, out),
                None => {
                    push(Leaf {
                        name: name_of(disk),
                        node: None,
                    });
                    return Ok(());
                }
            }
        }
        push(Leaf {
            name: name_of(disk),
            node: self.numa_node(disk)?,
        });
        Ok(())
    }

    /// The first `numa_node` walking up from `dir/device` within sysfs' `devices`;
    /// negative values (no affinity) and no file at all are `None`.
    fn numa_node(&self, dir: &Path) -> Result<Option<u32>, LocalityError> {
        let link = dir.join("device");
        let Ok(start) = std::fs::canonicalize(&link) else {
            return Ok(None);
        };
        let top = std::fs::canonicalize(self.sysfs.join("devices")).unwrap_or_default();
        let mut cur = start.as_path();
        while cur.starts_with(&top) && cur != top {
            let f = cur.join("numa_node");
            if f.exists() {
                let text = std::fs::read_to_string(&f).map_err(sysfs_err(&f))?;
                return Ok(text
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .and_then(|n| u32::try_from(n).ok()));
            }
            match cur.parent() {
                Some(p) => cur = p,
                None => break,
            }
        }
        Ok(None)
    }
}

fn read_dev(dir: &Path) -> Result<DevNum, LocalityError> {
    let p = dir.join("dev");
    match crate::sys::blockdev::read_dev(dir) {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(LocalityError::DevNum {
            text: std::fs::read_to_string(&p)
                .unwrap_or_default()
                .trim()
                .to_string(),
            path: p,
        }),
        Err(e) => Err(sysfs_err(&p)(e)),
    }
}

/// The canonical targets of the links in `dir`, sorted by name; empty when the
/// directory does not exist (git keeps no empty `slaves/` in fixtures).
fn list_links(dir: &Path) -> Result<Vec<PathBuf>, LocalityError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(sysfs_err(dir)(e)),
    };
    let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    names.sort();
    names
        .into_iter()
        .map(|p| std::fs::canonicalize(&p).map_err(sysfs_err(&p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numa::topology::fixture;

    fn resolve(host: &str, table: &[(&str, (u32, u32))], path: &str) -> Option<PathDevices> {
        let lookup = MapLookup::of(table);
        let sysfs = fixture(host);
        Resolver {
            sysfs: &sysfs,
            lookup: &lookup,
        }
        .resolve(Path::new(path))
        .unwrap()
    }

    fn leaves(p: &PathDevices) -> Vec<(String, Option<u32>)> {
        p.leaves.iter().map(|l| (l.name.clone(), l.node)).collect()
    }

    #[test]
    fn nvme_partition_resolves_to_disk_and_socket() {
        let t = [("/", (259, 1)), ("/data", (259, 4))];
        let p = resolve("intel-2s-ht", &t, "/var/lib/siloc/containers/c1/upper").unwrap();
        assert_eq!((p.disk.as_str(), p.dev), ("nvme0n1", DevNum::new(259, 0)));
        assert_eq!(leaves(&p), vec![("nvme0n1".into(), Some(0))]);
        assert_eq!(p.describe(), "nvme0n1@0(259:0)");
        let p = resolve("intel-2s-ht", &t, "/data/vol").unwrap();
        assert_eq!((p.disk.as_str(), p.dev), ("nvme1n1", DevNum::new(259, 3)));
        assert_eq!(p.nodes(), vec![1]);
    }

    #[test]
    fn lvm_goes_through_slaves() {
        let p = resolve("lvm-nvme", &[("/", (253, 0))], "/srv").unwrap();
        assert_eq!((p.disk.as_str(), p.dev), ("dm-0", DevNum::new(253, 0)));
        assert_eq!(leaves(&p), vec![("nvme1n1".into(), Some(1))]);
        assert_eq!(p.describe(), "dm-0(253:0)>nvme1n1@1");
    }

    #[test]
    fn md_raid_across_nodes_has_two_leaves() {
        let p = resolve("md-raid", &[("/", (9, 0))], "/x").unwrap();
        assert_eq!(p.disk, "md0");
        assert_eq!(
            leaves(&p),
            vec![("nvme0n1".into(), Some(0)), ("nvme1n1".into(), Some(1))]
        );
        assert_eq!(p.nodes(), vec![0, 1]);
        // two partitions of one disk are one leaf
        let p = resolve("md-raid", &[("/", (9, 1))], "/x").unwrap();
        assert_eq!(leaves(&p), vec![("nvme1n1".into(), Some(1))]);
    }

    #[test]
    fn loop_follows_backing_file() {
        let t = [("/", (7, 0)), ("/srv/images", (259, 3))];
        let p = resolve("loop-file", &t, "/var/lib/siloc").unwrap();
        assert_eq!((p.disk.as_str(), p.dev), ("loop0", DevNum::new(7, 0)));
        assert_eq!(leaves(&p), vec![("nvme1n1".into(), Some(1))]);
        // backing file out of reach: the loop device itself, node unknown
        let p = resolve("loop-file", &[("/var", (7, 0))], "/var/x").unwrap();
        assert_eq!(leaves(&p), vec![("loop0".into(), None)]);
    }

    #[test]
    fn multipath_head_lists_each_controller() {
        let p = resolve("nvme-mpath", &[("/", (259, 0))], "/x").unwrap();
        assert_eq!(p.disk, "nvme0n1");
        assert_eq!(
            leaves(&p),
            vec![("nvme0c0n1".into(), Some(0)), ("nvme0c1n1".into(), Some(1))]
        );
    }

    #[test]
    fn virtio_node_is_on_the_pci_parent() {
        // one-node VM: numa_node -1 on the PCI function is "unknown"
        let p = resolve("vm-virtio", &[("/", (254, 1))], "/").unwrap();
        assert_eq!((p.disk.as_str(), p.dev), ("vda", DevNum::new(254, 0)));
        assert_eq!(leaves(&p), vec![("vda".into(), None)]);
        assert_eq!(p.describe(), "vda@?(254:0)");
        // two-node VM: vdb behind an expander bridge of node 1
        let p = resolve("vm-2node", &[("/", (254, 16))], "/").unwrap();
        assert_eq!(leaves(&p), vec![("vdb".into(), Some(1))]);
    }

    #[test]
    fn non_block_filesystems_are_none() {
        assert!(resolve("vm-virtio", &[("/", (0, 45))], "/dev/shm").is_none());
    }

    #[test]
    fn lookup_failure_names_the_path() {
        let lookup = MapLookup::of(&[("/a", (1, 1))]);
        let sysfs = fixture("vm-virtio");
        let e = Resolver {
            sysfs: &sysfs,
            lookup: &lookup,
        }
        .resolve(Path::new("/b/c"))
        .unwrap_err();
        assert!(e.to_string().contains("/b/c"), "{e}");
    }

    #[test]
    fn stat_lookup_uses_nearest_existing_ancestor() {
        let d = tempfile::tempdir().unwrap();
        let here = StatLookup.dev_of(d.path()).unwrap();
        assert_eq!(StatLookup.dev_of(&d.path().join("not/yet")).unwrap(), here);
    }
}
