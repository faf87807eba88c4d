//! runc's cgroup behaviour where libcgroups 0.7 (cgroupfs driver) differs, mostly on
//! cgroup v1 and the v1/v2 hybrid (v1 controllers, an empty cgroup2 at
//! /sys/fs/cgroup/unified).
//!
//! - `linux.resources.unified` on a host that is not pure cgroup v2: refused with
//!   runc's "invalid configuration: cannot use unified on cgroup v1" (libcgroups'
//!   v1 manager ignores it silently).
//! - `pids.limit` 0 means 1: runc writes `pids.max` 1, as systemd's TasksMax does (it
//!   has no 0); libcgroups writes `max` for anything below 1 (runc's cgroups fs/pids.go).
//!   libcontainer cannot start under a limit of 1 at all: its intermediate process
//!   joins the cgroup, applies the limits, then forks the init (EAGAIN). So 0 and 1
//!   reach libcontainer as 0 (`max`), and siloc writes `pids.max` 1 once the
//!   intermediate process is gone, before the container starts ([`after_create`]).
//! - A cgroup that already holds processes is refused with runc's "container's cgroup
//!   is not empty: N process(es) found" (runc 1.2+, libcontainer/factory_linux.go;
//!   libcgroups joins it and the delete then kills the strangers).
//! - `blockIO.weightDevice` on v1: per-device weights written to
//!   `blkio.bfq.weight_device` (or `blkio.weight_device` without BFQ files) and
//!   `blkio.leaf_weight_device`, as runc's fs/blkio.go; libcgroups ignores them. The
//!   kernel takes a per-device BFQ weight only for a disk whose scheduler is bfq
//!   (EOPNOTSUPP otherwise, in runc too).
//! - The init joins the hierarchies libcgroups' v1 manager leaves out: the named
//!   ones (`name=systemd`) and, on the hybrid, the unified one, at the container's
//!   cgroup path, as runc's fs manager does: siloc makes them before libcontainer
//!   forks and its children are born in them ([`make_extra`],
//!   engine::cgroup_handoff); the container's own directories (made or found) and
//!   the parents siloc made are recorded and removed at delete ([`remove_extra`]),
//!   empty sub-cgroups below the own ones included, as runc's fs manager removes a
//!   container's paths whoever made them.
//!
//! The systemd driver is left alone (systemd owns those cgroups).

use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxBlockIo, Spec};

use crate::sys::cgroup::{Hierarchy, controller_dir_of, hierarchies, path_in, v1_dir_of};
use crate::sys::mountinfo::Mount;

/// The file, in the container's record dir, listing the container's extra cgroup
/// directories: the parents siloc made and its own ones (one absolute path a line,
/// parents first).
pub const EXTRA_CGROUPS_FILE: &str = "extra-cgroups";

/// Errors, in runc's words where runc has them.
#[derive(Debug, thiserror::Error)]
pub enum CgroupCompatError {
    #[error("invalid configuration: cannot use unified on cgroup v1")]
    UnifiedOnV1,
    #[error(
        "linux.resources.unified: key {0:?} must be a file name in the container's cgroup (no '/', not '.' or '..'), as runc requires"
    )]
    UnifiedKey(String),
    #[error("container's cgroup is not empty: {count} process(es) found ({dir})")]
    NotEmpty { count: usize, dir: PathBuf },
    #[error("failed to write {value:?}: write {path}: {msg}")]
    Write {
        value: String,
        path: PathBuf,
        msg: String,
    },
    #[error("{path}: {msg}")]
    Io { path: PathBuf, msg: String },
    /// runc's text for a huge page size the host lacks (the limit file it opens does
    /// not exist), then the field and the sizes the host has.
    #[error(
        "unable to start container process: error during container init: error setting \
         cgroup config for procHooks process: openat2 {file}: no such file or directory \
         (linux.resources.hugepageLimits[{index}].pageSize {size:?}: the host's huge page \
         sizes are {host} ({HUGEPAGES}))"
    )]
    HugePageSize {
        index: usize,
        size: String,
        file: PathBuf,
        host: String,
    },
}

