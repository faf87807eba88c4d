//! The cgroup v1 `cgroup` mount of a container that joins another's PID namespace by
//! path (a Kubernetes pod with `shareProcessNamespace`, CRI pid mode POD).
//!
//! libcontainer 0.7's `mount_cgroup_v1` finds "its own" cgroups by reading
//! `/proc/<getpid()>/cgroup` when its parent is outside its PID namespace. In a joined
//! PID namespace that number is the init's pid *inside* the pod, read from the host's
//! /proc: create fails at random with `failed to prepare rootfs` (no such host
//! process), and where the number names an unrelated host process, that process's
//! cgroups shape the binds. siloc therefore takes those mounts out of the spec
//! ([`take`]) and makes them itself once libcontainer has built the container
//! ([`apply`]), as runc does (libcontainer/rootfs_linux.go, `mountCgroupV1`): a tmpfs
//! (`nosuid,nodev,noexec,mode=755`) at the destination, one recursive bind per v1
//! hierarchy of the init's own cgroup (from `/proc/<host pid>/cgroup`), symlinks for
//! co-mounted controllers (`cpu` → `cpu,cpuacct`), and with `ro` every bind and the
//! tmpfs read-only with the mount's `nosuid`/`nodev`/`noexec`.
//!
//! Which hierarchies: the v1 ones (named ones such as `name=systemd` too) mounted right
//! under `/sys/fs/cgroup` in siloc's mount table, as libcontainer's list; the hybrid's
//! cgroup2 `unified` is not bound (libcontainer leaves it out as well). A mount of the
//! spec made below the cgroup destination before it would be covered: siloc's mounts
//! come after all of the spec's.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, setns};
use nix::unistd::Pid;
use oci_spec::runtime::{LinuxNamespaceType, Spec};

use super::cgroup_compat::{Hierarchy, hierarchies, path_in};
use crate::sys::mountapi;

/// Where libcontainer and runc look for the host's v1 hierarchies.
const HOST_ROOT: &str = "/sys/fs/cgroup";

/// `MOUNT_ATTR_NOSUID`, `MOUNT_ATTR_NODEV`, `MOUNT_ATTR_NOEXEC` (`<linux/mount.h>`).
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// A failure to make a cgroup mount; names the path and the step.
#[derive(Debug, thiserror::Error)]
pub enum PidnsCgroupError {
    #[error("cgroup mount {destination}: {step}: {errno}")]
    Mount {
        destination: String,
        step: String,
        errno: nix::Error,
    },
    #[error("cgroup mount: read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cgroup mount: clone {path}: {errno}")]
    Clone { path: String, errno: nix::Error },
    #[error("cgroup mount: helper: {0}")]
    Sys(nix::Error),
}

/// One `cgroup` mount of the spec that siloc makes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The mount's destination in the container (`/sys/fs/cgroup`).
    pub destination: PathBuf,
    /// `ro` among the mount's options.
    pub read_only: bool,
    /// `nosuid`, `nodev`, `noexec` among the mount's options, as mount(2) flags.
    pub flags: MsFlags,
}

/// Whether `linux.namespaces` joins a PID namespace by path.
fn joins_pid_namespace(spec: &Spec) -> bool {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .into_iter()
        .flatten()
        .any(|n| {
            n.typ() == LinuxNamespaceType::Pid
                && n.path().as_ref().is_some_and(|p| !p.as_os_str().is_empty())
        })
}

