//! Per-mount options libcontainer skips, applied after libcontainer has built the
//! container and before its process starts, from the one post-build helper
//! ([`super::post_build`]) that joins the container's mount namespace and root
//! (`/proc/PID/root`), so paths are the container's own also without pivot_root. Where the container shares siloc's mount
//! namespace, only mounts made for it are changed ([`super::mount_guard`]):
//!
//! - propagation (`shared`, `rslave`, `rprivate`, `unbindable`, ... in
//!   `mounts[].options`, runtime-spec config.md "Mounts" / mount(8)). libcontainer 0.7
//!   builds bind mounts with open_tree/move_mount and never applies these, so a bind of
//!   a shared host mount stays a full peer: host mounts reach `rprivate` binds, and
//!   container mounts would reach the host.
//! - a read-only `cgroup` mount on a cgroup v1 host. libcontainer 0.7 mounts each v1
//!   hierarchy read-write whatever the mount's options (runc mounts them with the
//!   cgroup mount's `ro,nosuid,nodev,noexec`), so a container's root could raise its own
//!   `pids.max`, memory limit or blkio throttle. Each hierarchy is remounted with them.
//!   Only where libcontainer still makes the mount (a cgroup namespace, and the other
//!   cases [`super::pidns_cgroup::take`] leaves to it): siloc makes the others itself,
//!   read-only from the start, and they are no longer in the spec here.

use nix::mount::{MsFlags, mount};
use nix::unistd::Pid;
use oci_spec::runtime::Spec;

/// A mount change that failed; names the mount and the option.
#[derive(Debug, thiserror::Error)]
pub enum MountFixupError {
    #[error("mounts: cannot apply {option} to {destination}: {errno}")]
    Apply {
        destination: String,
        option: String,
        errno: nix::Error,
    },
    #[error("mounts: propagation: {0}")]
    Sys(nix::Error),
}

/// The propagation flag an option stands for (mount(8)), if it is one.
pub fn flag(option: &str) -> Option<MsFlags> {
    Some(match option {
        "shared" => MsFlags::MS_SHARED,
        "rshared" => MsFlags::MS_SHARED | MsFlags::MS_REC,
        "slave" => MsFlags::MS_SLAVE,
        "rslave" => MsFlags::MS_SLAVE | MsFlags::MS_REC,
        "private" => MsFlags::MS_PRIVATE,
        "rprivate" => MsFlags::MS_PRIVATE | MsFlags::MS_REC,
        "unbindable" => MsFlags::MS_UNBINDABLE,
        "runbindable" => MsFlags::MS_UNBINDABLE | MsFlags::MS_REC,
        _ => return None,
    })
}

/// (destination, option, flag) for every propagation option in the spec's mounts,
/// in mount order.
pub fn wanted(spec: &Spec) -> Vec<(String, String, MsFlags)> {
    spec.mounts()
        .iter()
        .flatten()
        .flat_map(|m| {
            let dest = m.destination().display().to_string();
            m.options()
                .iter()
                .flatten()
                .filter_map(move |o| flag(o).map(|f| (dest.clone(), o.clone(), f)))
        })
        .collect()
}

/// The spec's read-only `cgroup` mounts: (destination, remount flags with the
/// mount's own nosuid/nodev/noexec).
fn read_only_cgroup_mounts(spec: &Spec) -> Vec<(String, MsFlags)> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| m.typ().as_deref() == Some("cgroup"))
        .filter_map(|m| {
            let opts = m.options().clone().unwrap_or_default();
            if !opts.iter().any(|o| o == "ro") {
                return None;
            }
            let mut f = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY;
            for (name, flag) in [
                ("nosuid", MsFlags::MS_NOSUID),
                ("nodev", MsFlags::MS_NODEV),
                ("noexec", MsFlags::MS_NOEXEC),
            ] {
                if opts.iter().any(|o| o == name) {
                    f |= flag;
                }
            }
            Some((m.destination().display().to_string(), f))
        })
        .collect()
}

