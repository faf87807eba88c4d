//! Namespaces a container in a user namespace is given but cannot use, refused before
//! anything is made, with the error runc 1.1.5 reports for each (checked on this
//! host side by side with runc 1.1.5, tests/it/userns_netns.rs).
//!
//! The container's root has its capabilities only over namespaces its own user
//! namespace owns (or a descendant of it owns): user_namespaces(7), "Interaction of
//! user namespaces and other types of namespaces". So, for a container with a user
//! namespace (new, or joined by path):
//!
//! 1. **Joined user namespace, then a `pid` or `mount` path it does not own.** runc
//!    1.1.5 joins the user namespace first and the other paths from inside it
//!    (nsexec.c `join_namespaces`, in `configs.NamespaceTypes()` order), where
//!    setns(2) wants CAP_SYS_ADMIN over the namespace's owner: `failed to setns into
//!    pid namespace: Operation not permitted` (`mnt` for a mount namespace). siloc
//!    joins `network`, `ipc`, `uts` and `cgroup` paths for the container before its
//!    user namespace, as runc 1.3 does (engine::outer_namespaces); `pid` and `mount`
//!    it cannot (libcontainer 0.7 joins them itself), so those get runc 1.1.5's error.
//! 2. **A mount namespace path it does not own** (with a new user namespace runc
//!    joins it as host root, before it creates the user namespace): the rootfs cannot
//!    be made there, runc's first mount fails: `error preparing rootfs: mount /,
//!    flags: 0x84000: operation not permitted` (the rootfs propagation mount,
//!    MS_SLAVE|MS_REC unless `linux.rootfsPropagation` says otherwise).
//! 3. **A `proc` mount in a PID namespace it does not own, an `mqueue` mount in an
//!    IPC namespace it does not own**: procfs and mqueue are mounted for the
//!    namespace of the mounting process, and the kernel wants CAP_SYS_ADMIN over that
//!    namespace's owner (fs/proc/root.c, ipc/mqueue.c: the superblock's user
//!    namespace is the namespace's owner; fs_context `mount_capable`). That is a pid
//!    or ipc path owned elsewhere (another container's, with its own user namespace,
//!    or a host-owned one; siloc joins an ipc path before the user namespace, where
//!    libcontainer 0.7 then failed with a bare `failed to prepare rootfs`), or no
//!    `pid`/`ipc` entry at all (the host's). runc: `error mounting "proc" to rootfs
//!    at "/proc": mount proc:/proc (via /proc/self/fd/6): operation not permitted`,
//!    and `error mounting "mqueue" to rootfs at "/dev/mqueue": mount
//!    mqueue:/dev/mqueue (via /proc/self/fd/6), flags: 0xe: operation not permitted`
//!    (siloc leaves out runc's `(via ...)` fd detail and names the namespace).
//! 4. **IPC sysctls (`kernel.msg*`, `kernel.sem`, `kernel.shm*`, `fs.mqueue.*`) in
//!    an IPC namespace given by path whose root is not the container's.** runc's init
//!    writes `linux.sysctl` as the container's root, after the mounts
//!    (standard_init_linux.go, `writeSystemProperty`). The kernel lets only the uid
//!    that is root of the IPC namespace's owning user namespace (the host's root when
//!    that root is unmapped) write these files (ipc/ipc_sysctl.c and ipc/mq_sysctl.c,
//!    `ipc_permissions`/`mq_permissions`: the owner bits of 0644 for that uid, the
//!    other bits, read-only, for everyone else). So runc 1.1.5 fails with `open
//!    /proc/sys/kernel/msgmax: permission denied` for a host-owned IPC namespace and
//!    a container whose root is host uid 100000 (and succeeds when its uid_map maps 0
//!    to host 0, or when the container's user namespace owns the IPC namespace, a pod
//!    app container in the sandbox's: measured here side by side). siloc joins such a
//!    namespace before the user namespace and would write them as the host's root
//!    (engine::outer_namespaces::take_sysctls); it refuses them in runc's words
//!    instead, naming the first such key in sorted order (runc's Go map order is
//!    random).
//!
//! (`sysfs` over a network namespace the container does not own becomes a read-only
//! bind of the host's /sys, as under runc: lifecycle::final_spec::sysfs_as_bind.)
//! A pid path owned elsewhere with a new user namespace and no proc mount, or a time
//! path owned elsewhere, runc 1.1.5 also cannot run (no /proc for its init; no time
//! namespaces); outer_namespaces refuses them.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::sys::ns::{NsId, id_of};
use oci_spec::runtime::{LinuxNamespaceType, Spec};

