//! runc's mount semantics where libcontainer 0.7 differs (runc 1.1.5 checked on the
//! same bundles, runc 1.2 where it says so). Two halves: [`prepare`] edits the spec
//! libcontainer gets, before it builds the container, and [`in_container`] finishes inside
//! the container's own mount namespace after it has built it, before its process
//! starts (in the one post-build helper, [`super::post_build`], that joins that mount
//! namespace and the container's root).
//!
//! [`prepare`] (pure spec edits, reads the rootfs only):
//!
//! - `proc` and `sysfs` on a destination that exists and is not a directory (a
//!   symlink) are refused with runc's words, `error mounting "proc" to rootfs at
//!   "/proc": filesystem "proc" must be mounted on ordinary directory` (runc's
//!   mountToRootfs; libcontainer says so too, but siloc's caller only saw "failed to
//!   prepare rootfs").
//! - A destination is cleaned lexically first, as runc's `filepath.Clean`
//!   (`/vol/../x` mounts at `/x`; libcontainer failed with "failed to prepare
//!   rootfs").
//! - A destination through a symlink (also a dangling one) is resolved inside the
//!   rootfs, as runc's securejoin does: `/dl -> /nonexistent/dir` mounts at
//!   `/nonexistent/dir`, made if missing. libcontainer fails with "failed to prepare
//!   rootfs". Resolved against the rootfs before any spec mount exists: a symlink
//!   that only an earlier spec mount provides is not followed.
//! - A `tmpfs` without `mode=` over an existing directory gets that directory's mode
//!   (runc: `mode=%04o` from stat(2) of the destination); libcontainer leaves tmpfs's
//!   default 1777.
//! - `tmpcopyup` (runc's extension) is taken out of the options libcontainer sees (it
//!   refuses it) and done by [`in_container`].
//! - duplicate `maskedPaths` are dropped (runc 1.2), and, in a container with its own
//!   mount namespace, all masking moves to [`in_container`] (below), and so do the
//!   `readonlyPaths`: libcontainer made them in its init, before siloc's own cgroup v1
//!   mount ([`super::pidns_cgroup`]), which runc makes with the spec's mounts, before
//!   them (the container's mount table lists the mounts in the order they were made).
//!
//! [`in_container`] (in the container's mount namespace, in this order):
//!
//! 1. `tmpcopyup`: the directory the tmpfs covers is copied into it (directories,
//!    files, symlinks, device nodes and fifos, with their modes and owners). The
//!    covered directory is read through a non-recursive `open_tree(OPEN_TREE_CLONE)`
//!    of the mount that holds it (the parent's), where nothing covers it.
//! 2. mount flags, with mount_setattr(2) on the mount at the destination (not
//!    recursive):
//!    - bind mounts: the cleared flags among the options (`rw`, `suid`, `dev`, `exec`,
//!      `atime` or `relatime`, `diratime`, `symfollow`; the last of `ro`/`rw` etc. wins)
//!      are cleared. libcontainer 0.7 only ever sets flags, so a bind of a `nosuid`
//!      or read-only source kept them. In a container with a user namespace, the
//!      flags the source has (statvfs(2)) are kept: the kernel locks them in a less
//!      privileged mount namespace (mount_namespaces(7), "MNT_LOCK_*"; not
//!      `nosymfollow`), and runc keeps them too (runc 1.2's source statfs check).
//!    - any mount: `nosymfollow` (MS_NOSYMFOLLOW, Linux 5.10: symlinks on the mount
//!      are not followed in path lookups) is set, as runc 1.1.5 sets it. libcontainer
//!      0.7 passes the non-recursive option to mount(2) as data: a bind ignored it,
//!      a tmpfs failed ("failed to prepare rootfs"). [`prepare`] takes it (and
//!      `symfollow`) out of the options libcontainer sees; in a container without a
//!      mount namespace of its own (none, or one joined by `path`) `nosymfollow`
//!      is refused by name ([`MountCompatError::NeedsOwnMountNs`]), as siloc
//!      cannot set it there.
//! 3. read-only paths, as runc 1.1.5's `readonlyPath`: a recursive bind of the path
//!    onto itself (a missing path is skipped), remounted read-only with the `nosuid`,
//!    `nodev`, `noexec` its mount has (statvfs(3); runc reads statfs(2)); libcontainer
//!    0.7 added all three.
//!    Symlinks are followed as for masked paths (below).
//! 4. masked paths: a file gets a bind of the container's `/dev/null` (checked to be
//!    the 1:3 character device), every directory one read-only tmpfs, shared by bind
//!    mounts (runc 1.2; libcontainer mounts one tmpfs per directory). A missing path
//!    is skipped. A symlink is followed in the container as runc's init follows it,
//!    `/proc/self` as the init (`/proc/net -> self/net` masks `/proc/1/net`).
//! 5. a `/dev` mount with `ro` is made read-only last (runc's finalizeRootfs);
//!    libcontainer drops `ro` from `/dev` to make the device nodes and never restores
//!    it.
//!
//! In a container without its own mount namespace (or one joined by path), [`in_container`]
//! changes nothing and libcontainer masks and makes paths read-only as before (masked
//! paths deduplicated).
//!
//! Delete this module when libcontainer applies cleared bind flags, a read-only /dev,
//! tmpfs modes, tmpcopyup and in-root symlink resolution as runc does.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use oci_spec::runtime::{LinuxNamespaceType, Spec};