/// (mount point, "ro", remount flags) for every cgroup v1 hierarchy mounted at or
/// under a read-only `cgroup` mount of the spec. `mountinfo` is the container init's
/// /proc/PID/mountinfo (proc(5): field 5 the mount point, seen from the process's
/// root; the filesystem type follows the " - " separator).
pub fn cgroup_v1_read_only(
    spec: &Spec,
    mounts: &[crate::sys::mountinfo::Mount],
) -> Vec<(String, String, MsFlags)> {
    let wanted = read_only_cgroup_mounts(spec);
    if wanted.is_empty() {
        return Vec::new();
    }
    mounts
        .iter()
        .filter(|m| m.fs_type == "cgroup")
        .filter_map(|m| {
            let point = m.mount_point.to_str()?;
            wanted
                .iter()
                .find(|(dest, _)| {
                    point == dest
                        || point
                            .strip_prefix(dest.as_str())
                            .is_some_and(|r| r.starts_with('/'))
                })
                .map(|(_, f)| (point.to_string(), "ro".to_string(), *f))
        })
        .collect()
}

/// What [`in_container`] changes in one container, worked out in siloc's own process
/// by [`plan`]: (destination, option, flags) in order, the mounts that may be changed
/// (`None`: all; a container sharing siloc's mount namespace: those made for it), and
/// each destination as a C string (made before the fork).
#[derive(Debug, Default)]
pub struct Fixups {
    todo: Vec<(String, String, MsFlags)>,
    allowed: Option<std::collections::HashSet<u64>>,
    paths: Vec<std::ffi::CString>,
}

impl Fixups {
    /// Whether there is nothing to change (then no helper is needed for it).
    pub fn is_empty(&self) -> bool {
        self.todo.is_empty()
    }

    /// The error for change `idx` failing with `errno`, as the helper reports it.
    pub fn error(&self, idx: usize, errno: nix::Error) -> MountFixupError {
        match self.todo.get(idx) {
            Some((destination, option, _)) => MountFixupError::Apply {
                destination: destination.clone(),
                option: option.clone(),
                errno,
            },
            None => MountFixupError::Sys(errno),
        }
    }
}

/// Works out the spec's propagation options and read-only cgroup v1 mounts for the
/// container whose init is `pid` (built, not started); [`in_container`] applies them
/// from the one post-build helper ([`super::post_build`]), inside the mount namespace
/// of `pid`, at paths under its root (`/proc/PID/root`: a container without
/// pivot_root is chrooted there). Reads the container's mount table at most once.
///
/// In a mount namespace the container shares with siloc (`baseline.ns`), only the
/// mounts made since `baseline` are changed ([`super::mount_guard`]): a destination
/// that resolves to any other mount is skipped with a warning. In a mount namespace
/// joined by path nothing is applied (siloc has no list of what was there).
///
/// Errors: the container's namespace or mount table cannot be read.
pub fn plan(
    spec: &Spec,
    pid: Pid,
    baseline: &super::mount_guard::Baseline,
) -> Result<Fixups, MountFixupError> {
    use super::mount_guard::{self, SpecMountNs};
    let io = |e: std::io::Error| {
        MountFixupError::Sys(nix::Error::from_raw(e.raw_os_error().unwrap_or(0)))
    };
    let mut todo = wanted(spec);
    let needs_cgroups = !read_only_cgroup_mounts(spec).is_empty();
    if todo.is_empty() && !needs_cgroups {
        return Ok(Fixups::default());
    }
    if let SpecMountNs::Joined(path) = mount_guard::spec_mount_ns(spec) {
        tracing::warn!(
            path = %path.display(),
            "mount propagation options and read-only cgroup mounts are not applied in a \
             joined mount namespace"
        );
        return Ok(Fixups::default());
    }
    // The container's mount table, read once: for its cgroup v1 hierarchies, and for
    // the mounts made for it when it shares siloc's mount namespace.
    let ns = mount_guard::ns_of(pid).map_err(io)?;
    let info = if needs_cgroups || baseline.shared(ns) {
        std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).map_err(io)?
    } else {
        String::new()
    };
    if needs_cgroups {
        todo.extend(cgroup_v1_read_only(
            spec,
            &crate::sys::mountinfo::parse(&info),
        ));
    }
    if todo.is_empty() {
        return Ok(Fixups::default());
    }
    let allowed = baseline.allowed(ns, &info);
    let paths = todo
        .iter()
        .map(|(d, _, _)| std::ffi::CString::new(d.as_str()).unwrap_or_default())
        .collect();
    Ok(Fixups {
        todo,
        allowed,
        paths,
    })
}