/// Removes the spec's `cgroup` mounts and returns them, when libcontainer would mount
/// them wrong: on a host with v1 hierarchies (`host_v2` false), in a container that
/// joins a PID namespace by path and does not join a mount namespace by path (there
/// siloc changes no mounts, [`super::mount_fixups`]). Otherwise leaves the spec alone
/// and returns nothing.
pub fn take(spec: &mut Spec, host_v2: bool) -> Vec<CgroupMount> {
    use super::mount_guard::{SpecMountNs, spec_mount_ns};
    if host_v2
        || !joins_pid_namespace(spec)
        || matches!(spec_mount_ns(spec), SpecMountNs::Joined(_))
    {
        return Vec::new();
    }
    let Some(mounts) = spec.mounts().clone() else {
        return Vec::new();
    };
    let (cgroup, rest): (Vec<_>, Vec<_>) = mounts
        .into_iter()
        .partition(|m| m.typ().as_deref() == Some("cgroup"));
    if cgroup.is_empty() {
        return Vec::new();
    }
    spec.set_mounts(Some(rest));
    cgroup
        .iter()
        .map(|m| {
            let opts = m.options().clone().unwrap_or_default();
            let has = |o: &str| opts.iter().any(|x| x == o);
            let mut flags = MsFlags::empty();
            for (name, f) in [
                ("nosuid", MsFlags::MS_NOSUID),
                ("nodev", MsFlags::MS_NODEV),
                ("noexec", MsFlags::MS_NOEXEC),
            ] {
                if has(name) {
                    flags |= f;
                }
            }
            CgroupMount {
                destination: m.destination().clone(),
                read_only: has("ro"),
                flags,
            }
        })
        .collect()
}

/// One bind to make: the host directory of the init's cgroup in a hierarchy, and the
/// name of its directory under the destination (the host mount point's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    pub source: PathBuf,
    pub name: String,
}

/// The binds for the process whose `/proc/PID/cgroup` is `own`: one per v1 hierarchy
/// of `mounts` (siloc's mount table) mounted right under `/sys/fs/cgroup`, at the
/// process's cgroup below the mount's root. Hierarchies the process has no line for
/// are left out (as libcontainer does).
pub fn binds(mounts: &[crate::sys::mountinfo::Mount], own: &str) -> Vec<Bind> {
    let root_of = |h: &Hierarchy| {
        crate::sys::mountinfo::top_at(mounts, &h.mount_point)
            .map_or_else(|| PathBuf::from("/"), |m| m.root.clone())
    };
    hierarchies(mounts)
        .into_iter()
        .filter(|h| !h.v2 && h.mount_point.parent() == Some(Path::new(HOST_ROOT)))
        .filter_map(|h| {
            let name = h.mount_point.file_name()?.to_str()?.to_string();
            let path = PathBuf::from(path_in(own, &h)?);
            let rel = path.strip_prefix(root_of(&h)).ok()?.to_path_buf();
            Some(Bind {
                source: h.mount_point.join(rel),
                name,
            })
        })
        .collect()
}

/// The symlinks for co-mounted controllers: (link name, target) for each controller of
/// a bind named `a,b` (`cpu` → `cpu,cpuacct`), as runc and libcontainer make them.
pub fn comount_links(binds: &[Bind]) -> Vec<(String, String)> {
    binds
        .iter()
        .filter(|b| b.name.contains(','))
        .flat_map(|b| b.name.split(',').map(|c| (c.to_string(), b.name.clone())))
        .collect()
}