/// Where the kernel lists the huge page sizes it has (one `hugepages-<N>kB` directory
/// each; admin-guide/mm/hugetlbpage.rst).
pub const HUGEPAGES: &str = "/sys/kernel/mm/hugepages";

/// The directory a cgroupfs `cgroups_path` names in `h`: below the hierarchy's root
/// when absolute, below siloc's own cgroup (`own`, /proc/self/cgroup) when relative.
/// The path is cleaned first as runc's `utils.CleanPath` cleans it (`..` never climbs
/// above its base): `../../x` names `x`, not a directory outside the hierarchy.
pub fn dir_in(h: &Hierarchy, own: &str, cgroups_path: &Path) -> PathBuf {
    let base = if cgroups_path.is_absolute() {
        PathBuf::from("/")
    } else {
        PathBuf::from(path_in(own, h).unwrap_or_else(|| "/".into()))
    };
    let inner = crate::sys::paths::clean(cgroups_path);
    let rel = base.join(inner.strip_prefix("/").unwrap_or(&inner));
    h.mount_point.join(rel.strip_prefix("/").unwrap_or(&rel))
}

/// Whether the host is pure cgroup v2 (libcgroups' "unified" setup).
pub fn host_is_v2() -> bool {
    crate::sys::cgroup::is_v2(Path::new(crate::sys::cgroup::ROOT))
}

/// The hierarchies libcgroups' v1 manager does not join: named v1 ones and, on the
/// hybrid, the cgroup2 one. Empty on a pure v2 host.
pub fn extra_hierarchies(all: &[Hierarchy]) -> Vec<Hierarchy> {
    if all.iter().all(|h| h.v2) {
        return Vec::new();
    }
    all.iter().filter(|h| h.v2 || h.named()).cloned().collect()
}

/// Adjusts the final spec for libcontainer: `pids.limit` 1 becomes 0, which siloc
/// writes as 1 after create (module doc).
pub fn fix_spec(spec: &mut Spec) {
    if let Some(p) = spec
        .linux_mut()
        .as_mut()
        .and_then(|l| l.resources_mut().as_mut())
        .and_then(|r| r.pids_mut().as_mut())
        && p.limit() == 1
    {
        p.set_limit(0);
    }
}

/// Whether `spec` asks for `pids.max` 1 (limit 0 or 1).
fn wants_one_pid(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.pids().as_ref())
        .is_some_and(|p| matches!(p.limit(), 0 | 1))
}

/// `pids.limit` 0 becomes 1 in `r`, for `update` of a running container (runc's
/// fs/pids.go).
pub fn fix_resources(r: &mut oci_spec::runtime::LinuxResources) {
    if let Some(p) = r.pids_mut().as_mut()
        && p.limit() == 0
    {
        p.set_limit(1);
    }
}

/// The keys of `linux.resources.unified` (create and `update`): each must name a file
/// of the container's own cgroup. libcgroups joins the key onto the cgroup's path, so
/// `../memory.max` or an absolute path would write outside it; runc refuses a key with
/// a '/' (runc libcontainer/cgroups/fs2).
///
/// Errors: [`CgroupCompatError::UnifiedKey`] naming the first bad key.
pub fn check_unified_keys(
    resources: Option<&oci_spec::runtime::LinuxResources>,
) -> Result<(), CgroupCompatError> {
    let keys = resources
        .and_then(|r| r.unified().as_ref())
        .into_iter()
        .flat_map(|u| u.keys());
    for k in keys {
        if k.is_empty() || k.contains('/') || k == "." || k == ".." || k.contains('\0') {
            return Err(CgroupCompatError::UnifiedKey(k.clone()));
        }
    }
    Ok(())
}

