//! The rule for every mount change siloc (or libcontainer on its behalf) makes: only
//! inside the container's own mount namespace; where the container has none, only the
//! mounts made for it during its `create`.
//!
//! Why: libcontainer 0.7, like runc 1.1.5 (`prepareRoot` in rootfs_linux.go), sets up
//! the rootfs in whatever mount namespace the container's init runs in. Without a
//! `mount` entry in `linux.namespaces` that is the caller's, so it makes `/` rslave
//! (recursively: every mount of the host loses its shared propagation), makes the
//! rootfs's parent mount private, and leaves /proc, /dev, /sys and the cgroup binds
//! mounted under the rootfs in the host's table after the container is gone. siloc's
//! own read-only cgroup fix-up ([`super::mount_fixups`]) then remounted the host's
//! v1 hierarchies read-only: every later create on the host failed with EROFS.
//!
//! So:
//! - a spec without a mount namespace runs in a private copy of siloc's mount
//!   namespace, unshared just before libcontainer ([`isolate`]): what libcontainer
//!   changes there, and the mounts it makes, stay in the copy and go with the
//!   container's last process. The container sees the same tree as under runc;
//!   mounts it makes itself do not reach the host (under runc they do).
//! - a spec that joins siloc's own mount namespace by path is refused ([`check`]).
//! - the fix-ups touch, in a namespace the container shares with siloc, only mounts
//!   that were not there before libcontainer ran ([`Baseline`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::sys::ns::id as ns_id;
use nix::sched::{CloneFlags, unshare};
use oci_spec::runtime::{LinuxNamespaceType, Spec};

/// Errors of the mount namespace rule; each names the field or step.
#[derive(Debug, thiserror::Error)]
pub enum MountGuardError {
    #[error(
        "linux.namespaces: mount namespace path {path} is siloc's own (the caller's): siloc \
         changes mounts only in a container's own mount namespace; leave out \"path\" for a \
         new one"
    )]
    CallersNamespace { path: PathBuf },
    #[error("linux.namespaces: mount namespace path {path}: {source}")]
    Path {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mount namespace: {step}: {source}")]
    Sys {
        step: &'static str,
        source: std::io::Error,
    },
}

/// The container's mount namespace as the spec asks for it (runtime-spec config-linux.md
/// "Namespaces"): a new one, one joined by path, or none (the caller's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecMountNs {
    New,
    Joined(PathBuf),
    None,
}

/// Reads `linux.namespaces` for the `mount` entry.
pub fn spec_mount_ns(spec: &Spec) -> SpecMountNs {
    let entry = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|ns| ns.iter().find(|n| n.typ() == LinuxNamespaceType::Mount));
    match entry {
        None => SpecMountNs::None,
        Some(n) => match n.path() {
            Some(p) if !p.as_os_str().is_empty() => SpecMountNs::Joined(p.clone()),
            _ => SpecMountNs::New,
        },
    }
}

/// Refuses a spec that joins siloc's own mount namespace by path. Runs before anything
/// is made. Errors: [`MountGuardError::CallersNamespace`] or
/// [`MountGuardError::Path`] naming the path.
pub fn check(spec: &Spec) -> Result<(), MountGuardError> {
    let SpecMountNs::Joined(path) = spec_mount_ns(spec) else {
        return Ok(());
    };
    let theirs = ns_id(&path).map_err(|source| MountGuardError::Path {
        path: path.clone(),
        source,
    })?;
    let ours = ns_id(Path::new("/proc/self/ns/mnt")).map_err(|source| MountGuardError::Sys {
        step: "/proc/self/ns/mnt",
        source,
    })?;
    if theirs == ours {
        return Err(MountGuardError::CallersNamespace { path });
    }
    Ok(())
}

/// For a spec without a mount namespace, moves siloc into a private copy of its mount
/// namespace (`unshare(CLONE_NEWNS)`), so libcontainer's rootfs setup happens there.
/// A no-op otherwise. Must run while siloc is single-threaded (unshare(2)).
///
/// Errors: [`MountGuardError::Sys`] when the unshare fails.
pub fn isolate(spec: &Spec) -> Result<(), MountGuardError> {
    if spec_mount_ns(spec) != SpecMountNs::None {
        return Ok(());
    }
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| MountGuardError::Sys {
        step: "unshare a private copy for a container without a mount namespace",
        source: std::io::Error::from_raw_os_error(e as i32),
    })
}

/// siloc's mount namespace and the mounts in it, taken just before libcontainer runs.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    /// (device, inode) of /proc/self/ns/mnt.
    pub ns: (u64, u64),
    /// Mount IDs (proc(5) mountinfo field 1) present then; `None` when they were not
    /// read because the container gets a mount namespace of its own.
    pub ids: Option<HashSet<u64>>,
}

