//! Namespaces a container in a user namespace joins by path although its user
//! namespace does not own them: the pod network namespace containerd's CRI makes (in
//! the host's user namespace) for a pod that has `io.siloc.userns=auto`, or a
//! `siloc run` bundle with a `network` path and a user namespace.
//!
//! libcontainer gap covered: libcontainer 0.7 enters the container's user namespace
//! first (new or by path, in its intermediate process), and joins the other
//! namespaces given by path afterwards, from inside it
//! (`container_intermediate_process.rs`, then the init's `apply_namespaces`).
//! setns(2) wants CAP_SYS_ADMIN over the user namespace that owns the namespace
//! joined (setns(2), user_namespaces(7) "Capabilities"), which a process inside a
//! child user namespace never has over a namespace of its parent's: the create
//! failed with a bare `EPERM`. runc joins the namespaces given by path before it
//! creates a new user namespace (libcontainer/nsenter/nsexec.c, `join_namespaces`
//! before `unshare(CLONE_NEWUSER)`), and since 1.3 also before it joins one by path
//! (a two-stage join; 1.1.5 joins the user namespace first and fails with `failed to
//! setns into net namespace: Operation not permitted`), so the joined network
//! namespace simply stays.
//!
//! siloc does what runc does, on top of libcontainer: [`take`] removes each such
//! `network`, `ipc`, `uts` or `cgroup` entry from the spec libcontainer gets, and
//! [`Opened::enter`] moves siloc's own process into those namespaces just before
//! libcontainer forks, so the container inherits them; siloc returns to its own
//! namespaces when libcontainer is done ([`Entered`]'s drop). `siloc exec` joins them
//! the same way before it enters the container's user namespace
//! ([`join_for_exec`]). `pid`, `mount` and `time` namespaces owned outside the
//! container's user namespace are refused: engine::ns_owner first, with runc 1.1.5's
//! errors for the cases runc fails too (a proc mount, a joined user namespace), then
//! [`take`] with an error naming the path (Kubernetes gives none such to a
//! user-namespaced pod).
//!
//! Consequence, as under runc: a container whose network namespace its user
//! namespace does not own cannot mount sysfs (the kernel wants CAP_SYS_ADMIN over the
//! network namespace's owner), so its sysfs mounts become read-only binds of the
//! host's /sys (`lifecycle::final_spec::sysfs_as_bind`).
//!
//! Delete this module when libcontainer joins namespaces before the user namespace.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::sys::ns::id as ns_id;
use nix::sched::CloneFlags;
use oci_spec::runtime::{LinuxNamespaceType, Spec};

/// Errors; each names the namespace path or the step.
#[derive(Debug, thiserror::Error)]
pub enum OuterNsError {
    #[error(
        "linux.namespaces: {typ} namespace path {path} belongs to a user namespace other \
         than the container's, and siloc joins only network, ipc, uts and cgroup namespaces \
         for it before the user namespace; leave out \"path\" for a new one, or the user \
         namespace"
    )]
    Unsupported { typ: String, path: PathBuf },
    #[error("linux.namespaces: {typ} namespace path {path}: {msg}")]
    Path {
        typ: String,
        path: PathBuf,
        msg: String,
    },
    /// runc's nsexec text (`__join_namespaces`: setns(2) with the spec's type on a
    /// file of another namespace type, or no namespace file, fails with EINVAL), and
    /// what the path is.
    #[error(
        "failed to setns into {nsexec} namespace: Invalid argument (linux.namespaces: \
         {typ} namespace path {path} is {found})"
    )]
    WrongType {
        nsexec: &'static str,
        typ: String,
        path: PathBuf,
        found: String,
    },
    /// runc's text for a namespace path that does not exist (its config validator
    /// lstat(2)s each path).
    #[error("unable to create new parent process: namespace path: lstat {path}: {msg}")]
    Missing { path: PathBuf, msg: String },
    /// A namespace path the host's root cannot open (runc's nsexec says "failed to
    /// open PATH: ..." and then only "can't get final child's PID from pipe: EOF").
    #[error(
        "unable to start container process: failed to open {path}: {msg} (linux.namespaces: \
         {typ} namespace path)"
    )]
    Open {
        typ: String,
        path: PathBuf,
        msg: String,
    },
    /// runc's text (standard_init_linux.go, writeSystemProperty): no root of a user
    /// namespace may write a UTS sysctl ([`check_user_ns_sysctls`]).
    #[error(
        "unable to start container process: error during container init: open /proc/sys/{path}: permission denied"
    )]
    UtsSysctlInUserNs { path: String },
    #[error("linux.sysctl {key}: write {value:?} in the container's namespace: {msg}")]
    Sysctl {
        key: String,
        value: String,
        msg: String,
    },
    #[error("join the container's {typ} namespace {path} before its user namespace: {errno}")]
    Join {
        typ: String,
        path: PathBuf,
        errno: nix::Error,
    },
}