/// A namespace the container cannot use; the texts are runc 1.1.5's, with what siloc
/// found in parentheses; the mount errors start with runc's `unable to start container
/// process: error during container init: `, as runc's create prints them.
#[derive(Debug, thiserror::Error)]
pub enum NsOwnerError {
    /// Case 1 of the module doc.
    #[error(
        "failed to setns into {nsexec} namespace: Operation not permitted (linux.namespaces: \
         {typ} namespace path {path} is not owned by the user namespace {user} joins)"
    )]
    Setns {
        nsexec: &'static str,
        typ: &'static str,
        path: PathBuf,
        user: PathBuf,
    },
    /// Case 2.
    #[error(
        "unable to start container process: error during container init: error preparing \
         rootfs: mount /, flags: {flags:#x}: operation not permitted \
         (linux.namespaces: mount namespace path {path} is not owned by the container's \
         user namespace)"
    )]
    MountNs { flags: u64, path: PathBuf },
    /// Case 3.
    #[error(
        "unable to start container process: error during container init: error mounting \
         \"{fstype}\" to rootfs at \"{dest}\": mount {mount}: \
         operation not permitted (the container's {ns} namespace, {which}, is not owned by \
         its user namespace)"
    )]
    Mount {
        fstype: String,
        dest: String,
        /// `SOURCE:DEST` and `, flags: 0x..` as runc prints them (no flags part for
        /// no flags).
        mount: String,
        ns: &'static str,
        which: String,
    },
    /// Case 4.
    #[error(
        "unable to start container process: error during container init: open \
         /proc/sys/{path}: permission denied (linux.sysctl {key}: the container's ipc \
         namespace, path {ns}, belongs to a user namespace whose root is {ipc_root}, the \
         container's root is {root})"
    )]
    IpcSysctl {
        /// The key with `/` for `.`, as runc opens it under /proc/sys.
        path: String,
        key: String,
        ns: PathBuf,
        /// Host uids, as text (`host uid N`, `unmapped`).
        ipc_root: String,
        root: String,
    },
    /// A namespace file that cannot be opened or asked for its owner.
    #[error("linux.namespaces: {typ} namespace path {path}: {msg}")]
    Path {
        typ: &'static str,
        path: PathBuf,
        msg: String,
    },
}

/// Whether the user namespace `user` (its id) owns the namespace `ns`, or a
/// descendant of it does (ioctl_ns(2) `NS_GET_USERNS`, then `NS_GET_PARENT` up to the
/// top). Errors: the namespace's errno as text.
fn owned_by(ns: &File, user: NsId) -> Result<bool, String> {
    let mut u = crate::sys::ns::owner_userns(ns).map_err(|e| match e {
        nix::Error::ENOTTY | nix::Error::EINVAL => "not a namespace file".to_string(),
        e => format!("NS_GET_USERNS: {e}"),
    })?;
    loop {
        if id_of(&u).map_err(|e| e.to_string())? == user {
            return Ok(true);
        }
        match crate::sys::ns::parent_userns(&u) {
            Ok(p) => u = p,
            // EPERM: the top (the initial user namespace, or the caller's)
            Err(_) => return Ok(false),
        }
    }
}

/// The uid that uid 0 of the user namespace `userns` is, as siloc's own user
/// namespace sees it (the kernel's kuid): 0 for siloc's own namespace, else read
/// from the `uid_map` of a helper that joins `userns` (a uid_map read from another
/// user namespace shows the reader's ids: user_namespaces(7)). `None`: 0 is
/// unmapped there. Errors: the fork, setns(2) or the read, as text.
fn root_uid(userns: &File) -> Result<Option<u32>, String> {
    let own = File::open("/proc/self/ns/user").map_err(|e| format!("own user namespace: {e}"))?;
    if id_of(userns).map_err(|e| e.to_string())? == id_of(&own).map_err(|e| e.to_string())? {
        return Ok(Some(0));
    }
    let helper = crate::sys::fork::spawn(|sock| {
        let joined = nix::sched::setns(userns, nix::sched::CloneFlags::CLONE_NEWUSER);
        let _ = crate::sys::fork::report(sock, joined.map(|()| None).map_err(|e| (0, e)));
        crate::sys::fork::wait_for_parent(sock);
        0
    })
    .map_err(|e| format!("fork: {e}"))?;
    match crate::sys::fork::receive(helper.sock()) {
        Ok(Ok(_)) => {}
        Ok(Err((_, e))) => return Err(format!("join the user namespace: {e}")),
        Err(e) => return Err(format!("helper: {e}")),
    }
    let map = std::fs::read_to_string(format!("/proc/{}/uid_map", helper.pid()))
        .map_err(|e| format!("uid_map: {e}"))?;
    Ok(super::console_fixup::mapped(&map, 0))
}