/// The checks before anything is made, for the cgroupfs driver: unified resources on
/// a host that is not pure v2, and a cgroup that already holds processes (counted in
/// the v1 devices hierarchy, or the v2 one, recursively, as runc's GetAllPids).
///
/// Errors: [`CgroupCompatError::UnifiedOnV1`], [`CgroupCompatError::NotEmpty`].
pub fn check_create(
    spec: &Spec,
    mounts: &[Mount],
    own: &str,
    host_v2: bool,
) -> Result<(), CgroupCompatError> {
    let linux = spec.linux().as_ref();
    check_unified_keys(linux.and_then(|l| l.resources().as_ref()))?;
    let unified = linux
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.unified().as_ref())
        .is_some_and(|u| !u.is_empty());
    if unified && !host_v2 {
        return Err(CgroupCompatError::UnifiedOnV1);
    }
    let Some(cg) = linux.and_then(|l| l.cgroups_path().clone()) else {
        return Ok(());
    };
    let all = hierarchies(mounts);
    check_hugetlb(spec, &all, own, &cg, Path::new(HUGEPAGES))?;
    let probe = all.iter().find(|h| {
        if host_v2 {
            h.v2
        } else {
            h.controllers.iter().any(|c| c == "devices")
        }
    });
    if let Some(h) = probe {
        let dir = dir_in(h, own, &cg);
        let count = count_procs(&dir);
        if count > 0 {
            return Err(CgroupCompatError::NotEmpty { count, dir });
        }
    }
    Ok(())
}

/// `linux.resources.hugepageLimits`: each page size must be one the host has (under
/// `hugepages`, [`HUGEPAGES`] on the host), named as runc names them (`2MB`, `1GB`:
/// runc's getHugePageSizeFromFilenames). libcgroups fails a size it cannot parse with
/// "malformed page size 3" and runc one the host lacks with the missing limit file;
/// siloc refuses both before anything is made, with runc's words, the field and the
/// host's sizes. `all` are the host's cgroup hierarchies, `own` siloc's
/// /proc/self/cgroup, `cg` the container's cgroups path (for the file runc names).
/// Reads `hugepages` only when the spec has limits.
///
/// Errors: [`CgroupCompatError::HugePageSize`] for the first size the host lacks.
pub fn check_hugetlb(
    spec: &Spec,
    all: &[Hierarchy],
    own: &str,
    cg: &Path,
    hugepages: &Path,
) -> Result<(), CgroupCompatError> {
    let limits = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.hugepage_limits().as_ref());
    let Some(limits) = limits.filter(|l| !l.is_empty()) else {
        return Ok(());
    };
    let host = host_page_sizes(hugepages);
    let Some((index, bad)) = limits
        .iter()
        .enumerate()
        .find(|(_, l)| !host.contains(l.page_size()))
    else {
        return Ok(());
    };
    let size = bad.page_size().clone();
    let file = match all
        .iter()
        .find(|h| h.controllers.iter().any(|c| c == "hugetlb"))
    {
        Some(h) => dir_in(h, own, cg).join(format!("hugetlb.{size}.limit_in_bytes")),
        None => match all
            .iter()
            .find(|h| h.v2)
            .filter(|_| all.iter().all(|h| h.v2))
        {
            Some(h) => dir_in(h, own, cg).join(format!("hugetlb.{size}.max")),
            None => Path::new(crate::sys::cgroup::ROOT)
                .join("hugetlb")
                .join(crate::sys::paths::clean(cg).strip_prefix("/").unwrap_or(cg))
                .join(format!("hugetlb.{size}.limit_in_bytes")),
        },
    };
    Err(CgroupCompatError::HugePageSize {
        index,
        size,
        file,
        host: if host.is_empty() {
            "none".into()
        } else {
            host.join(", ")
        },
    })
}

/// The huge page sizes under `dir` (`hugepages-2048kB` → `2MB`), smallest first.
fn host_page_sizes(dir: &Path) -> Vec<String> {
    let mut kbs: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()
        })
        .collect();
    kbs.sort_unstable();
    kbs.into_iter().map(page_size_name).collect()
}