/// Makes `taken` in the container whose init is host pid `pid`, from a short-lived
/// helper in its mount namespace and root (as [`super::mount_fixups`] does). The binds'
/// detached clones are made and made read-only here, in siloc's mount namespace, so
/// nothing of siloc's mount table is changed. Does nothing when `taken` is empty.
///
/// Errors: reading the init's cgroups or siloc's mountinfo, cloning a hierarchy, or
/// the first mount step that fails, naming it.
pub fn apply(taken: &[CgroupMount], pid: Pid) -> Result<(), PidnsCgroupError> {
    if taken.is_empty() {
        return Ok(());
    }
    let read = |path: String| {
        std::fs::read_to_string(&path).map_err(|source| PidnsCgroupError::Read { path, source })
    };
    let own = read(format!("/proc/{pid}/cgroup"))?;
    let mounts = crate::sys::mountinfo::parse(&read("/proc/self/mountinfo".into())?);
    let binds = binds(&mounts, &own);
    let links = comount_links(&binds);
    // One detached tree per (mount, hierarchy), each with the mount's own attributes.
    let mut trees: Vec<Vec<OwnedFd>> = Vec::new();
    for t in taken {
        let mut attrs = 0;
        if t.read_only {
            attrs |= mountapi::MOUNT_ATTR_RDONLY;
        }
        for (f, a) in [
            (MsFlags::MS_NOSUID, MOUNT_ATTR_NOSUID),
            (MsFlags::MS_NODEV, MOUNT_ATTR_NODEV),
            (MsFlags::MS_NOEXEC, MOUNT_ATTR_NOEXEC),
        ] {
            if t.flags.contains(f) {
                attrs |= a;
            }
        }
        let mut row = Vec::new();
        for b in &binds {
            let clone = |errno| PidnsCgroupError::Clone {
                path: b.source.display().to_string(),
                errno,
            };
            let tree = mountapi::clone_tree(&b.source, true).map_err(clone)?;
            if attrs != 0 {
                mountapi::set_attr(tree.as_fd(), attrs, None, true).map_err(clone)?;
            }
            row.push(tree);
        }
        trees.push(row);
    }
    let sys = |e: std::io::Error| {
        PidnsCgroupError::Sys(nix::Error::from_raw(e.raw_os_error().unwrap_or(0)))
    };
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/mnt")).map_err(sys)?;
    let root = std::fs::File::open(format!("/proc/{pid}/root")).map_err(sys)?;
    // Steps, numbered for the report: u32::MAX the setup, then per mount `i`:
    // i*STRIDE the tmpfs, +1+j bind j, +1+binds the links, +2+binds the read-only remount.
    let stride = binds.len() as u32 + 3;
    let helper = crate::sys::fork::spawn(|sock| {
        let outcome = setns(&ns, CloneFlags::CLONE_NEWNS)
            .and_then(|()| nix::unistd::fchdir(std::os::fd::AsRawFd::as_raw_fd(&root)))
            .and_then(|()| nix::unistd::chroot("."))
            .map_err(|e| (u32::MAX, e))
            .and_then(|()| {
                taken
                    .iter()
                    .zip(&trees)
                    .enumerate()
                    .try_for_each(|(i, (t, row))| {
                        make_one(t, &binds, row, &links)
                            .map_err(|(s, e)| (i as u32 * stride + s, e))
                    })
            });
        let _ = crate::sys::fork::report(sock, outcome.map(|()| None));
        0
    })
    .map_err(PidnsCgroupError::Sys)?;
    match crate::sys::fork::receive(helper.sock()).map_err(PidnsCgroupError::Sys)? {
        Ok(_) => Ok(()),
        Err((u32::MAX, errno)) => Err(PidnsCgroupError::Sys(errno)),
        Err((step, errno)) => {
            let (i, s) = ((step / stride) as usize, step % stride);
            let t = taken.get(i).map(|t| t.destination.display().to_string());
            let step = match s as usize {
                0 => "mount tmpfs".to_string(),
                j if j <= binds.len() => format!("bind {}", binds[j - 1].source.display()),
                j if j == binds.len() + 1 => "co-mount symlinks".to_string(),
                _ => "remount read-only".to_string(),
            };
            Err(PidnsCgroupError::Mount {
                destination: t.unwrap_or_default(),
                step,
                errno,
            })
        }
    }
}