/// Errors of the mount semantics; each names the mount (by destination) or path.
#[derive(Debug, thiserror::Error)]
pub enum MountCompatError {
    /// runc's text (mountToRootfs), wrapped as runc's init error reaches its caller.
    #[error(
        "unable to start container process: error during container init: error mounting \
         {src:?} to rootfs at {destination:?}: filesystem {typ:?} must be mounted on \
         ordinary directory"
    )]
    NotDirectory {
        src: String,
        destination: String,
        typ: String,
    },
    #[error("mounts: {destination}: {step}: {errno}")]
    Apply {
        destination: String,
        step: &'static str,
        errno: nix::Error,
    },
    #[error("maskedPaths: {path}: {step}: {errno}")]
    Mask {
        path: String,
        step: &'static str,
        errno: nix::Error,
    },
    #[error("readonlyPaths: {path}: {step}: {errno}")]
    ReadOnly {
        path: String,
        step: &'static str,
        errno: nix::Error,
    },
    /// A mount option siloc applies only in the container's own mount namespace.
    #[error(
        "mounts: {destination}: {option} needs a mount namespace of the container's own \
         (linux.namespaces: \"mount\" without \"path\")"
    )]
    NeedsOwnMountNs {
        destination: String,
        option: &'static str,
    },
    #[error("mounts: {0}")]
    Sys(nix::Error),
    /// runc's refusal of a mount (bind source missing, not procfs over `/proc`).
    #[error(transparent)]
    Refused(#[from] super::mount_refusals::MountRefusal),
}

/// `MOUNT_ATTR_*` of `<linux/mount.h>`.
const ATTR_RDONLY: u64 = 0x1;
const ATTR_NOSUID: u64 = 0x2;
const ATTR_NODEV: u64 = 0x4;
const ATTR_NOEXEC: u64 = 0x8;
const ATTR_ATIME_MASK: u64 = 0x70;
const ATTR_NODIRATIME: u64 = 0x80;
const ATTR_NOSYMFOLLOW: u64 = 0x0020_0000;

/// One mount whose flags [`in_container`] sets or clears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountAttrs {
    /// The destination, resolved in the rootfs.
    pub destination: String,
    /// `MOUNT_ATTR_*` bits to set (`nosymfollow`).
    pub set: u64,
    /// `MOUNT_ATTR_*` bits to clear (a bind mount's cleared flags).
    pub clear: u64,
    /// `atime` or `relatime`: the atime mode becomes `relatime` (the kernel's default).
    pub atime: bool,
}

/// What [`in_container`] does for one container (empty: nothing, and no helper is forked).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Destinations of `tmpcopyup` tmpfs mounts, in mount order.
    pub tmpcopyup: Vec<String>,
    /// Mounts with flags to set or clear.
    pub attrs: Vec<MountAttrs>,
    /// Masked paths taken over from libcontainer (deduplicated, in spec order).
    pub masks: Vec<String>,
    /// `readonlyPaths` taken over from libcontainer (in spec order).
    pub readonly: Vec<String>,
    /// A `/dev` mount with `ro`.
    pub dev_read_only: bool,
    /// Mounts whose landing place siloc checks in the init's mount table once made
    /// ([`super::mount_refusals::check_made`], from siloc: no helper needed).
    pub proc_watch: super::mount_refusals::ProcWatch,
}

impl Plan {
    /// Whether there is nothing to do in the container (then no helper is needed).
    pub fn is_empty(&self) -> bool {
        *self
            == Plan {
                proc_watch: self.proc_watch.clone(),
                ..Plan::default()
            }
    }
}

/// An earlier mount's destination (resolved, absolute) and, for a bind mount, the host
/// path its source names ([`super::idmapped_mounts::resolve_source`]): what the
/// container sees below `dest` once that mount is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Covered {
    pub dest: PathBuf,
    pub bind_source: Option<PathBuf>,
    /// The mount brings content made elsewhere (a bind's source, an overlay's layers, a
    /// disk's filesystem; not tmpfs, proc, sysfs, ...): its symlinks are unknown to
    /// siloc (not a bind) or can change (a bind's source, shared with others) until
    /// libcontainer mounts below it, so where such a mount lands is checked in the
    /// mount table ([`super::mount_refusals::check_made`]).
    pub has_content: bool,
}

/// Mount types whose content is made by the mount (empty, or the kernel's own).
const MADE_BY_MOUNT: [&str; 8] = [
    "tmpfs", "proc", "sysfs", "mqueue", "cgroup", "cgroup2", "devpts", "bind",
];

/// The [`Covered`] entry of spec mount `m` at its resolved destination `dest`.
fn covered_by(
    m: &oci_spec::runtime::Mount,
    index: usize,
    dest: PathBuf,
    given: &[oci_spec::runtime::Mount],
    rootfs: &Path,
    bundle: &Path,
) -> Covered {
    let bind = is_bind(m);
    Covered {
        dest,
        bind_source: bind
            .then(|| super::idmapped_mounts::resolve_source(given, index, rootfs, bundle).ok())
            .flatten(),
        has_content: bind || !MADE_BY_MOUNT.contains(&m.typ().as_deref().unwrap_or_default()),
    }
}