/// A page size of `kb` KiB as runc names it: the largest binary unit (`B`, `KB`, `MB`,
/// `GB`, `TB`, `PB`) that keeps the number at or above 1, printed as Go's `%g`.
fn page_size_name(kb: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KB", "MB", "GB", "TB", "PB"];
    let mut v = kb as f64 * 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v}{}", UNITS[unit])
}

/// Processes in cgroup `dir` and below (0 when it does not exist).
fn count_procs(dir: &Path) -> usize {
    let own = std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0);
    let below: usize = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| count_procs(&e.path()))
        .sum();
    own + below
}

fn write(path: &Path, value: &str) -> Result<(), CgroupCompatError> {
    std::fs::write(path, value).map_err(|e| CgroupCompatError::Write {
        value: value.to_string(),
        path: path.to_path_buf(),
        msg: crate::sys::errno::go_io_text(&e),
    })
}

/// Writes `b`'s per-device weights into v1 blkio cgroup `dir` (module doc).
///
/// Errors: [`CgroupCompatError::Write`] naming the file and value (the kernel refuses
/// a BFQ weight for a disk not under bfq with EOPNOTSUPP).
pub fn apply_weight_devices(dir: &Path, b: &LinuxBlockIo) -> Result<(), CgroupCompatError> {
    let Some(devs) = b.weight_device().as_ref() else {
        return Ok(());
    };
    let file = if dir.join("blkio.bfq.weight").exists() {
        "blkio.bfq.weight_device"
    } else {
        "blkio.weight_device"
    };
    for d in devs {
        if let Some(w) = d.weight().filter(|w| *w != 0) {
            write(&dir.join(file), &format!("{}:{} {w}", d.major(), d.minor()))?;
        }
        if let Some(w) = d.leaf_weight().filter(|w| *w != 0) {
            write(
                &dir.join("blkio.leaf_weight_device"),
                &format!("{}:{} {w}", d.major(), d.minor()),
            )?;
        }
    }
    Ok(())
}

/// What create does once libcontainer made the cgroups, before the container starts:
/// the per-device blkio weights and `pids.max` 1 for init `pid`. (The init is already
/// in the extra hierarchies: it was born there, [`make_extra`].)
///
/// Errors: a weight or `pids.max` write is refused.
pub fn after_create(spec: &Spec, pid: i32, mounts: &[Mount]) -> Result<(), CgroupCompatError> {
    let linux = spec.linux().as_ref();
    if let (Some(b), Some(dir)) = (
        linux
            .and_then(|l| l.resources().as_ref())
            .and_then(|r| r.block_io().as_ref()),
        v1_dir_of(mounts, pid, "blkio"),
    ) {
        apply_weight_devices(&dir, b)?;
    }
    if wants_one_pid(spec)
        && let Some(dir) = controller_dir_of(mounts, pid, "pids")
    {
        write(&dir.join("pids.max"), "1")?;
    }
    Ok(())
}