/// In the helper (the container's mount namespace and root): one cgroup mount. Errors
/// carry the step (0 tmpfs, 1+j bind j, 1+binds links, 2+binds remount).
fn make_one(
    t: &CgroupMount,
    binds: &[Bind],
    trees: &[OwnedFd],
    links: &[(String, String)],
) -> Result<(), (u32, nix::Error)> {
    let dest = &t.destination;
    let n = binds.len() as u32;
    let _ = std::fs::create_dir_all(dest);
    let base = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("tmpfs"), dest, Some("tmpfs"), base, Some("mode=755")).map_err(|e| (0, e))?;
    for (j, (b, tree)) in binds.iter().zip(trees).enumerate() {
        let at = dest.join(&b.name);
        let step = 1 + j as u32;
        std::fs::create_dir_all(&at).map_err(|e| (step, errno_of(e)))?;
        mountapi::move_mount_to(tree.as_fd(), &at).map_err(|e| (step, e))?;
    }
    for (link, target) in links {
        match std::os::unix::fs::symlink(target, dest.join(link)) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err((n + 1, errno_of(e)));
            }
            _ => {}
        }
    }
    if t.read_only {
        let f = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | base | t.flags;
        mount(None::<&str>, dest, None::<&str>, f, None::<&str>).map_err(|e| (n + 2, e))?;
    }
    Ok(())
}

fn errno_of(e: std::io::Error) -> nix::Error {
    nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pid_path: Option<&str>, mnt_path: Option<&str>) -> Spec {
        let ns = |t: &str, p: Option<&str>| match p {
            Some(p) => format!(r#"{{"type":"{t}","path":"{p}"}}"#),
            None => format!(r#"{{"type":"{t}"}}"#),
        };
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2",
                "linux":{{"namespaces":[{},{}]}},
                "mounts":[
                  {{"destination":"/proc","type":"proc","source":"proc"}},
                  {{"destination":"/sys/fs/cgroup","type":"cgroup","source":"cgroup",
                    "options":["nosuid","noexec","nodev","relatime","ro"]}},
                  {{"destination":"/tmp","type":"tmpfs","source":"tmpfs"}}]}}"#,
            ns("pid", pid_path),
            ns("mount", mnt_path)
        ))
        .unwrap()
    }

    #[test]
    fn taken_only_from_a_joined_pid_namespace_on_a_v1_host() {
        let mut s = spec(Some("/proc/42/ns/pid"), None);
        let t = take(&mut s, false);
        assert_eq!(
            t,
            [CgroupMount {
                destination: "/sys/fs/cgroup".into(),
                read_only: true,
                flags: MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
            }]
        );
        let left: Vec<_> = s
            .mounts()
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.destination().clone())
            .collect();
        assert_eq!(left, [PathBuf::from("/proc"), PathBuf::from("/tmp")]);
        for (mut s, v2) in [
            (spec(None, None), false),
            (spec(Some("/proc/42/ns/pid"), None), true),
            (
                spec(Some("/proc/42/ns/pid"), Some("/proc/42/ns/mnt")),
                false,
            ),
        ] {
            assert!(take(&mut s, v2).is_empty());
            assert_eq!(s.mounts().as_ref().unwrap().len(), 3);
        }
    }

    #[test]
    fn binds_are_the_process_own_cgroups_below_each_mount_root() {
        let mi = "\
30 1 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd
33 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
34 30 0:30 /outer /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
35 1 0:31 / /elsewhere/memory rw - cgroup cgroup rw,memory
";
        let own = "\
4:pids:/outer/pod/app
3:cpu,cpuacct:/pod/app
2:memory:/pod/app
1:name=systemd:/pod/app
0::/pod/app
";
        let b = binds(&crate::sys::mountinfo::parse(mi), own);
        let got: Vec<_> = b
            .iter()
            .map(|b| (b.name.as_str(), b.source.to_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                ("systemd", "/sys/fs/cgroup/systemd/pod/app"),
                ("cpu,cpuacct", "/sys/fs/cgroup/cpu,cpuacct/pod/app"),
                ("pids", "/sys/fs/cgroup/pids/pod/app"),
            ]
        );
        assert_eq!(
            comount_links(&b),
            [
                ("cpu".to_string(), "cpu,cpuacct".to_string()),
                ("cpuacct".to_string(), "cpu,cpuacct".to_string())
            ]
        );
    }
}