/// Resolves `path` (absolute or relative to `/`) inside `rootfs` as runc's securejoin
/// does against the rootfs as the earlier mounts left it: each symlink is followed
/// with `rootfs` as `/`, `..` stops at `/`, a missing component ends resolution (the
/// rest is kept as written). Below an earlier bind mount of `covered` (the latest one
/// holding the path) components are looked up in its source, so a symlink there is
/// followed too (runc 1.1.5 mounts each entry before it resolves the next: a
/// `/vol/link -> /proc/self` in a volume puts `/vol/link/attr` inside /proc). Below
/// any other earlier mount (what the rootfs has there is hidden, e.g. a Debian image's
/// `/dev/shm -> /run/shm` under the `/dev` tmpfs, and the mount's content does not
/// exist yet) nothing is resolved. Returns the resolved container path (absolute,
/// cleaned). More than 255 links: the path as written.
pub fn resolve_in_root(rootfs: &Path, path: &Path, covered: &[Covered]) -> PathBuf {
    let mut out = PathBuf::from("/");
    let mut links = 0;
    // A stack of pending components (reversed), refilled by symlink targets.
    let mut pending: Vec<std::ffi::OsString> = Vec::new();
    let push = |p: &Path, pending: &mut Vec<std::ffi::OsString>| {
        let comps: Vec<_> = p
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        pending.extend(comps.into_iter().rev());
    };
    push(path, &mut pending);
    let mut missing = false;
    while let Some(c) = pending.pop() {
        if c == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&c);
        let host = match covering(&next, covered) {
            _ if missing => None,
            None => Some(rootfs.join(next.strip_prefix("/").unwrap_or(&next))),
            // A mount's root is never a symlink.
            Some(c) if c.dest == next => {
                out = next;
                continue;
            }
            Some(Covered {
                dest,
                bind_source: Some(src),
                ..
            }) => next.strip_prefix(dest).ok().map(|rest| src.join(rest)),
            Some(_) => None,
        };
        let Some(host) = host else {
            missing = true;
            out = next;
            continue;
        };
        match std::fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 255 {
                    return crate::sys::paths::clean(path);
                }
                let Ok(target) = std::fs::read_link(&host) else {
                    out = next;
                    continue;
                };
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                push(&target, &mut pending);
            }
            Ok(_) => out = next,
            Err(_) => {
                missing = true;
                out = next;
            }
        }
    }
    out
}

/// The latest of `covered` that `p` is at or below.
fn covering<'a>(p: &Path, covered: &'a [Covered]) -> Option<&'a Covered> {
    covered.iter().rev().find(|c| p.starts_with(&c.dest))
}

fn has_option(opts: &[String], name: &str) -> bool {
    opts.iter().any(|o| o == name)
}

/// The last of `set`/`clear` among `opts`: `Some(true)` when `set` came last.
fn last_of(opts: &[String], set: &str, clear: &str) -> Option<bool> {
    opts.iter().rev().find_map(|o| {
        if o == set {
            Some(true)
        } else if o == clear {
            Some(false)
        } else {
            None
        }
    })
}

/// The `MOUNT_ATTR_*` bits of a bind mount's options that end cleared (`rw`, `suid`,
/// `dev`, `exec`, `diratime`, `symfollow` last among their pair), and whether `atime` or
/// `relatime` asks the atime mode back to relatime (no `noatime` or `strictatime`
/// after it). libcontainer ORs `MS_RELATIME` into the source's flags, and the kernel
/// keeps a source's `noatime` over it (fs/namespace.c: `MS_NOATIME` wins), where runc
/// 1.1.5 and 1.2 give `relatime`.
pub fn cleared_flags(opts: &[String]) -> (u64, bool) {
    let mut clear = 0;
    for (set, unset, bit) in [
        ("ro", "rw", ATTR_RDONLY),
        ("nosuid", "suid", ATTR_NOSUID),
        ("nodev", "dev", ATTR_NODEV),
        ("noexec", "exec", ATTR_NOEXEC),
        ("nodiratime", "diratime", ATTR_NODIRATIME),
        ("nosymfollow", "symfollow", ATTR_NOSYMFOLLOW),
    ] {
        if last_of(opts, set, unset) == Some(false) {
            clear |= bit;
        }
    }
    let atime = opts
        .iter()
        .rev()
        .find(|o| matches!(o.as_str(), "atime" | "noatime" | "strictatime" | "relatime"))
        .is_some_and(|o| o == "atime" || o == "relatime");
    (clear, atime)
}

/// The `MOUNT_ATTR_*` bits a source mount has (statvfs(2) `f_flag`); `None` when it
/// cannot be read.
fn source_flags(source: &Path) -> Option<(u64, bool)> {
    let s = nix::sys::statvfs::statvfs(source).ok()?;
    use nix::sys::statvfs::FsFlags;
    let f = s.flags();
    let mut bits = 0;
    for (flag, bit) in [
        (FsFlags::ST_RDONLY, ATTR_RDONLY),
        (FsFlags::ST_NOSUID, ATTR_NOSUID),
        (FsFlags::ST_NODEV, ATTR_NODEV),
        (FsFlags::ST_NOEXEC, ATTR_NOEXEC),
        (FsFlags::ST_NODIRATIME, ATTR_NODIRATIME),
    ] {
        if f.contains(flag) {
            bits |= bit;
        }
    }
    Some((bits, f.contains(FsFlags::ST_NOATIME)))
}

fn is_bind(m: &oci_spec::runtime::Mount) -> bool {
    m.typ().as_deref() == Some("bind")
        || m.options()
            .iter()
            .flatten()
            .any(|o| o == "bind" || o == "rbind")
}