/// Makes the container's directories in the extra hierarchies (at the spec's
/// `cgroupsPath`, relative ones below siloc's own cgroup `own`) where missing, before
/// libcontainer forks: siloc's create process joins them and its children, the
/// intermediate process and the init, are born in them (engine::cgroup_handoff).
/// Returns one directory per extra hierarchy; none without a `cgroupsPath` or on a
/// pure v2 host.
///
/// Each directory made is listed in `record_dir`'s [`EXTRA_CGROUPS_FILE`] before it is
/// made, so a create killed between the two (SIGKILL of siloc or its shim) leaves a
/// list for `delete --force` to remove it by, never an unlisted directory
/// ([`remove_extra`] takes a listed one that was never made as gone). The container's
/// own directory is listed also when it was there already (another container's at
/// the same cgroupsPath, deleted first while this one ran, kept it): runc removes a
/// container's cgroup paths at delete whoever made them.
///
/// Errors: [`CgroupCompatError::Io`] naming the list or the directory.
pub fn make_extra(
    spec: &Spec,
    mounts: &[Mount],
    own: &str,
    record_dir: &Path,
) -> Result<Vec<PathBuf>, CgroupCompatError> {
    let Some(cg) = spec.linux().as_ref().and_then(|l| l.cgroups_path().clone()) else {
        return Ok(Vec::new());
    };
    let mut missing: Vec<PathBuf> = Vec::new();
    // The own directories found already there, then everything to make.
    let mut listed: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for h in extra_hierarchies(&hierarchies(mounts)) {
        let dir = dir_in(&h, own, &cg);
        let mut here: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|d| d.starts_with(&h.mount_point) && *d != h.mount_point && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        here.reverse();
        if here.is_empty() && dir != h.mount_point && dir.starts_with(&h.mount_point) {
            listed.push(dir.clone());
        }
        missing.extend(here);
        out.push(dir);
    }
    listed.extend(missing.iter().cloned());
    if listed.is_empty() {
        return Ok(out);
    }
    // One write of the whole list, parents first: rewriting it per hierarchy replaced a
    // file the filesystem had to allocate first (ext4's replace-by-rename heuristic),
    // and freeing those blocks again costs a synchronous discard at delete on a state
    // root mounted with `discard`.
    let list: String = listed
        .iter()
        .map(|d| format!("{}\n", d.display()))
        .collect();
    let path = record_dir.join(EXTRA_CGROUPS_FILE);
    crate::sys::fs::write_atomic(&path, list.as_bytes()).map_err(|e| CgroupCompatError::Io {
        path,
        msg: e.to_string(),
    })?;
    for d in &missing {
        std::fs::create_dir(d).map_err(|e| CgroupCompatError::Io {
            path: d.clone(),
            msg: e.to_string(),
        })?;
        crate::lifecycle::test_hooks::crash_point("after-extra-cgroup");
    }
    Ok(out)
}

/// The extra cgroup directories listed in `record_dir`, in the order they were made
/// (parents first); `None` when there is no list.
pub fn extra_dirs(record_dir: &Path) -> Option<Vec<PathBuf>> {
    let list = std::fs::read_to_string(record_dir.join(EXTRA_CGROUPS_FILE)).ok()?;
    Some(
        list.lines()
            .filter(|l| !l.is_empty())
            .map(PathBuf::from)
            .collect(),
    )
}

/// Whether `d`, one of the extra cgroup directories `dirs`, is a parent siloc made
/// above the container's own (a pod's level, shared with its other containers).
pub fn is_shared_parent(dirs: &[PathBuf], d: &Path) -> bool {
    dirs.iter().any(|o| o != d && o.starts_with(d))
}