/// A kuid from [`root_uid`] as the error shows it.
fn show_uid(u: Option<u32>) -> String {
    u.map_or_else(|| "unmapped".to_string(), |u| format!("host uid {u}"))
}

/// The spec's name and runc's nsexec name of the namespace types checked here.
fn names(t: LinuxNamespaceType) -> (&'static str, &'static str) {
    match t {
        LinuxNamespaceType::Pid => ("pid", "pid"),
        LinuxNamespaceType::Mount => ("mount", "mnt"),
        LinuxNamespaceType::Ipc => ("ipc", "ipc"),
        _ => ("", ""),
    }
}

/// The MS_* flags runc 1.1.5 passes for mount options `opts` (its
/// `parseMountOptions`: the last of each pair wins; data options set none).
pub fn mount_flags(opts: &[String]) -> u64 {
    const TABLE: [(&str, bool, u64); 24] = [
        ("ro", false, libc::MS_RDONLY),
        ("rw", true, libc::MS_RDONLY),
        ("nosuid", false, libc::MS_NOSUID),
        ("suid", true, libc::MS_NOSUID),
        ("nodev", false, libc::MS_NODEV),
        ("dev", true, libc::MS_NODEV),
        ("noexec", false, libc::MS_NOEXEC),
        ("exec", true, libc::MS_NOEXEC),
        ("sync", false, libc::MS_SYNCHRONOUS),
        ("async", true, libc::MS_SYNCHRONOUS),
        ("dirsync", false, libc::MS_DIRSYNC),
        ("remount", false, libc::MS_REMOUNT),
        ("mand", false, libc::MS_MANDLOCK),
        ("nomand", true, libc::MS_MANDLOCK),
        ("noatime", false, libc::MS_NOATIME),
        ("atime", true, libc::MS_NOATIME),
        ("nodiratime", false, libc::MS_NODIRATIME),
        ("diratime", true, libc::MS_NODIRATIME),
        ("relatime", false, libc::MS_RELATIME),
        ("norelatime", true, libc::MS_RELATIME),
        ("strictatime", false, libc::MS_STRICTATIME),
        ("nostrictatime", true, libc::MS_STRICTATIME),
        ("bind", false, libc::MS_BIND),
        ("rbind", false, libc::MS_BIND | libc::MS_REC),
    ];
    let mut flags = 0u64;
    for o in opts {
        if let Some((_, clear, f)) = TABLE.iter().find(|(n, _, _)| n == o) {
            if *clear {
                flags &= !f;
            } else {
                flags |= f;
            }
        }
    }
    flags
}

/// The flags of runc's rootfs propagation mount for `linux.rootfsPropagation` (runc
/// 1.1.5 `prepareRoot`: MS_SLAVE|MS_REC when unset). siloc's final spec keeps only
/// the plain names, which libcontainer applies recursively.
fn propagation_flags(p: Option<&str>) -> u64 {
    let base = match p.map(|p| p.trim_start_matches('r')) {
        Some("private") => libc::MS_PRIVATE,
        Some("shared") => libc::MS_SHARED,
        Some("unbindable") => libc::MS_UNBINDABLE,
        _ => libc::MS_SLAVE,
    };
    base | libc::MS_REC
}