fn has_namespace(spec: &Spec, typ: LinuxNamespaceType) -> bool {
    spec.linux()
        .as_ref()
        .is_some_and(|l| l.namespaces().iter().flatten().any(|n| n.typ() == typ))
}

/// Edits `spec` (the final spec, `rootfs` its assembled root) as the module doc says
/// and returns what [`in_container`] must do once the container exists. `bundle` is where
/// relative bind sources resolve.
///
/// Errors: [`MountCompatError::NotDirectory`] for `proc`/`sysfs` on a destination
/// that is not a directory; [`MountCompatError::Refused`] for a mount runc refuses
/// ([`super::mount_refusals`]).
pub fn prepare(spec: &mut Spec, rootfs: &Path, bundle: &Path) -> Result<Plan, MountCompatError> {
    let own_mount_ns = matches!(
        super::mount_guard::spec_mount_ns(spec),
        super::mount_guard::SpecMountNs::New
    );
    let userns = has_namespace(spec, LinuxNamespaceType::User);
    let mut plan = Plan::default();
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    let given = mounts.clone();
    // The mounts so far: the rootfs is hidden below them.
    let mut covered: Vec<Covered> = Vec::new();
    for (index, m) in mounts.iter_mut().enumerate() {
        let written = m.destination().clone();
        if written.is_relative() {
            // runc 1.1's warning; the destination is taken relative to the rootfs.
            tracing::warn!(
                "mount destination {} is not absolute. Support for non-absolute mount \
                 destinations will be removed in a future release.",
                written.display()
            );
        }
        let lexical = crate::sys::paths::clean(&Path::new("/").join(&written));
        let typ = m.typ().clone().unwrap_or_default();
        let mut opts = m.options().clone().unwrap_or_default();
        // (no)symfollow: set or cleared by in_container, never seen by libcontainer
        let all_opts = opts.clone();
        let nosymfollow = last_of(&opts, "nosymfollow", "symfollow") == Some(true);
        if opts.iter().any(|o| o == "nosymfollow" || o == "symfollow") {
            if nosymfollow && !own_mount_ns {
                return Err(MountCompatError::NeedsOwnMountNs {
                    destination: written.display().to_string(),
                    option: "nosymfollow",
                });
            }
            opts.retain(|o| o != "nosymfollow" && o != "symfollow");
            m.set_options(Some(opts.clone()));
        }
        let set = if nosymfollow { ATTR_NOSYMFOLLOW } else { 0 };
        if typ == "proc" || typ == "sysfs" {
            let host = rootfs.join(lexical.strip_prefix("/").unwrap_or(&lexical));
            if std::fs::symlink_metadata(&host).is_ok_and(|md| !md.is_dir()) {
                return Err(MountCompatError::NotDirectory {
                    src: m
                        .source()
                        .as_ref()
                        .map(|s| s.display().to_string())
                        .unwrap_or_default(),
                    destination: written.display().to_string(),
                    typ,
                });
            }
            if set != 0 {
                plan.attrs.push(MountAttrs {
                    destination: lexical.display().to_string(),
                    set,
                    clear: 0,
                    atime: false,
                });
            }
            if lexical.starts_with("/proc") {
                plan.proc_watch.allowed.push(lexical.clone());
            }
            covered.push(covered_by(m, index, lexical, &given, rootfs, bundle));
            continue;
        }
        let resolved = resolve_in_root(rootfs, &lexical, &covered);
        // runc's refusals: a missing bind source, anything but procfs at /proc.
        super::mount_refusals::check(&given, index, is_bind(m), rootfs, bundle, &resolved)?;
        let cover = resolved.parent().and_then(|p| covering(p, &covered));
        let under_earlier = cover.is_some();
        // Below a bind, an overlay or a disk's filesystem: where it lands is checked
        // once made (the content's links can change until then, or were not seen).
        if own_mount_ns
            && cover.is_some_and(|c| c.has_content)
            && super::mount_refusals::is_checked(m, is_bind(m))
        {
            let shown = super::mount_refusals::shown_source(m, is_bind(m), bundle);
            plan.proc_watch.rootfs = rootfs.display().to_string();
            plan.proc_watch
                .unverified
                .push((shown.display().to_string(), written.display().to_string()));
        }
        if resolved.starts_with("/proc") {
            plan.proc_watch.allowed.push(resolved.clone());
        }
        covered.push(covered_by(
            m,
            index,
            resolved.clone(),
            &given,
            rootfs,
            bundle,
        ));
        // `/vol/../x` too: libcontainer 0.7 takes the destination as written (and
        // failed with "failed to prepare rootfs"); runc cleans it first.
        if resolved != written {
            tracing::debug!(from = %written.display(), to = %resolved.display(),
                "mount destination resolved through a symlink in the rootfs");
            m.set_destination(resolved.clone());
        }
        let dest = resolved.display().to_string();
        let host_dest = rootfs.join(resolved.strip_prefix("/").unwrap_or(&resolved));
        if typ == "tmpfs" {
            if !opts.iter().any(|o| o.starts_with("mode="))
                && !under_earlier
                && let Ok(md) = std::fs::metadata(&host_dest)
                && md.is_dir()
            {
                opts.push(format!("mode={:04o}", md.permissions().mode() & 0o7777));
            }
            if has_option(&opts, "tmpcopyup") {
                opts.retain(|o| o != "tmpcopyup");
                if own_mount_ns {
                    plan.tmpcopyup.push(dest.clone());
                }
            }
            m.set_options(Some(opts.clone()));
        }
        let (mut clear, mut atime) = (0, false);
        if is_bind(m) && own_mount_ns {
            (clear, atime) = cleared_flags(&all_opts);
            if userns && (clear != 0 || atime) {
                let src = m
                    .source()
                    .as_ref()
                    .map(|s| bundle.join(s))
                    .unwrap_or_default();
                match source_flags(&src) {
                    Some((has, noatime)) => {
                        clear &= !has;
                        atime &= !noatime;
                    }
                    None => {
                        clear = 0;
                        atime = false;
                    }
                }
            }
        }
        if set != 0 || clear != 0 || atime {
            plan.attrs.push(MountAttrs {
                destination: dest.clone(),
                set,
                clear,
                atime,
            });
        }
        if dest == "/dev" && last_of(&opts, "ro", "rw") == Some(true) && own_mount_ns {
            plan.dev_read_only = true;
        }
    }
    if spec.mounts().is_some() {
        spec.set_mounts(Some(mounts));
    }
    if own_mount_ns
        && let Some(mut linux) = spec.linux().clone()
        && let Some(paths) = linux.readonly_paths().clone()
    {
        plan.readonly = paths;
        linux.set_readonly_paths(None);
        spec.set_linux(Some(linux));
    }
    if let Some(mut linux) = spec.linux().clone()
        && let Some(paths) = linux.masked_paths().clone()
    {
        let mut seen = std::collections::HashSet::new();
        let unique: Vec<String> = paths
            .into_iter()
            .filter(|p| seen.insert(p.clone()))
            .collect();
        if own_mount_ns {
            plan.masks = unique;
            linux.set_masked_paths(None);
        } else {
            linux.set_masked_paths(Some(unique));
        }
        spec.set_linux(Some(linux));
    }
    Ok(plan)
}

