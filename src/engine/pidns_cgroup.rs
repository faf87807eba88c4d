//! The cgroup v1 `cgroup` mount (`/sys/fs/cgroup`) of a container, made by siloc
//! instead of libcontainer on hosts with v1 hierarchies (v1 or the v1/v2 hybrid).
//!
//! libcontainer 0.7's `mount_cgroup_v1` gets it wrong three ways:
//! - it finds "its own" cgroups by reading `/proc/<getpid()>/cgroup` when its parent is
//!   outside its PID namespace. In a PID namespace joined by path (a Kubernetes pod with
//!   `shareProcessNamespace`, CRI pid mode POD) that number is the init's pid *inside*
//!   the pod, read from the host's /proc: create fails at random with `failed to
//!   prepare rootfs` (no such host process), and where the number names an unrelated
//!   host process, that process's cgroups shape the binds;
//! - it binds each hierarchy read-write (mount_fixups remounted each read-only), leaves
//!   the tmpfs writable, and reads mountinfo and `/proc/self/cgroup` again per
//!   hierarchy in the init's rootfs setup;
//! - it binds `name=systemd` at the init's cgroup there when it mounts: before the init
//!   was born in its named cgroups (engine::cgroup_handoff) that was siloc's own, and
//!   the container saw the host's whole systemd tree.
//!
//! siloc therefore takes those mounts out of the spec ([`take`]) and makes them itself
//! once libcontainer has built the container (the init is in all of its cgroups)
//! ([`prepare`] in siloc, [`in_container`] from the one post-build helper,
//! [`super::post_build`]), as runc 1.1.5 makes them (libcontainer/rootfs_linux.go,
//! `mountCgroupV1` and the `tmpfs` case of `mountToRootfs`): a read-write tmpfs
//! (`nosuid,nodev,noexec,mode=755`) at the destination, whose root then takes the mode
//! of the directory it covers (sysfs's `/sys/fs/cgroup`: 0555), one recursive bind per
//! v1 hierarchy of the init's own cgroup (from `/proc/<host pid>/cgroup`), read-only
//! with `ro`, with the mount's `nosuid`/`nodev`/`noexec`, and symlinks for co-mounted
//! controllers (`cpu` → `cpu,cpuacct`). In a user namespace the tmpfs root belongs to
//! the container's root, as runc's init (inside it) makes it.
//!
//! The order runc shows: the container's mount table lists mounts in the order they
//! were made (mount IDs, Linux 6.8+; attach order before), and runc makes the cgroup
//! mount with the spec's mounts, before the read-only and masked paths. So [`prepare`]
//! makes the tmpfs (detached, fsmount(2)) before it clones the hierarchies, and
//! siloc makes the read-only paths in the same helper after them
//! ([`super::mount_compat`]). A spec mount after the cgroup mount is made before it
//! (libcontainer's): where one is at, above or below the destination, libcontainer
//! keeps the cgroup mount ([`take`]); an unrelated one is listed before it.
//!
//! Which hierarchies: the v1 ones (named ones such as `name=systemd` too) mounted right
//! under `/sys/fs/cgroup` in siloc's mount table, as runc's and libcontainer's list;
//! the hybrid's cgroup2 `unified` is not bound (runc 1.1.5 and libcontainer leave it
//! out as well: no /sys/fs/cgroup/unified in the container). Which containers: see
//! [`take`]; one with a cgroup namespace keeps libcontainer's fresh per-hierarchy
//! mounts (runc mounts them afresh there too), read-only from mount_fixups.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::MsFlags;
use nix::unistd::Pid;
use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::sys::cgroup::{Hierarchy, hierarchies, path_in};
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

/// The `linux.namespaces` entry of type `typ`, if any: `Some(true)` when it joins a
/// namespace by path, `Some(false)` for a new one.
fn namespace(spec: &Spec, typ: LinuxNamespaceType) -> Option<bool> {
    spec.linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .into_iter()
        .flatten()
        .find(|n| n.typ() == typ)
        .map(|n| n.path().as_ref().is_some_and(|p| !p.as_os_str().is_empty()))
}