/// Checks `spec` (siloc's final spec, before engine::outer_namespaces takes anything
/// from it) for the cases of the module doc, in the order runc meets them. A spec
/// without a user namespace passes (the runtime's root owns everything).
///
/// Errors: [`NsOwnerError`]; a joined user namespace or a namespace path that cannot
/// be opened is [`NsOwnerError::Path`] (engine::outer_namespaces::check_types has
/// already refused paths of the wrong type).
pub fn check(spec: &Spec) -> Result<(), NsOwnerError> {
    let nss = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().clone())
        .unwrap_or_default();
    let Some(user) = nss.iter().find(|n| n.typ() == LinuxNamespaceType::User) else {
        return Ok(());
    };
    let open = |typ: &'static str, p: &Path| {
        File::open(p).map_err(|e| NsOwnerError::Path {
            typ,
            path: p.to_path_buf(),
            msg: e.to_string(),
        })
    };
    // None: a new user namespace, which owns no namespace that exists yet.
    let user_id = match user.path() {
        Some(p) => Some(id_of(&open("user", p)?).map_err(|e| NsOwnerError::Path {
            typ: "user",
            path: p.clone(),
            msg: e.to_string(),
        })?),
        None => None,
    };
    let owned = |typ: &'static str, path: &Path| -> Result<bool, NsOwnerError> {
        let Some(u) = user_id else { return Ok(false) };
        owned_by(&open(typ, path)?, u).map_err(|msg| NsOwnerError::Path {
            typ,
            path: path.to_path_buf(),
            msg,
        })
    };
    // The namespace of type `t` the container will be in: Ok(None) for a new one,
    // else its path and whether the container's user namespace owns it.
    let target = |t: LinuxNamespaceType| -> Result<Option<(PathBuf, bool)>, NsOwnerError> {
        let (typ, nsexec) = names(t);
        let path = match nss.iter().find(|n| n.typ() == t) {
            Some(n) => match n.path() {
                Some(p) => p.clone(),
                None => return Ok(None),
            },
            None => PathBuf::from(format!("/proc/self/ns/{nsexec}")),
        };
        let ok = owned(typ, &path)?;
        Ok(Some((path, ok)))
    };
    let has_path = |t: LinuxNamespaceType| nss.iter().any(|n| n.typ() == t && n.path().is_some());

    // 1. runc 1.1.5 joins the user namespace, then pid, then mnt.
    if let Some(user_path) = user.path() {
        for t in [LinuxNamespaceType::Pid, LinuxNamespaceType::Mount] {
            if !has_path(t) {
                continue;
            }
            if let Some((path, false)) = target(t)? {
                let (typ, nsexec) = names(t);
                return Err(NsOwnerError::Setns {
                    nsexec,
                    typ,
                    path,
                    user: user_path.clone(),
                });
            }
        }
    }
    // 2. The rootfs propagation mount is runc's first in the mount namespace.
    if has_path(LinuxNamespaceType::Mount)
        && let Some((path, false)) = target(LinuxNamespaceType::Mount)?
    {
        let prop = spec
            .linux()
            .as_ref()
            .and_then(|l| l.rootfs_propagation().clone());
        return Err(NsOwnerError::MountNs {
            flags: propagation_flags(prop.as_deref()),
            path,
        });
    }
    // 3. The mounts, in order.
    for m in spec.mounts().as_deref().unwrap_or_default() {
        let fstype = m.typ().clone().unwrap_or_default();
        let t = match fstype.as_str() {
            "proc" => LinuxNamespaceType::Pid,
            "mqueue" => LinuxNamespaceType::Ipc,
            _ => continue,
        };
        let Some((path, false)) = target(t)? else {
            continue;
        };
        let opts = m.options().clone().unwrap_or_default();
        let flags = mount_flags(&opts);
        let in_spec = has_path(t);
        return Err(NsOwnerError::Mount {
            fstype,
            dest: m.destination().display().to_string(),
            mount: format!(
                "{}:{}{}",
                m.source()
                    .as_ref()
                    .map_or_else(String::new, |s| s.display().to_string()),
                m.destination().display(),
                if flags == 0 {
                    String::new()
                } else {
                    format!(", flags: {flags:#x}")
                }
            ),
            ns: names(t).0,
            which: if in_spec {
                format!("path {}", path.display())
            } else {
                format!("the runtime's, as linux.namespaces has no {}", names(t).0)
            },
        });
    }
    // 4. The IPC sysctls, written by runc's init as the container's root.
    let mut ipc_keys: Vec<&String> = spec
        .linux()
        .as_ref()
        .and_then(|l| l.sysctl().as_ref())
        .map(|m| {
            m.keys()
                .filter(|k| super::outer_namespaces::sysctl_of(k, LinuxNamespaceType::Ipc))
                .collect()
        })
        .unwrap_or_default();
    ipc_keys.sort();
    let ipc_path = nss
        .iter()
        .find(|n| n.typ() == LinuxNamespaceType::Ipc)
        .and_then(|n| n.path().clone());
    if let (Some(key), Some(path)) = (ipc_keys.first(), ipc_path) {
        let path_err = |typ: &'static str, p: &Path| {
            let p = p.to_path_buf();
            move |msg: String| NsOwnerError::Path { typ, path: p, msg }
        };
        let owner = crate::sys::ns::owner_userns(&open("ipc", &path)?)
            .map_err(|e| path_err("ipc", &path)(format!("NS_GET_USERNS: {e}")))?;
        // Owned by the container's own user namespace: its root writes them.
        if user_id.is_some() && id_of(&owner).ok() == user_id {
            return Ok(());
        }
        // the kernel's fallback for an unmapped root: the host's root
        let ipc_root = root_uid(&owner)
            .map_err(path_err("ipc", &path))?
            .unwrap_or(0);
        let root = match user.path() {
            Some(p) => root_uid(&open("user", p)?).map_err(path_err("user", p))?,
            None => spec
                .linux()
                .as_ref()
                .and_then(|l| l.uid_mappings().as_ref())
                .and_then(|m| {
                    m.iter()
                        .find(|m| m.container_id() == 0 && m.size() > 0)
                        .map(|m| m.host_id())
                }),
        };
        if root != Some(ipc_root) {
            return Err(NsOwnerError::IpcSysctl {
                path: key.replace('.', "/"),
                key: key.to_string(),
                ns: path,
                ipc_root: show_uid(Some(ipc_root)),
                root: show_uid(root),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ns: &str, mounts: &str) -> Spec {
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2","mounts":{mounts},"linux":{{"namespaces":{ns}}}}}"#
        ))
        .unwrap()
    }

    const PROC: &str = r#"[{"destination":"/proc","type":"proc","source":"proc"}]"#;
    const MQUEUE: &str = r#"[{"destination":"/dev/mqueue","type":"mqueue","source":"mqueue",
        "options":["nosuid","noexec","nodev"]}]"#;

    #[test]
    fn runcs_mount_flags() {
        let o = |v: &[&str]| mount_flags(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(o(&["nosuid", "noexec", "nodev"]), 0xe);
        assert_eq!(o(&["ro", "rw", "size=65536k"]), 0);
        assert_eq!(o(&["rbind", "ro"]), 0x5001);
        assert_eq!(propagation_flags(None), 0x84000);
        assert_eq!(propagation_flags(Some("private")), 0x44000);
    }

    #[test]
    fn without_a_user_namespace_or_with_new_namespaces_all_passes() {
        // The test runs as the host's root: no user namespace, the host's everything.
        check(&spec(
            r#"[{"type":"pid","path":"/proc/self/ns/pid"}]"#,
            PROC,
        ))
        .unwrap();
        let both = format!("{},{}", &PROC[..PROC.len() - 1], &MQUEUE[1..]);
        check(&spec(
            r#"[{"type":"user"},{"type":"pid"},{"type":"ipc"},{"type":"mount"}]"#,
            &both,
        ))
        .unwrap();
        // The host's user namespace owns the host's namespaces.
        check(&spec(
            r#"[{"type":"user","path":"/proc/self/ns/user"},{"type":"pid","path":"/proc/self/ns/pid"}]"#,
            PROC,
        ))
        .unwrap();
    }

    #[test]
    fn a_new_user_namespace_cannot_mount_proc_or_mqueue_for_the_hosts() {
        let e = check(&spec(
            r#"[{"type":"user"},{"type":"pid","path":"/proc/self/ns/pid"}]"#,
            PROC,
        ))
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "unable to start container process: error during container init: error mounting \
             \"proc\" to rootfs at \"/proc\": mount proc:/proc: operation not \
             permitted (the container's pid namespace, path /proc/self/ns/pid, is not owned by \
             its user namespace)"
        );
        let e = check(&spec(r#"[{"type":"user"},{"type":"pid"}]"#, MQUEUE))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "error mounting \"mqueue\" to rootfs at \"/dev/mqueue\": mount \
                 mqueue:/dev/mqueue, flags: 0xe: operation not permitted (the container's ipc \
                 namespace, the runtime's, as linux.namespaces has no ipc"
            ),
            "{e}"
        );
        let e = check(&spec(
            r#"[{"type":"user"},{"type":"mount","path":"/proc/self/ns/mnt"}]"#,
            PROC,
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("error preparing rootfs: mount /, flags: 0x84000: operation not permitted"),
            "{e}"
        );
    }
}