/// Removes the extra cgroup directories listed in `record_dir` (deepest first);
/// gone ones are fine. Waits up to `wait` for the last processes to leave the
/// container's own directories (the deepest of each hierarchy), and removes the empty
/// cgroups below those (a stopped container's nested below it, not yet deleted, as
/// runc's recursive removal takes them). A parent it made (a
/// pod's level, shared with the pod's other containers) is removed only when it is
/// already empty: its siblings may outlive this container, as a pod's app containers
/// outlive its sandbox in StopPodSandbox (runc removes only the leaf, too).
///
/// Errors: a container's own directory still busy after `wait`.
pub fn remove_extra(record_dir: &Path, wait: std::time::Duration) -> Result<(), CgroupCompatError> {
    let path = record_dir.join(EXTRA_CGROUPS_FILE);
    let Some(dirs) = extra_dirs(record_dir) else {
        return Ok(());
    };
    let deadline = std::time::Instant::now() + wait;
    for d in dirs.iter().rev() {
        let parent = is_shared_parent(&dirs, d);
        loop {
            let removed = if parent {
                std::fs::remove_dir(d)
            } else {
                super::v1_subcgroups::remove_empty_tree(d)
            };
            match removed {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) if parent => {
                    tracing::debug!(dir = %d.display(), %e, "shared parent cgroup kept");
                    break;
                }
                Err(e) if std::time::Instant::now() > deadline => {
                    return Err(CgroupCompatError::Io {
                        path: d.clone(),
                        msg: e.to_string(),
                    });
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
    let _ = std::fs::remove_file(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HYBRID: &str = "\
30 25 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755\n\
31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n\
32 30 0:28 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n\
33 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
34 30 0:30 / /sys/fs/cgroup/devices rw - cgroup cgroup rw,devices\n";

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(json!({"ociVersion": "1.0.2", "root": {"path": "rootfs"},
            "linux": v}))
        .unwrap()
    }

    #[test]
    fn hybrid_extras_are_the_named_and_the_unified_hierarchy() {
        let all = hierarchies(&crate::sys::mountinfo::parse(HYBRID));
        assert_eq!(all.len(), 4);
        let extra = extra_hierarchies(&all);
        let points: Vec<_> = extra.iter().map(|h| h.mount_point.clone()).collect();
        assert_eq!(
            points,
            vec![
                PathBuf::from("/sys/fs/cgroup/unified"),
                PathBuf::from("/sys/fs/cgroup/systemd")
            ]
        );
        let own = "2:cpu,cpuacct:/a\n1:name=systemd:/user.slice\n0::/user.slice/x\n";
        assert_eq!(path_in(own, &all[2]).as_deref(), Some("/a"));
        assert_eq!(
            dir_in(&extra[0], own, Path::new("/c1")),
            PathBuf::from("/sys/fs/cgroup/unified/c1")
        );
        assert_eq!(
            dir_in(&extra[1], own, Path::new("c1")),
            PathBuf::from("/sys/fs/cgroup/systemd/user.slice/c1")
        );
        // `..` never leaves the base (runc's CleanPath)
        assert_eq!(
            dir_in(&extra[1], own, Path::new("../../escape")),
            PathBuf::from("/sys/fs/cgroup/systemd/user.slice/escape")
        );
        assert_eq!(
            dir_in(&extra[0], own, Path::new("/../x/../../y")),
            PathBuf::from("/sys/fs/cgroup/unified/y")
        );
        // pure v2: nothing extra
        let v2 = "31 25 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert!(extra_hierarchies(&hierarchies(&crate::sys::mountinfo::parse(v2))).is_empty());
    }

    #[test]
    fn huge_page_sizes_the_host_lacks_are_refused_in_runcs_words() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["hugepages-2048kB", "hugepages-1048576kB", "other"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        assert_eq!(host_page_sizes(dir.path()), ["2MB", "1GB"]);
        assert_eq!(page_size_name(64), "64KB");
        let with_hugetlb =
            format!("{HYBRID}35 30 0:31 / /sys/fs/cgroup/hugetlb rw - cgroup cgroup rw,hugetlb\n");
        let all = hierarchies(&crate::sys::mountinfo::parse(&with_hugetlb));
        let spec = |size: &str| -> Spec {
            serde_json::from_value(serde_json::json!({
                "ociVersion": "1.0.2",
                "linux": {"resources": {"hugepageLimits": [
                    {"pageSize": "2MB", "limit": 1048576},
                    {"pageSize": size, "limit": 1048576}
                ]}}
            }))
            .unwrap()
        };
        let cg = Path::new("/siloc-x");
        check_hugetlb(&spec("1GB"), &all, "", cg, dir.path()).unwrap();
        let e = check_hugetlb(&spec("3MB"), &all, "", cg, dir.path()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unable to start container process: error during container init: error setting \
             cgroup config for procHooks process: openat2 \
             /sys/fs/cgroup/hugetlb/siloc-x/hugetlb.3MB.limit_in_bytes: no such file or \
             directory (linux.resources.hugepageLimits[1].pageSize \"3MB\": the host's huge \
             page sizes are 2MB, 1GB (/sys/kernel/mm/hugepages))"
        );
        // pure v2: the v2 file
        let v2 = hierarchies(&crate::sys::mountinfo::parse(
            "31 25 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        ));
        let e = check_hugetlb(&spec("4MB"), &v2, "", cg, dir.path()).unwrap_err();
        assert!(
            e.to_string()
                .contains("openat2 /sys/fs/cgroup/siloc-x/hugetlb.4MB.max: no such file"),
            "{e}"
        );
    }

    #[test]
    fn unified_resources_refused_unless_pure_v2() {
        let s = spec(json!({"resources": {"unified": {"pids.max": "10"}}}));
        let m = crate::sys::mountinfo::parse(HYBRID);
        assert_eq!(
            check_create(&s, &m, "", false).unwrap_err().to_string(),
            "invalid configuration: cannot use unified on cgroup v1"
        );
        check_create(&s, &m, "", true).unwrap();
        let empty = spec(json!({"resources": {"unified": {}}}));
        check_create(&empty, &m, "", false).unwrap();
    }

    #[test]
    fn a_busy_shared_parent_is_kept_without_waiting() {
        let t = tempfile::tempdir().unwrap();
        let parent = t.path().join("pod");
        let leaf = parent.join("c1");
        let sibling = parent.join("c2");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::create_dir_all(&sibling).unwrap();
        let list = format!("{}\n{}\n", parent.display(), leaf.display());
        std::fs::write(t.path().join(EXTRA_CGROUPS_FILE), list).unwrap();
        let t0 = std::time::Instant::now();
        remove_extra(t.path(), std::time::Duration::from_secs(5)).unwrap();
        // Before: the sibling kept the parent busy until the wait ran out, then an error.
        assert!(t0.elapsed() < std::time::Duration::from_secs(2));
        assert!(!leaf.exists() && parent.exists() && sibling.exists());
        assert!(!t.path().join(EXTRA_CGROUPS_FILE).exists());
    }

    #[test]
    fn a_unified_key_must_be_a_file_of_the_cgroup() {
        let m = crate::sys::mountinfo::parse(HYBRID);
        for bad in ["../memory.max", "/sys/fs/cgroup/x", "a/b", "..", "."] {
            let s = spec(json!({"resources": {"unified": {bad: "10"}}}));
            let e = check_create(&s, &m, "", true).unwrap_err();
            assert!(
                matches!(e, CgroupCompatError::UnifiedKey(ref k) if k == bad),
                "{bad}: {e}"
            );
        }
        let good = spec(json!({"resources": {"unified": {"memory.high": "10M"}}}));
        check_create(&good, &m, "", true).unwrap();
    }

    #[test]
    fn pids_limit_one_reaches_libcontainer_as_zero() {
        let limit = |s: &Spec| {
            let r = s.linux().as_ref().unwrap().resources().as_ref().unwrap();
            r.pids().as_ref().unwrap().limit()
        };
        for (given, libcontainer, one) in
            [(0, 0, true), (1, 0, true), (2, 2, false), (-1, -1, false)]
        {
            let mut s = spec(json!({"resources": {"pids": {"limit": given}}}));
            assert_eq!(wants_one_pid(&s), one);
            fix_spec(&mut s);
            assert_eq!(limit(&s), libcontainer, "{given}");
        }
        let mut r: oci_spec::runtime::LinuxResources =
            serde_json::from_value(json!({"pids": {"limit": 0}})).unwrap();
        fix_resources(&mut r);
        assert_eq!(r.pids().as_ref().unwrap().limit(), 1);
    }

    #[test]
    fn weight_devices_go_to_the_bfq_file_when_there_is_one() {
        let d = tempfile::tempdir().unwrap();
        let b: LinuxBlockIo = serde_json::from_value(json!({"weightDevice": [
            {"major": 7, "minor": 0, "weight": 300}, {"major": 8, "minor": 0, "leafWeight": 20}]}))
        .unwrap();
        std::fs::write(d.path().join("blkio.bfq.weight"), "100").unwrap();
        apply_weight_devices(d.path(), &b).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("blkio.bfq.weight_device")).unwrap(),
            "7:0 300"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("blkio.leaf_weight_device")).unwrap(),
            "8:0 20"
        );
        std::fs::remove_file(d.path().join("blkio.bfq.weight")).unwrap();
        apply_weight_devices(d.path(), &b).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("blkio.weight_device")).unwrap(),
            "7:0 300"
        );
    }
}