/// Whether siloc makes the spec's `cgroup` mounts on a v1 host: always in a joined PID
/// namespace (libcontainer reads the wrong process's cgroups there); otherwise in a
/// new mount namespace without a cgroup namespace (there libcontainer, as runc, mounts
/// each hierarchy afresh, showing the namespace's root), when every `cgroup` mount is
/// free of propagation options (siloc's mounts have none) and no mount after it is at,
/// below or above its destination (siloc's mounts come after all of the spec's: they
/// would cover a later mount there, or not be covered by it).
fn siloc_mounts_cgroups(spec: &Spec) -> bool {
    use super::mount_guard::{SpecMountNs, spec_mount_ns};
    match spec_mount_ns(spec) {
        SpecMountNs::Joined(_) => return false,
        _ if namespace(spec, LinuxNamespaceType::Pid) == Some(true) => return true,
        SpecMountNs::New => {}
        SpecMountNs::None => return false,
    }
    if namespace(spec, LinuxNamespaceType::Cgroup).is_some() {
        return false;
    }
    let mounts = spec.mounts().as_deref().unwrap_or_default();
    mounts.iter().enumerate().all(|(i, m)| {
        m.typ().as_deref() != Some("cgroup")
            || (!m
                .options()
                .iter()
                .flatten()
                .any(|o| super::mount_fixups::flag(o).is_some())
                && !mounts[i + 1..].iter().any(|later| {
                    later.typ().as_deref() != Some("cgroup")
                        && (later.destination().starts_with(m.destination())
                            || m.destination().starts_with(later.destination()))
                }))
    })
}