impl Baseline {
    /// Reads /proc/self/ns/mnt, and /proc/self/mountinfo only for a spec without a
    /// mount namespace (the one case where the container shares siloc's and
    /// [`Baseline::allowed`] needs the list): a `create` with its own mount namespace,
    /// the usual case, skips that read of the host's mount table.
    /// Errors: [`MountGuardError::Sys`] naming the file.
    pub fn capture(spec: &Spec) -> Result<Baseline, MountGuardError> {
        let sys = |step| move |source| MountGuardError::Sys { step, source };
        let ns = ns_id(Path::new("/proc/self/ns/mnt")).map_err(sys("/proc/self/ns/mnt"))?;
        let ids = if spec_mount_ns(spec) == SpecMountNs::None {
            let info = std::fs::read_to_string("/proc/self/mountinfo")
                .map_err(sys("/proc/self/mountinfo"))?;
            Some(mount_ids(&info).collect())
        } else {
            None
        };
        Ok(Baseline { ns, ids })
    }

    /// Whether the process whose mount namespace is `ns` shares siloc's: only then
    /// are the fix-ups limited to [`Baseline::allowed`] mounts.
    pub fn shared(&self, ns: (u64, u64)) -> bool {
        ns == self.ns
    }

    /// The mounts the fix-ups may change for the process whose mount namespace is
    /// `ns` and whose mountinfo is `mountinfo`: `None` (any) when that is a namespace
    /// of its own; otherwise the IDs in `mountinfo` that were not in the baseline
    /// (made during this create), none at all when the baseline has no list.
    pub fn allowed(&self, ns: (u64, u64), mountinfo: &str) -> Option<HashSet<u64>> {
        if !self.shared(ns) {
            return None;
        }
        let Some(ids) = &self.ids else {
            return Some(HashSet::new());
        };
        Some(
            mount_ids(mountinfo)
                .filter(|id| !ids.contains(id))
                .collect(),
        )
    }
}

/// The mount IDs (first field) of mountinfo text.
pub fn mount_ids(mountinfo: &str) -> impl Iterator<Item = u64> + '_ {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').next()?.parse().ok())
}

/// (device, inode) of the mount namespace of `pid`.
pub fn ns_of(pid: nix::unistd::Pid) -> std::io::Result<(u64, u64)> {
    ns_id(Path::new(&format!("/proc/{pid}/ns/mnt")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(namespaces: &str) -> Spec {
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2","linux":{{"namespaces":{namespaces}}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn the_spec_says_new_joined_or_none() {
        assert_eq!(
            spec_mount_ns(&spec(r#"[{"type":"pid"},{"type":"mount"}]"#)),
            SpecMountNs::New
        );
        assert_eq!(
            spec_mount_ns(&spec(r#"[{"type":"mount","path":""}]"#)),
            SpecMountNs::New
        );
        assert_eq!(
            spec_mount_ns(&spec(r#"[{"type":"mount","path":"/proc/9/ns/mnt"}]"#)),
            SpecMountNs::Joined("/proc/9/ns/mnt".into())
        );
        assert_eq!(
            spec_mount_ns(&spec(r#"[{"type":"pid"}]"#)),
            SpecMountNs::None
        );
    }

    #[test]
    fn joining_our_own_mount_namespace_is_refused() {
        let s = spec(r#"[{"type":"mount","path":"/proc/self/ns/mnt"}]"#);
        let e = check(&s).unwrap_err().to_string();
        assert!(
            e.contains("/proc/self/ns/mnt") && e.contains("siloc's own"),
            "{e}"
        );
        let s = spec(r#"[{"type":"mount","path":"/nonexistent/ns"}]"#);
        assert!(
            check(&s)
                .unwrap_err()
                .to_string()
                .contains("/nonexistent/ns")
        );
        check(&spec(r#"[{"type":"mount"}]"#)).unwrap();
        check(&spec(r#"[]"#)).unwrap();
    }

    #[test]
    fn in_a_shared_namespace_only_new_mounts_are_allowed() {
        let b = Baseline {
            ns: (1, 2),
            ids: Some([20, 21, 22].into_iter().collect()),
        };
        let info = "20 1 0:1 / / rw - ext4 x rw\n\
                    22 20 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
                    90 20 0:36 /siloc-c /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        let got = b.allowed((1, 2), info).unwrap();
        assert_eq!(got, [90].into_iter().collect());
        assert_eq!(b.allowed((1, 3), info), None);
        // Without a list (the spec had a mount namespace of its own), a shared
        // namespace allows nothing rather than everything.
        let unlisted = Baseline {
            ns: (1, 2),
            ids: None,
        };
        assert_eq!(unlisted.allowed((1, 2), info), Some(HashSet::new()));
        assert_eq!(unlisted.allowed((1, 3), info), None);
    }

    #[test]
    fn the_host_mount_table_is_read_only_for_a_spec_without_a_mount_namespace() {
        let own = Baseline::capture(&spec(r#"[{"type":"pid"},{"type":"mount"}]"#)).unwrap();
        assert!(own.ids.is_none());
        let shared = Baseline::capture(&spec(r#"[{"type":"pid"}]"#)).unwrap();
        assert!(shared.ids.is_some_and(|ids| !ids.is_empty()));
        assert_eq!(own.ns, shared.ns);
    }
}