/// A namespace siloc joins for the container (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outer {
    /// The spec's namespace type.
    pub typ: LinuxNamespaceType,
    /// The spec's `path`.
    pub path: PathBuf,
}

/// The namespace types siloc can join for the container: setns(2) moves the calling
/// thread at once and children inherit them (unlike `pid` and `time`, which apply
/// to children only, or `mount`, which libcontainer sets up itself).
const JOINABLE: [(LinuxNamespaceType, &str, CloneFlags); 4] = [
    (LinuxNamespaceType::Network, "net", CloneFlags::CLONE_NEWNET),
    (LinuxNamespaceType::Ipc, "ipc", CloneFlags::CLONE_NEWIPC),
    (LinuxNamespaceType::Uts, "uts", CloneFlags::CLONE_NEWUTS),
    (
        LinuxNamespaceType::Cgroup,
        "cgroup",
        CloneFlags::CLONE_NEWCGROUP,
    ),
];

fn joinable(t: LinuxNamespaceType) -> Option<(&'static str, CloneFlags)> {
    JOINABLE
        .iter()
        .find(|(j, _, _)| *j == t)
        .map(|(_, proc_name, flag)| (*proc_name, *flag))
}

/// The error for namespace path `path` of type `typ` that could not be opened or
/// stat(2)ed (`e`): runc's lstat words ([`OuterNsError::Missing`]) when lstat(2) fails
/// too, as runc's config validator lstats each path; else [`OuterNsError::Open`] (a
/// dangling symlink, EACCES, ELOOP: runc's nsexec fails to open it).
pub fn unreachable_path(typ: LinuxNamespaceType, path: &Path, e: &std::io::Error) -> OuterNsError {
    let msg = crate::sys::errno::go_io_text(e);
    match std::fs::symlink_metadata(path) {
        Err(_) => OuterNsError::Missing {
            path: path.to_path_buf(),
            msg,
        },
        Ok(_) => OuterNsError::Open {
            typ: type_name(typ),
            path: path.to_path_buf(),
            msg,
        },
    }
}

/// The spec's name of a namespace type (runtime-spec config-linux.md "Namespaces").
fn type_name(t: LinuxNamespaceType) -> String {
    match t {
        LinuxNamespaceType::Network => "network".to_string(),
        LinuxNamespaceType::Mount => "mount".to_string(),
        other => other.to_string(),
    }
}

/// runc's nsexec name (its `all_ns_types`, the `/proc/PID/ns` names) and the
/// `CLONE_NEW*` value of a namespace type.
fn nsexec_type(t: LinuxNamespaceType) -> (&'static str, libc::c_int) {
    match t {
        LinuxNamespaceType::Network => ("net", libc::CLONE_NEWNET),
        LinuxNamespaceType::Mount => ("mnt", libc::CLONE_NEWNS),
        LinuxNamespaceType::Ipc => ("ipc", libc::CLONE_NEWIPC),
        LinuxNamespaceType::Uts => ("uts", libc::CLONE_NEWUTS),
        LinuxNamespaceType::Pid => ("pid", libc::CLONE_NEWPID),
        LinuxNamespaceType::User => ("user", libc::CLONE_NEWUSER),
        LinuxNamespaceType::Cgroup => ("cgroup", libc::CLONE_NEWCGROUP),
        LinuxNamespaceType::Time => ("time", libc::CLONE_NEWTIME),
    }
}