/// Removes the spec's `cgroup` mounts and returns them when siloc makes them itself
/// (on a host with v1 hierarchies, `host_v2` false; see [`siloc_mounts_cgroups`]):
/// libcontainer's per-hierarchy mounts (each reading mountinfo and
/// `/proc/self/cgroup`) and mount_fixups' read-only remount of each are then left
/// out, and the named `name=systemd` hierarchy shows the container's own cgroup.
/// Otherwise leaves the spec alone and returns nothing.
pub fn take(spec: &mut Spec, host_v2: bool) -> Vec<CgroupMount> {
    if host_v2 || !siloc_mounts_cgroups(spec) {
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

/// What the post-build helper needs to make the taken cgroup mounts: the mounts, the
/// binds (one per v1 hierarchy of the init), the co-mount symlinks, one detached
/// tmpfs per mount and one detached clone per (mount, bind), made (the clones set
/// read-only) in siloc's own mount namespace by [`prepare`], so nothing of siloc's
/// mount table changes.
#[derive(Debug, Default)]
pub struct Prepared {
    taken: Vec<CgroupMount>,
    binds: Vec<Bind>,
    links: Vec<(String, String)>,
    tmpfs: Vec<OwnedFd>,
    trees: Vec<Vec<OwnedFd>>,
}

impl Prepared {
    /// Whether there is nothing to make (no `cgroup` mount was taken).
    pub fn is_empty(&self) -> bool {
        self.taken.is_empty()
    }

    /// The error for the helper's report `code` ([`in_container`]) with `errno`,
    /// naming the destination and the step.
    pub fn error(&self, code: u32, errno: nix::Error) -> PidnsCgroupError {
        let stride = self.binds.len() as u32 + 3;
        let (i, s) = ((code / stride) as usize, code % stride);
        let step = match s as usize {
            0 => "attach tmpfs".to_string(),
            j if j <= self.binds.len() => {
                format!("bind {}", self.binds[j - 1].source.display())
            }
            j if j == self.binds.len() + 1 => "co-mount symlinks".to_string(),
            _ => "chmod tmpfs".to_string(),
        };
        PidnsCgroupError::Mount {
            destination: self
                .taken
                .get(i)
                .map(|t| t.destination.display().to_string())
                .unwrap_or_default(),
            step,
            errno,
        }
    }
}

/// Works out, in siloc's process, the cgroup mounts `taken` for the container whose
/// init is host pid `pid` (built, in all of its cgroups, named ones too): per mount a
/// detached tmpfs (`nosuid,nodev,noexec`, `mode=755`; with `userns` owned by the host
/// IDs of the container's root, from `/proc/PID/uid_map` and `gid_map`), then its own
/// cgroup per v1 hierarchy of `mounts` (siloc's mount table, read again when `None`)
/// from `/proc/PID/cgroup`, cloned detached with the mount's
/// `ro`/`nosuid`/`nodev`/`noexec`, in that order (the mount IDs' order: the container's
/// table lists the tmpfs before its binds). The one post-build helper
/// ([`super::post_build`]) attaches them with [`in_container`]. Nothing is read when
/// `taken` is empty.
///
/// Errors: reading the init's cgroups, ID maps or siloc's mountinfo, making the tmpfs,
/// cloning a hierarchy.
pub fn prepare(
    taken: Vec<CgroupMount>,
    pid: Pid,
    mounts: Option<&[crate::sys::mountinfo::Mount]>,
    userns: bool,
) -> Result<Prepared, PidnsCgroupError> {
    if taken.is_empty() {
        return Ok(Prepared::default());
    }
    let read = |path: String| {
        std::fs::read_to_string(&path).map_err(|source| PidnsCgroupError::Read { path, source })
    };
    let own = read(format!("/proc/{pid}/cgroup"))?;
    let read_mounts;
    let mounts = match mounts {
        Some(m) => m,
        None => {
            read_mounts =
                crate::sys::mountinfo::parse_cgroups(&read("/proc/self/mountinfo".into())?);
            &read_mounts
        }
    };
    let binds = binds(mounts, &own);
    let links = comount_links(&binds);
    let owner = if userns {
        let root_of = |map: &str| {
            let text = read(format!("/proc/{pid}/{map}"))?;
            Ok(host_id_of_root(&text))
        };
        Some((root_of("uid_map")?, root_of("gid_map")?))
    } else {
        None
    };
    // Per mount its tmpfs, then one detached tree per hierarchy, each with the mount's
    // own attributes.
    let mut tmpfs = Vec::new();
    let mut trees: Vec<Vec<OwnedFd>> = Vec::new();
    for t in &taken {
        tmpfs.push(make_tmpfs(&t.destination, owner)?);
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
    Ok(Prepared {
        taken,
        binds,
        links,
        tmpfs,
        trees,
    })
}

/// The host ID container ID 0 maps to in `map` (the text of `/proc/PID/uid_map` or
/// `gid_map`, user_namespaces(7): "inside outside count" per line); `None` when 0 is
/// not mapped.
fn host_id_of_root(map: &str) -> Option<u32> {
    map.lines().find_map(|l| {
        let mut f = l.split_whitespace().map(|x| x.parse::<u32>().ok());
        match (f.next()??, f.next()??, f.next()??) {
            (0, outside, count) if count > 0 => Some(outside),
            _ => None,
        }
    })
}

/// A detached tmpfs as runc mounts it for a v1 cgroup mount at `destination`
/// (source `tmpfs`, `mode=755`, `nosuid,nodev,noexec`, relatime), its root owned by
/// `owner` (host uid, gid) when given (`None` in either: left at 0).
fn make_tmpfs(
    destination: &Path,
    owner: Option<(Option<u32>, Option<u32>)>,
) -> Result<OwnedFd, PidnsCgroupError> {
    let fail = |step: &str| {
        let step = step.to_string();
        move |errno| PidnsCgroupError::Mount {
            destination: destination.display().to_string(),
            step,
            errno,
        }
    };
    let ctx = mountapi::fs_open("tmpfs").map_err(fail("fsopen tmpfs"))?;
    mountapi::fs_set_string(ctx.as_fd(), "source", "tmpfs").map_err(fail("fsconfig source"))?;
    mountapi::fs_set_string(ctx.as_fd(), "mode", "755").map_err(fail("fsconfig mode"))?;
    let attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    let mnt = mountapi::fs_create_mount(ctx.as_fd(), attrs).map_err(fail("fsmount tmpfs"))?;
    if let Some((uid, gid)) = owner
        && (uid.is_some_and(|u| u != 0) || gid.is_some_and(|g| g != 0))
    {
        nix::unistd::fchownat(
            Some(std::os::fd::AsRawFd::as_raw_fd(&mnt)),
            "",
            uid.map(nix::unistd::Uid::from_raw),
            gid.map(nix::unistd::Gid::from_raw),
            nix::fcntl::AtFlags::AT_EMPTY_PATH,
        )
        .map_err(fail("chown tmpfs"))?;
    }
    Ok(mnt)
}

/// Makes the prepared cgroup mounts, in the post-build helper: already in the
/// container's mount namespace and chrooted to its root. Errors: (code, errno), the
/// code for [`Prepared::error`] (per mount `i`: `i * (binds + 3)` plus 0 the tmpfs,
/// 1+j bind j, 1+binds the links, 2+binds the tmpfs's chmod).
pub fn in_container(p: &Prepared) -> Result<(), (u32, nix::Error)> {
    let stride = p.binds.len() as u32 + 3;
    p.taken
        .iter()
        .zip(p.tmpfs.iter().zip(&p.trees))
        .enumerate()
        .try_for_each(|(i, (t, (tmpfs, row)))| {
            make_one(t, tmpfs, &p.binds, row, &p.links).map_err(|(s, e)| (i as u32 * stride + s, e))
        })
}

/// In the helper (the container's mount namespace and root): one cgroup mount, as
/// runc's `mountToRootfs` makes a tmpfs (the destination's mode, when it exists, given
/// to the tmpfs root) and `mountCgroupV1` the rest. Errors carry the step (0 tmpfs,
/// 1+j bind j, 1+binds links, 2+binds chmod).
fn make_one(
    t: &CgroupMount,
    tmpfs: &OwnedFd,
    binds: &[Bind],
    trees: &[OwnedFd],
    links: &[(String, String)],
) -> Result<(), (u32, nix::Error)> {
    let dest = &t.destination;
    let n = binds.len() as u32;
    let covered = nix::sys::stat::stat(dest).ok();
    if covered.is_none() {
        let _ = std::fs::create_dir_all(dest);
    }
    mountapi::move_mount_to(tmpfs.as_fd(), dest).map_err(|e| (0, e))?;
    if let Some(st) = covered {
        let mode = nix::sys::stat::Mode::from_bits_truncate(st.st_mode & 0o7777);
        nix::sys::stat::fchmodat(
            None,
            dest,
            mode,
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        )
        .map_err(|e| (n + 2, e))?;
    }
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
    Ok(())
}

fn errno_of(e: std::io::Error) -> nix::Error {
    nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec with a pid and a mount namespace (joined when a path is given, left out
    /// when `mnt` is `Some("none")`), `extra_ns` more entries, a read-only cgroup mount
    /// with `cgroup_opts` more options, and `later` mounts after it.
    fn spec_with(
        pid_path: Option<&str>,
        mnt: Option<&str>,
        extra_ns: &str,
        cgroup_opts: &str,
        later: &str,
    ) -> Spec {
        let ns = |t: &str, p: Option<&str>| match p {
            Some(p) => format!(r#"{{"type":"{t}","path":"{p}"}}"#),
            None => format!(r#"{{"type":"{t}"}}"#),
        };
        let mut nss = vec![ns("pid", pid_path)];
        if mnt != Some("none") {
            nss.push(ns("mount", mnt));
        }
        if !extra_ns.is_empty() {
            nss.push(extra_ns.to_string());
        }
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2",
                "linux":{{"namespaces":[{}]}},
                "mounts":[
                  {{"destination":"/proc","type":"proc","source":"proc"}},
                  {{"destination":"/sys/fs/cgroup","type":"cgroup","source":"cgroup",
                    "options":["nosuid","noexec","nodev","relatime","ro"{cgroup_opts}]}},
                  {{"destination":"/tmp","type":"tmpfs","source":"tmpfs"}}{later}]}}"#,
            nss.join(",")
        ))
        .unwrap()
    }

    fn spec(pid_path: Option<&str>, mnt_path: Option<&str>) -> Spec {
        spec_with(pid_path, mnt_path, "", "", "")
    }

    #[test]
    fn taken_on_a_v1_host_unless_libcontainer_must_mount_them() {
        for mut s in [
            spec(Some("/proc/42/ns/pid"), None),
            spec(None, None),
            // In a joined PID namespace libcontainer's mounts are wrong whatever else.
            spec_with(
                Some("/proc/42/ns/pid"),
                None,
                r#"{"type":"cgroup"}"#,
                "",
                "",
            ),
            spec_with(Some("/proc/42/ns/pid"), Some("none"), "", "", ""),
        ] {
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
        }
        let below = r#",{"destination":"/sys/fs/cgroup/x","type":"tmpfs","source":"tmpfs"}"#;
        for (mut s, v2) in [
            (spec(None, None), true),
            (spec(Some("/proc/42/ns/pid"), None), true),
            (
                spec(Some("/proc/42/ns/pid"), Some("/proc/42/ns/mnt")),
                false,
            ),
            (spec(None, Some("/proc/42/ns/mnt")), false),
            // No mount namespace of its own: the container's /sys/fs/cgroup is not
            // siloc's to cover.
            (spec_with(None, Some("none"), "", "", ""), false),
            // A cgroup namespace: fresh per-hierarchy mounts, as runc.
            (spec_with(None, None, r#"{"type":"cgroup"}"#, "", ""), false),
            (
                spec_with(None, None, r#"{"type":"cgroup","path":"/x"}"#, "", ""),
                false,
            ),
            // Propagation siloc's mounts would not have; a later mount siloc's would cover.
            (spec_with(None, None, "", r#","rslave""#, ""), false),
            (spec_with(None, None, "", "", below), false),
            // A later mount at or above the destination would cover runc's cgroup
            // mount; siloc's, made after it, would cover that mount instead.
            (
                spec_with(None, None, "", "", &below.replace("/x", "")),
                false,
            ),
            (
                spec_with(
                    None,
                    None,
                    "",
                    "",
                    &below.replace("/sys/fs/cgroup/x", "/sys"),
                ),
                false,
            ),
        ] {
            let n = s.mounts().as_ref().unwrap().len();
            assert!(take(&mut s, v2).is_empty());
            assert_eq!(s.mounts().as_ref().unwrap().len(), n);
        }
    }

    #[test]
    fn an_unrelated_later_mount_leaves_the_cgroup_mount_to_siloc() {
        let later = r#",{"destination":"/sys/fs/cgroupx","type":"tmpfs","source":"tmpfs"}"#;
        let mut s = spec_with(None, None, "", "", later);
        assert_eq!(take(&mut s, false).len(), 1);
    }

    #[test]
    fn the_host_id_of_the_container_root() {
        assert_eq!(
            host_id_of_root("         0     100000      65536\n"),
            Some(100000)
        );
        assert_eq!(
            host_id_of_root("         1     100001      10\n         0     5   1\n"),
            Some(5)
        );
        assert_eq!(host_id_of_root("         1     100001      10\n"), None);
        assert_eq!(host_id_of_root(""), None);
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