/// Applies `fixups` from the post-build helper, already in the container's mount
/// namespace and chrooted to its root. Errors: (index of the failed change, errno),
/// for [`Fixups::error`].
pub fn in_container(fixups: &Fixups) -> Result<(), (usize, nix::Error)> {
    fixups
        .todo
        .iter()
        .enumerate()
        .try_for_each(|(i, (dest, option, f))| {
            if let Some(a) = &fixups.allowed
                && !crate::sys::mountinfo::mount_id_of(&fixups.paths[i])
                    .is_some_and(|id| a.contains(&id))
            {
                tracing::warn!(
                    destination = dest.as_str(),
                    option = option.as_str(),
                    "not applied: the container shares siloc's mount namespace and this \
                     mount was not made for it"
                );
                return Ok(());
            }
            mount(None::<&str>, dest.as_str(), None::<&str>, *f, None::<&str>).map_err(|e| (i, e))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_map_to_flags() {
        assert_eq!(flag("rslave"), Some(MsFlags::MS_SLAVE | MsFlags::MS_REC));
        assert_eq!(flag("private"), Some(MsFlags::MS_PRIVATE));
        assert_eq!(flag("rbind"), None);
        let spec: Spec = serde_json::from_str(
            r#"{"ociVersion":"1.0.2","mounts":[
                {"destination":"/a","type":"bind","source":"/x","options":["rbind","rslave","ro"]},
                {"destination":"/b","type":"tmpfs","source":"tmpfs"}]}"#,
        )
        .unwrap();
        let w = wanted(&spec);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].0, "/a");
        assert_eq!(w[0].1, "rslave");
    }

    const MOUNTINFO: &str = "\
612 611 0:52 / / rw,relatime - overlay overlay rw
620 612 0:60 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755
621 620 0:31 /siloc-c1 /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
622 620 0:28 /siloc-c1 /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
623 612 0:61 / /sys/fs/cgroupx rw,relatime - cgroup cgroup rw,memory
624 612 0:62 / /proc rw,relatime - proc proc rw
";

    fn spec_with_cgroup(options: &str) -> Spec {
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2","mounts":[
                {{"destination":"/proc","type":"proc","source":"proc"}},
                {{"destination":"/sys/fs/cgroup","type":"cgroup","source":"cgroup",
                  "options":{options}}}]}}"#
        ))
        .unwrap()
    }

    #[test]
    fn read_only_cgroup_mount_remounts_each_v1_hierarchy() {
        let spec = spec_with_cgroup(r#"["nosuid","noexec","nodev","relatime","ro"]"#);
        let w = cgroup_v1_read_only(&spec, &crate::sys::mountinfo::parse(MOUNTINFO));
        let points: Vec<_> = w.iter().map(|(p, o, _)| (p.as_str(), o.as_str())).collect();
        // Not the tmpfs itself (runc leaves it rw), not a sibling path, not /proc.
        assert_eq!(
            points,
            [
                ("/sys/fs/cgroup/pids", "ro"),
                ("/sys/fs/cgroup/cpu,cpuacct", "ro")
            ]
        );
        let want = MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | MsFlags::MS_NOEXEC;
        assert!(w.iter().all(|(_, _, f)| *f == want));
    }

    #[test]
    fn writable_cgroup_mount_or_v2_host_is_left_alone() {
        let rw = spec_with_cgroup(r#"["nosuid","noexec","nodev"]"#);
        assert!(cgroup_v1_read_only(&rw, &crate::sys::mountinfo::parse(MOUNTINFO)).is_empty());
        let ro = spec_with_cgroup(r#"["ro"]"#);
        let v2 = "30 29 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw\n";
        assert!(cgroup_v1_read_only(&ro, &crate::sys::mountinfo::parse(v2)).is_empty());
        let w = cgroup_v1_read_only(&ro, &crate::sys::mountinfo::parse(MOUNTINFO));
        assert_eq!(
            w[0].2,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY
        );
    }
}