/// Checks that each namespace given by path is a namespace of its entry's type, as
/// runc's setns(2) of it with that type checks (runc 1.1.5 and 1.4 refuse with
/// `failed to setns into user namespace: Invalid argument` for a `user` path that is
/// a network namespace; libcontainer 0.7 said `intermediate process error EINVAL`
/// after it had made the cgroups). A path that cannot be opened is left to the
/// checks that name it.
///
/// Errors: [`OuterNsError::WrongType`]; [`OuterNsError::Missing`] and
/// [`OuterNsError::Open`] for a path the host's root cannot open (libcontainer's init
/// said only "ENOENT" or "EACCES").
pub fn check_types(spec: &Spec) -> Result<(), OuterNsError> {
    let nss = spec
        .linux()
        .as_ref()
        .and_then(|l| l.namespaces().clone())
        .unwrap_or_default();
    for n in &nss {
        let Some(path) = n.path() else { continue };
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) => return Err(unreachable_path(n.typ(), path, &e)),
        };
        let (nsexec, want) = nsexec_type(n.typ());
        let found = match crate::sys::ns::ns_type(&f) {
            Ok(t) if t == want => continue,
            Ok(t) => {
                use LinuxNamespaceType as T;
                [
                    T::Network,
                    T::Mount,
                    T::Ipc,
                    T::Uts,
                    T::Pid,
                    T::User,
                    T::Cgroup,
                    T::Time,
                ]
                .into_iter()
                .map(nsexec_type)
                .find(|(_, v)| *v == t)
                .map_or_else(
                    || format!("a namespace of type {t:#x}"),
                    |(name, _)| format!("a {name} namespace"),
                )
            }
            Err(_) => "not a namespace file".to_string(),
        };
        return Err(OuterNsError::WrongType {
            nsexec,
            typ: type_name(n.typ()),
            path: path.clone(),
            found,
        });
    }
    Ok(())
}

/// Takes out of `spec` the namespaces given by path that the container's user
/// namespace does not own, and returns them in the spec's order. A spec without a
/// user namespace is left as it is (its namespaces are joined as host root), as is a
/// namespace the container's user namespace (the one named by path) owns. A new user
/// namespace owns no existing namespace, so with one every `network`, `ipc`, `uts`
/// and `cgroup` path is taken.
///
/// Errors: [`OuterNsError::WrongType`] for a path of another namespace type
/// ([`check_types`], also without a user namespace); [`OuterNsError::Path`] when a
/// path cannot be opened or is not a namespace; [`OuterNsError::Unsupported`] for a
/// `pid`, `mount` or `time` path owned outside.
pub fn take(spec: &mut Spec) -> Result<Vec<Outer>, OuterNsError> {
    check_types(spec)?;
    let Some(mut linux) = spec.linux().clone() else {
        return Ok(Vec::new());
    };
    let Some(nss) = linux.namespaces().clone() else {
        return Ok(Vec::new());
    };
    let Some(user) = nss.iter().find(|n| n.typ() == LinuxNamespaceType::User) else {
        return Ok(Vec::new());
    };
    let path_err = |typ: LinuxNamespaceType, path: &Path, msg: String| OuterNsError::Path {
        typ: type_name(typ),
        path: path.to_path_buf(),
        msg,
    };
    let target = match user.path() {
        Some(p) => Some(ns_id(p).map_err(|e| path_err(user.typ(), p, e.to_string()))?),
        None => None,
    };
    let mut kept = Vec::with_capacity(nss.len());
    let mut taken = Vec::new();
    for n in nss {
        let Some(path) = n.path().clone() else {
            kept.push(n);
            continue;
        };
        if n.typ() == LinuxNamespaceType::User {
            kept.push(n);
            continue;
        }
        let owner = owner_of(&path).map_err(|e| path_err(n.typ(), &path, e))?;
        if target == Some(owner) {
            kept.push(n);
        } else if joinable(n.typ()).is_some() {
            taken.push(Outer { typ: n.typ(), path });
        } else {
            return Err(OuterNsError::Unsupported {
                typ: type_name(n.typ()),
                path,
            });
        }
    }
    if !taken.is_empty() {
        linux.set_namespaces(Some(kept));
        spec.set_linux(Some(linux));
    }
    Ok(taken)
}