/// Steps of the helper, for its error report.
const STEPS: [&str; 10] = [
    "setns/chroot",
    "tmpcopyup",
    "mount flags",
    "mask (/dev/null)",
    "mask (tmpfs)",
    "mask (bind of the shared tmpfs)",
    "read-only /dev",
    "mask (file)",
    "bind onto itself",
    "remount read-only",
];

impl Plan {
    /// The error for the helper's report `code` (step << 16 | index, from
    /// [`in_container`]) with `errno`, naming the destination or masked path.
    pub fn error(&self, code: u32, errno: nix::Error) -> MountCompatError {
        let (step, idx) = ((code >> 16) as usize, (code & 0xffff) as usize);
        let name = STEPS.get(step).copied().unwrap_or("?");
        match step {
            1 => MountCompatError::Apply {
                destination: self.tmpcopyup.get(idx).cloned().unwrap_or_default(),
                step: name,
                errno,
            },
            2 => MountCompatError::Apply {
                destination: self
                    .attrs
                    .get(idx)
                    .map(|c| c.destination.clone())
                    .unwrap_or_default(),
                step: name,
                errno,
            },
            3..=5 | 7 => MountCompatError::Mask {
                path: self.masks.get(idx).cloned().unwrap_or_default(),
                step: name,
                errno,
            },
            6 => MountCompatError::Apply {
                destination: "/dev".into(),
                step: name,
                errno,
            },
            8 | 9 => MountCompatError::ReadOnly {
                path: self.readonly.get(idx).cloned().unwrap_or_default(),
                step: name,
                errno,
            },
            _ => MountCompatError::Sys(errno),
        }
    }
}

fn code(step: u32, idx: usize) -> u32 {
    (step << 16) | (idx as u32 & 0xffff)
}

/// The pid of `pid` in its own PID namespace (the last NSpid field of
/// proc_pid_status(5)); `None` when it cannot be read.
pub fn ns_pid(pid: nix::unistd::Pid) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// Resolves masked path `p` in the helper's root as the container's init resolves it
/// (runc opens each masked path with O_PATH in its init, after pivot_root, so a
/// symlink is followed inside the container: `/proc/net -> self/net` masks
/// `/proc/<init>/net`). The helper is not in the container's PID namespace, where
/// procfs has no `self` for it, so `self` and `thread-self` of a procfs `/proc` are
/// taken as `init` (the init's pid there). More than 40 links: `p` as written.
fn resolve_as_init(p: &Path, init: Option<u32>) -> PathBuf {
    let proc_is_procfs = || {
        nix::sys::statfs::statfs("/proc")
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
    };
    let comps = |p: &Path| -> Vec<std::ffi::OsString> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_os_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .rev()
            .collect()
    };
    let mut pending = comps(p);
    let mut out = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = pending.pop() {
        if c == ".." {
            out.pop();
            continue;
        }
        if let Some(pid) = init
            && (c == "self" || c == "thread-self")
            && out == Path::new("/proc")
            && proc_is_procfs()
        {
            out.push(pid.to_string());
            if c == "thread-self" {
                out.push("task");
                out.push(pid.to_string());
            }
            continue;
        }
        let next = out.join(&c);
        match std::fs::read_link(&next) {
            Ok(target) => {
                links += 1;
                if links > 40 {
                    return p.to_path_buf();
                }
                if target.is_absolute() {
                    out = PathBuf::from("/");
                }
                pending.extend(comps(&target));
            }
            Err(_) => out = next,
        }
    }
    out
}

/// The helper's work, in the container's mount namespace and chrooted in its root
/// (module doc; run by [`super::post_build`]); `init` is the container init's pid in
/// its PID namespace ([`ns_pid`]). Errors: (step << 16 | index, errno), for
/// [`Plan::error`].
pub fn in_container(plan: &Plan, init: Option<u32>) -> Result<(), (u32, nix::Error)> {
    use nix::mount::{MsFlags, mount};
    for (i, dest) in plan.tmpcopyup.iter().enumerate() {
        copy_up(Path::new(dest)).map_err(|e| (code(1, i), e))?;
    }
    for (i, c) in plan.attrs.iter().enumerate() {
        // `atime`: the atime field cleared is MOUNT_ATTR_RELATIME (0), the default
        let clr = if c.atime {
            c.clear | ATTR_ATIME_MASK
        } else {
            c.clear
        };
        crate::sys::mountapi::set_attr_at(Path::new(&c.destination), c.set, clr)
            .map_err(|e| (code(2, i), e))?;
    }
    for (i, written) in plan.readonly.iter().enumerate() {
        let p = resolve_as_init(Path::new(written), init);
        match mount(
            Some(p.as_path()),
            &p,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        ) {
            Err(nix::Error::ENOENT) => continue, // runc skips what does not exist
            r => r.map_err(|e| (code(8, i), e))?,
        }
        let keep = nix::sys::statvfs::statvfs(&p)
            .map(|s| {
                use nix::sys::statvfs::FsFlags;
                let f = s.flags();
                let mut m = MsFlags::empty();
                for (st, ms) in [
                    (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
                    (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
                    (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
                ] {
                    if f.contains(st) {
                        m |= ms;
                    }
                }
                m
            })
            .map_err(|e| (code(9, i), e))?;
        let ro = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | keep;
        mount(None::<&str>, &p, None::<&str>, ro, None::<&str>).map_err(|e| (code(9, i), e))?;
    }
    if !plan.masks.is_empty() {
        let null = nix::sys::stat::stat("/dev/null").map_err(|e| (code(3, 0), e))?;
        let is_null = (null.st_mode & libc::S_IFMT) == libc::S_IFCHR
            && nix::sys::stat::major(null.st_rdev) == 1
            && nix::sys::stat::minor(null.st_rdev) == 3;
        let mut shared: Option<PathBuf> = None;
        for (i, written) in plan.masks.iter().enumerate() {
            let resolved = resolve_as_init(Path::new(written), init);
            let p = resolved.as_path();
            let md = match std::fs::metadata(p) {
                Ok(md) => md,
                Err(_) => continue, // runc skips what does not exist
            };
            if md.is_dir() {
                match &shared {
                    None => {
                        mount(
                            Some("tmpfs"),
                            p,
                            Some("tmpfs"),
                            MsFlags::MS_RDONLY,
                            None::<&str>,
                        )
                        .map_err(|e| (code(4, i), e))?;
                        shared = Some(resolved.clone());
                    }
                    Some(first) => mount(
                        Some(first.as_path()),
                        p,
                        None::<&str>,
                        MsFlags::MS_BIND,
                        None::<&str>,
                    )
                    .map_err(|e| (code(5, i), e))?,
                }
            } else {
                if !is_null {
                    return Err((code(3, i), nix::Error::ENODEV));
                }
                mount(
                    Some("/dev/null"),
                    p,
                    None::<&str>,
                    MsFlags::MS_BIND,
                    None::<&str>,
                )
                .map_err(|e| (code(7, i), e))?;
            }
        }
    }
    if plan.dev_read_only {
        crate::sys::mountapi::set_attr_at(Path::new("/dev"), ATTR_RDONLY, 0)
            .map_err(|e| (code(6, 0), e))?;
    }
    Ok(())
}

/// Copies what the tmpfs at `dest` covers into it: the covered directory is reached in
/// a non-recursive clone of the mount of `dest`'s parent, where no mount covers it.
fn copy_up(dest: &Path) -> Result<(), nix::Error> {
    let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
        return Err(nix::Error::EINVAL);
    };
    let tree = crate::sys::mountapi::clone_tree(parent, false)?;
    let src = open_dir(Some(tree.as_raw_fd()), Path::new(name))?;
    let dst = open_dir(None, dest)?;
    copy_dir(&src, &dst)
}

/// `openat(at, p, O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC)` as an owned fd (`None`: AT_FDCWD;
/// the last component of `p` must not be a symlink).
fn open_dir<P: ?Sized + nix::NixPath>(at: Option<RawFd>, p: &P) -> Result<OwnedFd, nix::Error> {
    use nix::fcntl::OFlag;
    let fd = nix::fcntl::openat(
        at,
        p,
        OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    // SAFETY: openat just returned this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Recursive copy from directory `src` into directory `dst`, keeping modes, owners and
/// the file types runc's copy-up keeps (directories, regular files, symlinks, device
/// nodes, fifos; sockets are skipped).
fn copy_dir(src: &OwnedFd, dst: &OwnedFd) -> Result<(), nix::Error> {
    use nix::fcntl::{AtFlags, OFlag};
    use nix::sys::stat::{FchmodatFlags, Mode, SFlag, fchmodat, fstatat, mknodat};
    use nix::unistd::{Gid, Uid};
    let (s, d) = (src.as_raw_fd(), dst.as_raw_fd());
    let dup = nix::unistd::dup(s)?;
    let mut dir = nix::dir::Dir::from_fd(dup)?;
    let names: Vec<CString> = dir
        .iter()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_owned())
        .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
        .collect();
    for name in names {
        let name = name.as_c_str();
        let st = fstatat(Some(s), name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
        let mode = Mode::from_bits_truncate(st.st_mode & 0o7777);
        let kind = st.st_mode & libc::S_IFMT;
        let (uid, gid) = (
            Some(Uid::from_raw(st.st_uid)),
            Some(Gid::from_raw(st.st_gid)),
        );
        let own = || nix::unistd::fchownat(Some(d), name, uid, gid, AtFlags::AT_SYMLINK_NOFOLLOW);
        let chmod = || fchmodat(Some(d), name, mode, FchmodatFlags::NoFollowSymlink);
        match kind {
            libc::S_IFDIR => {
                nix::sys::stat::mkdirat(Some(d), name, Mode::from_bits_truncate(0o700))?;
                let sub_src = open_dir(Some(s), name)?;
                let sub_dst = open_dir(Some(d), name)?;
                copy_dir(&sub_src, &sub_dst)?;
                own()?;
                nix::sys::stat::fchmod(sub_dst.as_raw_fd(), mode)?;
            }
            libc::S_IFREG => {
                let from = nix::fcntl::openat(
                    Some(s),
                    name,
                    OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    Mode::empty(),
                )?;
                // SAFETY: openat just returned this fd; nothing else owns it.
                let mut from = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(from) });
                let to = nix::fcntl::openat(
                    Some(d),
                    name,
                    OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
                    Mode::from_bits_truncate(0o600),
                )?;
                // SAFETY: as above.
                let mut to = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(to) });
                std::io::copy(&mut from, &mut to)
                    .map_err(|e| nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
                nix::unistd::fchown(to.as_raw_fd(), uid, gid)?;
                nix::sys::stat::fchmod(to.as_raw_fd(), mode)?;
            }
            libc::S_IFLNK => {
                let target = nix::fcntl::readlinkat(Some(s), name)?;
                nix::unistd::symlinkat(target.as_os_str(), Some(d), name)?;
                own()?;
            }
            libc::S_IFCHR | libc::S_IFBLK | libc::S_IFIFO => {
                mknodat(
                    Some(d),
                    name,
                    SFlag::from_bits_truncate(kind),
                    mode,
                    st.st_rdev,
                )?;
                own()?;
                // mknod applies the umask; the copy keeps the mode
                match chmod() {
                    Err(nix::Error::EOPNOTSUPP) => {}
                    r => r?,
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cleared_flags_take_the_last_of_each_pair() {
        assert_eq!(
            cleared_flags(&o(&["rbind", "rw", "suid", "dev", "exec"])),
            (ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV | ATTR_NOEXEC, false)
        );
        assert_eq!(cleared_flags(&o(&["rw", "ro", "nosuid"])), (0, false));
        assert_eq!(cleared_flags(&o(&["noatime", "atime"])), (0, true));
        assert_eq!(cleared_flags(&o(&["atime", "noatime"])), (0, false));
        assert_eq!(cleared_flags(&o(&["noatime", "relatime"])), (0, true));
        assert_eq!(cleared_flags(&o(&["relatime", "strictatime"])), (0, false));
        assert_eq!(cleared_flags(&o(&["rbind"])), (0, false));
        assert_eq!(
            cleared_flags(&o(&["nosymfollow", "symfollow"])),
            (ATTR_NOSYMFOLLOW, false)
        );
    }

    /// `nosymfollow` is taken out of what libcontainer sees (a tmpfs refused it) and
    /// set by in_container on any mount; `symfollow` clears a bind source's. Without a
    /// mount namespace of the container's own, `nosymfollow` is refused by name.
    #[test]
    fn nosymfollow_is_set_by_siloc() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let mounts = serde_json::json!([
            {"destination": "/t", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nosymfollow", "mode=755"]},
            {"destination": "/b", "type": "bind", "source": "/", "options": ["rbind", "symfollow"]},
            {"destination": "/n", "type": "bind", "source": "/",
             "options": ["rbind", "symfollow", "nosymfollow"]}
        ]);
        let mut s = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "linux": {"namespaces": [{"type": "mount"}]},
            "mounts": mounts.clone()
        }));
        let plan = prepare(&mut s, r, r).unwrap();
        let m = s.mounts().clone().unwrap();
        assert_eq!(m[0].options().clone().unwrap(), o(&["nosuid", "mode=755"]));
        assert_eq!(m[1].options().clone().unwrap(), o(&["rbind"]));
        let attrs: Vec<(&str, u64, u64)> = plan
            .attrs
            .iter()
            .map(|a| (a.destination.as_str(), a.set, a.clear))
            .collect();
        assert_eq!(
            attrs,
            [
                ("/t", ATTR_NOSYMFOLLOW, 0),
                ("/b", 0, ATTR_NOSYMFOLLOW),
                ("/n", ATTR_NOSYMFOLLOW, 0)
            ]
        );
        let mut shared = spec(serde_json::json!({"ociVersion": "1.0.2", "mounts": mounts}));
        let e = prepare(&mut shared, r, r).unwrap_err().to_string();
        assert_eq!(
            e,
            "mounts: /t: nosymfollow needs a mount namespace of the container's own \
             (linux.namespaces: \"mount\" without \"path\")"
        );
    }

    #[test]
    fn destinations_resolve_inside_the_rootfs() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("real/sub")).unwrap();
        std::os::unix::fs::symlink("/nonexistent/dir", r.join("dangling")).unwrap();
        std::os::unix::fs::symlink("../../../real", r.join("up")).unwrap();
        std::os::unix::fs::symlink("loop", r.join("loop")).unwrap();
        let res = |p: &str| resolve_in_root(r, Path::new(p), &[]);
        assert_eq!(res("/dangling"), Path::new("/nonexistent/dir"));
        assert_eq!(res("/up/sub"), Path::new("/real/sub"));
        assert_eq!(res("/real/./sub/"), Path::new("/real/sub"));
        assert_eq!(res("/missing/x"), Path::new("/missing/x"));
        assert_eq!(res("/loop"), Path::new("/loop"));
        // under an earlier mount the rootfs's symlink is hidden
        std::fs::create_dir(r.join("dev")).unwrap();
        std::os::unix::fs::symlink("/run/shm", r.join("dev/shm")).unwrap();
        assert_eq!(res("/dev/shm"), Path::new("/run/shm"));
        let covered = [Covered {
            dest: PathBuf::from("/dev"),
            bind_source: None,
            has_content: false,
        }];
        assert_eq!(
            resolve_in_root(r, Path::new("/dev/shm"), &covered),
            Path::new("/dev/shm")
        );
    }

    #[test]
    fn below_an_earlier_bind_its_sources_symlinks_are_followed() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().join("rootfs");
        let vol = d.path().join("vol");
        std::fs::create_dir_all(r.join("vol")).unwrap();
        std::fs::create_dir_all(r.join("proc")).unwrap();
        std::fs::create_dir_all(vol.join("sub")).unwrap();
        std::os::unix::fs::symlink("/proc/self", vol.join("link")).unwrap();
        std::os::unix::fs::symlink("sub", vol.join("rel")).unwrap();
        // the rootfs's own /vol/link (hidden by the bind) is not what counts
        std::os::unix::fs::symlink("/elsewhere", r.join("vol/rel")).unwrap();
        let covered = [
            Covered {
                dest: PathBuf::from("/proc"),
                bind_source: None,
                has_content: false,
            },
            Covered {
                dest: PathBuf::from("/vol"),
                bind_source: Some(vol.clone()),
                has_content: false,
            },
        ];
        let res = |p: &str| resolve_in_root(&r, Path::new(p), &covered);
        assert_eq!(res("/vol/link/attr"), Path::new("/proc/self/attr"));
        assert_eq!(res("/vol/rel/x"), Path::new("/vol/sub/x"));
        assert_eq!(res("/vol/missing/x"), Path::new("/vol/missing/x"));
        // a later bind inside the first one covers it
        let mut nested = covered.to_vec();
        nested.push(Covered {
            dest: PathBuf::from("/vol/sub"),
            bind_source: Some(d.path().to_path_buf()),
            has_content: false,
        });
        assert_eq!(
            resolve_in_root(&r, Path::new("/vol/sub/vol/link"), &nested),
            Path::new("/proc/self")
        );
    }

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn prepare_edits_what_libcontainer_gets() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("t700")).unwrap();
        std::fs::set_permissions(r.join("t700"), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink("/tmp", r.join("proc")).unwrap();
        let mut s = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "linux": {"namespaces": [{"type": "mount"}],
                      "maskedPaths": ["/a", "/b", "/a"],
                      "readonlyPaths": ["/proc/sys", "/proc/bus"]},
            "mounts": [
                {"destination": "/t700", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "tmpcopyup"]},
                {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "ro"]},
                {"destination": "/m", "type": "bind", "source": "/", "options": ["rbind", "rw"]}
            ]
        }));
        let plan = prepare(&mut s, r, r).unwrap();
        let m = s.mounts().clone().unwrap();
        assert_eq!(m[0].options().clone().unwrap(), o(&["nosuid", "mode=0700"]));
        assert_eq!(plan.tmpcopyup, ["/t700"]);
        assert!(plan.dev_read_only);
        assert_eq!(plan.masks, ["/a", "/b"]);
        assert!(s.linux().as_ref().unwrap().masked_paths().is_none());
        assert_eq!(plan.readonly, ["/proc/sys", "/proc/bus"]);
        assert!(s.linux().as_ref().unwrap().readonly_paths().is_none());
        assert_eq!(plan.attrs[0].destination, "/m");
        assert_eq!(plan.attrs[0].clear, ATTR_RDONLY);

        let mut p = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}]
        }));
        let e = prepare(&mut p, r, r).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "error mounting \"proc\" to rootfs at \"/proc\": filesystem \"proc\" must be \
                 mounted on ordinary directory"
            ),
            "{e}"
        );
    }

    #[test]
    fn without_a_mount_namespace_masks_and_read_only_paths_stay_with_libcontainer() {
        let d = tempfile::tempdir().unwrap();
        let mut s = spec(serde_json::json!({
            "ociVersion": "1.0.2",
            "linux": {"maskedPaths": ["/a", "/a"], "readonlyPaths": ["/proc/sys"]},
            "mounts": [{"destination": "/m", "type": "bind", "source": "/", "options": ["rw"]}]
        }));
        let plan = prepare(&mut s, d.path(), d.path()).unwrap();
        assert!(plan.is_empty());
        assert_eq!(
            s.linux().as_ref().unwrap().masked_paths().clone().unwrap(),
            ["/a"]
        );
        assert_eq!(
            s.linux()
                .as_ref()
                .unwrap()
                .readonly_paths()
                .clone()
                .unwrap(),
            ["/proc/sys"]
        );
    }
}