/// Whether sysctl `key` (dots or slashes) belongs to a namespace of type `t`, as
/// libcontainer's validator and runc sort them (runc's libcontainer/configs/validate:
/// `net.*`; the IPC list and `fs.mqueue.*`; `kernel.domainname`).
pub(crate) fn sysctl_of(key: &str, t: LinuxNamespaceType) -> bool {
    let k = key.replace('/', ".");
    match t {
        LinuxNamespaceType::Network => k.starts_with("net."),
        LinuxNamespaceType::Ipc => {
            k.starts_with("fs.mqueue.")
                || [
                    "kernel.msgmax",
                    "kernel.msgmnb",
                    "kernel.msgmni",
                    "kernel.sem",
                    "kernel.shmall",
                    "kernel.shmmax",
                    "kernel.shmmni",
                    "kernel.shm_rmid_forced",
                ]
                .contains(&k.as_str())
        }
        LinuxNamespaceType::Uts => k == "kernel.domainname",
        _ => false,
    }
}

/// Takes out of `spec` the `linux.sysctl` entries of the namespaces in `outer`
/// (containerd 2.x gives a pod sandbox `net.ipv4.ping_group_range`): libcontainer's
/// validator would refuse a `net.*` sysctl for a spec without a network namespace, and
/// the container's root, inside a user namespace that does not own the namespace,
/// could not write them. siloc writes them, as the host's root, once it is in those
/// namespaces ([`Entered::write_sysctls`]). Returns them sorted by key.
pub fn take_sysctls(spec: &mut Spec, outer: &[Outer]) -> Vec<(String, String)> {
    let Some(mut linux) = spec.linux().clone() else {
        return Vec::new();
    };
    let Some(mut all) = linux.sysctl().clone() else {
        return Vec::new();
    };
    let mut taken: Vec<(String, String)> = all
        .iter()
        .filter(|(k, _)| outer.iter().any(|o| sysctl_of(k, o.typ)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if taken.is_empty() {
        return taken;
    }
    taken.sort();
    for (k, _) in &taken {
        all.remove(k);
    }
    linux.set_sysctl(Some(all));
    spec.set_linux(Some(linux));
    taken
}

/// Refuses `kernel.domainname` in `linux.sysctl` of a container with its own user
/// namespace (new, or a path to one other than the caller's), in runc's words, before
/// anything is made. The kernel's UTS sysctls have no per-namespace owner
/// (kernel/utsname_sysctl.c): /proc/sys/kernel/domainname is writable by the host's
/// root only, never by the root of a user namespace, whoever owns the UTS namespace;
/// runc 1.1.5 writes it from the container's init and fails with EACCES, and siloc
/// would fail later with libcontainer's bare "open subpath in procfs failed" (or, for
/// a UTS namespace given by path, write it as the host's root, which runc never does).
///
/// Errors: [`OuterNsError::UtsSysctlInUserNs`] naming the /proc/sys path runc opens.
pub fn check_user_ns_sysctls(spec: &Spec) -> Result<(), OuterNsError> {
    let Some(linux) = spec.linux().as_ref() else {
        return Ok(());
    };
    let Some(key) = linux
        .sysctl()
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| sysctl_of(k, LinuxNamespaceType::Uts))
    else {
        return Ok(());
    };
    let own_user_ns = linux
        .namespaces()
        .iter()
        .flatten()
        .find(|n| n.typ() == LinuxNamespaceType::User)
        .is_some_and(|n| match n.path() {
            None => true,
            Some(p) => !same_ns(p, Path::new("/proc/self/ns/user")),
        });
    if !own_user_ns {
        return Ok(());
    }
    Err(OuterNsError::UtsSysctlInUserNs {
        path: key.replace('.', "/"),
    })
}

/// Whether namespace files `a` and `b` are the same namespace (device and inode);
/// `false` when either cannot be read.
fn same_ns(a: &Path, b: &Path) -> bool {
    matches!((ns_id(a), ns_id(b)), (Ok(x), Ok(y)) if x == y)
}

/// The value of `io.siloc.namespaces.inherited`: `network=/var/run/netns/x ipc=...`.
pub fn describe(outer: &[Outer]) -> String {
    outer
        .iter()
        .map(|o| format!("{}={}", type_name(o.typ), o.path.display()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The (device, inode) of the user namespace that owns the namespace at `path`
/// (ioctl_ns(2) `NS_GET_USERNS`). Errors: the file cannot be opened, or is no
/// namespace file (ENOTTY), as text.
fn owner_of(path: &Path) -> Result<(u64, u64), String> {
    let f = File::open(path).map_err(|e| e.to_string())?;
    let owner = crate::sys::ns::owner_userns(&f).map_err(|e| match e {
        nix::Error::ENOTTY | nix::Error::EINVAL => "not a namespace file".to_string(),
        e => format!("NS_GET_USERNS: {e}"),
    })?;
    crate::sys::ns::id_of(&owner).map_err(|e| e.to_string())
}

/// siloc's own namespaces while it is in the container's (see [`Opened::enter`]);
/// dropping it returns there.
#[derive(Debug)]
pub struct Entered {
    back: Vec<(CloneFlags, File, &'static str)>,
}

/// The namespaces to enter and siloc's own, opened ([`Opened::open`]) but not entered.
#[derive(Debug)]
pub struct Opened {
    targets: Vec<(Outer, CloneFlags, File)>,
    back: Vec<(CloneFlags, File, &'static str)>,
}

impl Opened {
    /// Opens each of `outer` and the calling thread's own namespace of each type
    /// (close-on-exec).
    ///
    /// Errors: [`OuterNsError::Path`] (open), [`OuterNsError::Unsupported`].
    pub fn open(outer: &[Outer]) -> Result<Opened, OuterNsError> {
        let mut targets = Vec::with_capacity(outer.len());
        let mut back = Vec::with_capacity(outer.len());
        for o in outer {
            let Some((proc_name, flag)) = joinable(o.typ) else {
                return Err(OuterNsError::Unsupported {
                    typ: type_name(o.typ),
                    path: o.path.clone(),
                });
            };
            let open = |p: &Path| {
                File::open(p).map_err(|e| OuterNsError::Path {
                    typ: type_name(o.typ),
                    path: p.to_path_buf(),
                    msg: e.to_string(),
                })
            };
            targets.push((o.clone(), flag, open(&o.path)?));
            let own = PathBuf::from(format!("/proc/thread-self/ns/{proc_name}"));
            back.push((flag, open(&own)?, proc_name));
        }
        Ok(Opened { targets, back })
    }

    /// siloc's own namespaces as (`/proc/PID/ns` name, fd in this process): the
    /// runtime namespaces that siloc's wrapper of the prestart and createRuntime hooks
    /// returns to (runtime-spec: those hooks run in the runtime namespace), through
    /// `/proc/<its parent>/fd/<fd>` ([`crate::engine::hooks::runtime_namespaces`]).
    pub fn own_fds(&self) -> Vec<(&'static str, std::os::fd::RawFd)> {
        use std::os::fd::AsRawFd;
        self.back
            .iter()
            .map(|(_, f, name)| (*name, f.as_raw_fd()))
            .collect()
    }

    /// Moves the calling thread into each namespace (setns(2)), keeping its own to
    /// return to. libcontainer forks the container from this thread, so it inherits
    /// them.
    ///
    /// Errors: [`OuterNsError::Join`]; the namespaces entered so far are left again.
    pub fn enter(self) -> Result<Entered, OuterNsError> {
        let mut entered = Entered { back: Vec::new() };
        for ((o, flag, f), b) in self.targets.into_iter().zip(self.back) {
            nix::sched::setns(&f, flag).map_err(|errno| OuterNsError::Join {
                typ: type_name(o.typ),
                path: o.path.clone(),
                errno,
            })?;
            entered.back.push(b);
        }
        Ok(entered)
    }
}

impl Entered {
    /// Writes `sysctls` ([`take_sysctls`]) under /proc/sys, which shows the
    /// namespaces of the writing thread: the container's, entered.
    ///
    /// Errors: [`OuterNsError::Sysctl`] naming the key.
    pub fn write_sysctls(&self, sysctls: &[(String, String)]) -> Result<(), OuterNsError> {
        for (k, v) in sysctls {
            let p = Path::new("/proc/sys").join(k.replace('.', "/"));
            std::fs::write(&p, v).map_err(|e| OuterNsError::Sysctl {
                key: k.clone(),
                value: v.clone(),
                msg: format!("{}: {e}", p.display()),
            })?;
        }
        Ok(())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        for (flag, f, name) in self.back.drain(..).rev() {
            if let Err(e) = nix::sched::setns(&f, flag) {
                tracing::warn!(target: "siloc", "return to siloc's own {name} namespace: {e}");
            }
        }
    }
}

/// For `siloc exec` into the container whose init is `pid`, before it enters the
/// container's user namespace: joins each of the init's `net`, `ipc`, `uts` and
/// `cgroup` namespaces that is not the caller's and that the init's user namespace
/// does not own (those [`take`] took at create; libcontainer's tenant builder joins
/// only the namespaces the final spec lists). Nothing happens for a container without
/// a user namespace of its own. The caller stays in them. Returns the types joined.
///
/// Errors: [`OuterNsError`] naming `/proc/<pid>/ns/<type>`.
pub fn join_for_exec(pid: i32) -> Result<Vec<&'static str>, OuterNsError> {
    let proc = |t: &str| PathBuf::from(format!("/proc/{pid}/ns/{t}"));
    let err = |t: &str, p: &Path, e: String| OuterNsError::Path {
        typ: t.to_string(),
        path: p.to_path_buf(),
        msg: e,
    };
    let init_user = proc("user");
    let theirs = ns_id(&init_user).map_err(|e| err("user", &init_user, e.to_string()))?;
    let ours = ns_id(Path::new("/proc/self/ns/user"))
        .map_err(|e| err("user", Path::new("/proc/self/ns/user"), e.to_string()))?;
    if theirs == ours {
        return Ok(Vec::new());
    }
    let mut joined = Vec::new();
    for (_, name, flag) in JOINABLE {
        let p = proc(name);
        let Ok(id) = ns_id(&p) else {
            continue; // a kernel without this namespace type
        };
        let own = ns_id(format!("/proc/thread-self/ns/{name}"));
        if own.is_ok_and(|o| o == id) {
            continue;
        }
        if owner_of(&p).map_err(|e| err(name, &p, e))? == theirs {
            continue;
        }
        let f = File::open(&p).map_err(|e| err(name, &p, e.to_string()))?;
        nix::sched::setns(&f, flag).map_err(|errno| OuterNsError::Join {
            typ: name.to_string(),
            path: p.clone(),
            errno,
        })?;
        joined.push(name);
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ns: &str) -> Spec {
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2","linux":{{"namespaces":{ns}}}}}"#
        ))
        .unwrap()
    }

    #[test]
    fn without_a_user_namespace_nothing_is_taken() {
        let mut s = spec(r#"[{"type":"network","path":"/proc/self/ns/net"},{"type":"mount"}]"#);
        let before = s.clone();
        assert_eq!(take(&mut s).unwrap(), vec![]);
        assert_eq!(s, before);
    }

    #[test]
    fn a_new_user_namespace_takes_every_joinable_path() {
        let mut s = spec(
            r#"[{"type":"user"},{"type":"network","path":"/proc/self/ns/net"},
                {"type":"uts","path":"/proc/self/ns/uts"},{"type":"ipc"},{"type":"mount"}]"#,
        );
        let taken = take(&mut s).unwrap();
        assert_eq!(
            taken,
            vec![
                Outer {
                    typ: LinuxNamespaceType::Network,
                    path: "/proc/self/ns/net".into()
                },
                Outer {
                    typ: LinuxNamespaceType::Uts,
                    path: "/proc/self/ns/uts".into()
                }
            ]
        );
        let left: Vec<_> = s
            .linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .as_ref()
            .unwrap()
            .iter()
            .map(|n| n.typ())
            .collect();
        assert_eq!(
            left,
            vec![
                LinuxNamespaceType::User,
                LinuxNamespaceType::Ipc,
                LinuxNamespaceType::Mount
            ]
        );
        assert_eq!(
            describe(&taken),
            "network=/proc/self/ns/net uts=/proc/self/ns/uts"
        );
    }

    #[test]
    fn domainname_is_refused_in_a_user_namespace_in_runcs_words() {
        let spec = |ns: &str, key: &str| -> Spec {
            serde_json::from_str(&format!(
                r#"{{"ociVersion":"1.0.2","linux":{{"namespaces":[{{"type":"uts"}}{ns}],
                "sysctl":{{"{key}":"example.org"}}}}}}"#
            ))
            .unwrap()
        };
        let e = check_user_ns_sysctls(&spec(r#",{"type":"user"}"#, "kernel.domainname"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "unable to start container process: error during container init: open \
             /proc/sys/kernel/domainname: permission denied"
        );
        let e = check_user_ns_sysctls(&spec(r#",{"type":"user"}"#, "kernel/domainname"));
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("/proc/sys/kernel/domainname:")
        );
        // no user namespace, the caller's own, or another sysctl: nothing to refuse
        check_user_ns_sysctls(&spec("", "kernel.domainname")).unwrap();
        let own = r#",{"type":"user","path":"/proc/self/ns/user"}"#;
        check_user_ns_sysctls(&spec(own, "kernel.domainname")).unwrap();
        check_user_ns_sysctls(&spec(r#",{"type":"user"}"#, "kernel.shmmax")).unwrap();
    }

    #[test]
    fn the_sysctls_of_taken_namespaces_are_taken() {
        let mut s: Spec = serde_json::from_str(
            r#"{"ociVersion":"1.0.2","linux":{"sysctl":{"net.ipv4.ping_group_range":"0 2147483647",
                "kernel.shmmax":"1000","kernel.domainname":"x"}}}"#,
        )
        .unwrap();
        let net = [Outer {
            typ: LinuxNamespaceType::Network,
            path: "/x".into(),
        }];
        assert_eq!(
            take_sysctls(&mut s, &net),
            vec![(
                "net.ipv4.ping_group_range".to_string(),
                "0 2147483647".to_string()
            )]
        );
        let left = s.linux().as_ref().unwrap().sysctl().clone().unwrap();
        assert_eq!(left.len(), 2);
        assert!(left.contains_key("kernel.shmmax"));
        assert_eq!(take_sysctls(&mut s, &[]), vec![]);
    }

    #[test]
    fn namespaces_the_joined_user_namespace_owns_stay() {
        // The test runs in the host's user namespace, which owns its own network
        // namespace: joining that user namespace by path keeps the entry.
        let mut s = spec(
            r#"[{"type":"user","path":"/proc/self/ns/user"},{"type":"network","path":"/proc/self/ns/net"}]"#,
        );
        let before = s.clone();
        assert_eq!(take(&mut s).unwrap(), vec![]);
        assert_eq!(s, before);
    }

    #[test]
    fn a_path_of_another_namespace_type_is_refused_in_runcs_words() {
        let mut s = spec(r#"[{"type":"user","path":"/proc/self/ns/net"}]"#);
        let e = take(&mut s).unwrap_err().to_string();
        assert_eq!(
            e,
            "failed to setns into user namespace: Invalid argument (linux.namespaces: user \
             namespace path /proc/self/ns/net is a net namespace)"
        );
        // also without a user namespace, and for a file that is no namespace
        let mut s = spec(r#"[{"type":"uts","path":"/proc/self/ns/ipc"}]"#);
        let e = take(&mut s).unwrap_err().to_string();
        assert!(
            e.starts_with("failed to setns into uts namespace: Invalid argument"),
            "{e}"
        );
        let mut s = spec(r#"[{"type":"network","path":"/etc/passwd"}]"#);
        let e = take(&mut s).unwrap_err().to_string();
        assert!(e.ends_with("/etc/passwd is not a namespace file)"), "{e}");
        let mut s = spec(r#"[{"type":"network","path":"/proc/self/ns/net"}]"#);
        assert!(take(&mut s).is_ok());
    }

    #[test]
    fn a_missing_path_is_runcs_lstat_error() {
        let s = spec(r#"[{"type":"network","path":"/nonexistent-ns"}]"#);
        assert_eq!(
            check_types(&s).unwrap_err().to_string(),
            "unable to create new parent process: namespace path: lstat /nonexistent-ns: no \
             such file or directory"
        );
    }

    #[test]
    fn a_pid_path_owned_outside_is_refused_and_bad_paths_named() {
        let mut s = spec(r#"[{"type":"user"},{"type":"pid","path":"/proc/self/ns/pid"}]"#);
        let e = take(&mut s).unwrap_err().to_string();
        assert!(e.contains("pid namespace path /proc/self/ns/pid"), "{e}");
        let mut s = spec(r#"[{"type":"user"},{"type":"network","path":"/etc/passwd"}]"#);
        let e = take(&mut s).unwrap_err().to_string();
        assert!(
            e.contains("network namespace path /etc/passwd is not a namespace file"),
            "{e}"
        );
    }
}
