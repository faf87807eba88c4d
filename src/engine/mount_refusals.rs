//! runc 1.1.5's refusals of a spec mount, checked before libcontainer builds the
//! container and worded as runc words them (rootfs_linux.go: `prepareBindMount`,
//! `checkProcMount`; each error wrapped as `error mounting "SRC" to rootfs at "DEST":`).
//!
//! - A bind mount whose source does not exist: runc `stat`s the source and fails with
//!   `stat /nonexistent: no such file or directory`. libcontainer fails too, but its
//!   init reports only "failed to prepare rootfs". A source that lies in the rootfs
//!   under an earlier mount is looked up through that mount when it is a bind
//!   ([`super::idmapped_mounts::resolve_source`]), and not checked when it is not
//!   (that mount's content does not exist yet). The check is one stat(2) per bind
//!   mount, as the host's root: a source the host's root cannot see fails in the
//!   container as well, whatever user namespace it has.
//! - A mount over `/proc` that is not procfs, or a mount inside `/proc` (runc's
//!   `checkProcMount`, the CVE-2019-16884 class: a bind of a directory the caller
//!   controls over `/proc` lets the container's process write its own
//!   `/proc/self/attr` files through it). A bind onto `/proc` itself is allowed when its
//!   source is a procfs (statfs(2)); inside `/proc` only the files lxcfs emulates are
//!   allowed ([`LXCFS_FILES`]). Checked for binds and for mount types other than
//!   `proc`, `sysfs`, `tmpfs`, `mqueue` and `cgroup`, as runc checks them; a
//!   non-bind's source is statfs'ed relative to the bundle (runc's working directory).
//!   libcontainer 0.7 has no such check: it ran the container with the host's
//!   directory over `/proc`.
//!
//! The destination compared is the one resolved in the rootfs
//! ([`super::mount_compat::resolve_in_root`]), as runc compares its securejoin'ed path:
//! a symlink to `/proc` in the image does not get around the rule.

use std::path::{Path, PathBuf};

use oci_spec::runtime::Mount;

/// The files inside `/proc` a mount may cover: those lxcfs emulates (runc 1.1.5's
/// `validProcMounts`).
pub const LXCFS_FILES: [&str; 10] = [
    "/proc/cpuinfo",
    "/proc/diskstats",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/swaps",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/slabinfo",
    "/proc/net/dev",
    "/proc/sys/kernel/ns_last_pid",
];

/// A refused mount, in runc's words: `src` and `destination` as the spec gives them
/// (a relative bind source joined to the bundle, as runc joins it), `why` runc's reason.
#[derive(Debug, thiserror::Error)]
#[error(
    "unable to start container process: error during container init: error mounting \
     {src:?} to rootfs at {destination:?}: {why}"
)]
pub struct MountRefusal {
    pub src: String,
    pub destination: String,
    pub why: String,
}

/// The mount types runc's `mountToRootfs` handles without `checkProcMount`.
const UNCHECKED_TYPES: [&str; 5] = ["proc", "sysfs", "tmpfs", "mqueue", "cgroup"];

/// Checks spec mount `mounts[index]` (`bind` whether it is a bind mount) whose
/// destination resolves to `resolved` in `rootfs` (a container path), `bundle` where
/// relative sources resolve. See the module doc.
///
/// Errors: [`MountRefusal`] with runc's reason.
pub fn check(
    mounts: &[Mount],
    index: usize,
    bind: bool,
    rootfs: &Path,
    bundle: &Path,
    resolved: &Path,
) -> Result<(), MountRefusal> {
    let Some(m) = mounts.get(index) else {
        return Ok(());
    };
    let given = m.source().clone().unwrap_or_default();
    let typ = m.typ().as_deref().unwrap_or_default();
    let shown = shown_source(m, bind, bundle);
    let refuse = |why: String| MountRefusal {
        src: shown.display().to_string(),
        destination: m.destination().display().to_string(),
        why,
    };
    if bind {
        // Under an earlier non-bind mount: its content does not exist yet.
        if let Ok(at) = super::idmapped_mounts::resolve_source(mounts, index, rootfs, bundle)
            && let Err(e) = std::fs::metadata(&at)
        {
            return Err(refuse(format!(
                "stat {}: {}",
                shown.display(),
                crate::sys::errno::go_io_text(&e)
            )));
        }
    } else if UNCHECKED_TYPES.contains(&typ) {
        return Ok(());
    }
    let host_dest = rootfs.join(resolved.strip_prefix("/").unwrap_or(resolved));
    match proc_rule(resolved) {
        ProcRule::Outside | ProcRule::LxcfsFile => Ok(()),
        ProcRule::Inside => Err(refuse(format!(
            "{:?} cannot be mounted because it is inside /proc",
            host_dest.display().to_string()
        ))),
        ProcRule::Over => {
            // runc: an empty source is what a restore passes; allowed.
            if given.as_os_str().is_empty() {
                return Ok(());
            }
            let at = if bind {
                shown.clone()
            } else {
                bundle.join(&given)
            };
            match nix::sys::statfs::statfs(&at) {
                Ok(s) if s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC => Ok(()),
                Ok(_) => Err(refuse(format!(
                    "{:?} cannot be mounted because it is not of type proc",
                    host_dest.display().to_string()
                ))),
                Err(e) => Err(refuse(format!(
                    "statfs {}: {}",
                    shown.display(),
                    crate::sys::errno::go_text(e)
                ))),
            }
        }
    }
}

/// Mount `m`'s source as runc's messages show it: a bind's relative source made
/// absolute against `bundle` (and cleaned), another type's as written.
pub fn shown_source(m: &Mount, bind: bool, bundle: &Path) -> PathBuf {
    let given = m.source().clone().unwrap_or_default();
    if bind {
        crate::sys::paths::clean(&bundle.join(&given))
    } else {
        given
    }
}

/// What [`check_made`] checks once libcontainer has made the spec's mounts: needed when
/// a checked mount's destination lies below an earlier mount with content from
/// elsewhere (a bind's source, an overlay, a block device's filesystem): a symlink there
/// is followed when libcontainer mounts, and [`check`] saw the path as written (not a
/// bind) or as the source was then (a bind's source can change in between; runc checks
/// at mount time).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ProcWatch {
    /// The host path of the rootfs, for runc's message.
    pub rootfs: String,
    /// Those mounts, as (source as runc shows it, destination as written).
    pub unverified: Vec<(String, String)>,
    /// The destinations inside `/proc` the spec's mounts resolved to and passed [`check`].
    pub allowed: Vec<PathBuf>,
}

/// Whether mount `m` (`bind` whether it is a bind mount) falls under runc's
/// `checkProcMount`: binds, and every type but [`UNCHECKED_TYPES`].
pub fn is_checked(m: &Mount, bind: bool) -> bool {
    bind || !UNCHECKED_TYPES.contains(&m.typ().as_deref().unwrap_or_default())
}

/// Checks the mounts libcontainer made (`made`: the container init's mount table, mount
/// points seen from its root) against runc's `checkProcMount` for the mounts `watch`
/// lists: nothing inside `/proc` but the destinations that passed [`check`], and only a
/// procfs at `/proc`. Runs before the container's process starts; the create then
/// fails and takes the mount namespace with it.
///
/// Errors: [`MountRefusal`] in runc's words, naming the mount point where the mount
/// landed (runc names the path it resolved).
pub fn check_made(
    made: &[crate::sys::mountinfo::Mount],
    watch: &ProcWatch,
) -> Result<(), MountRefusal> {
    if watch.unverified.is_empty() {
        return Ok(());
    }
    for m in made {
        let mp = &m.mount_point;
        let why = match proc_rule(mp) {
            ProcRule::Inside if !watch.allowed.contains(mp) => "is inside /proc",
            ProcRule::Over if m.fs_type != "proc" => "is not of type proc",
            _ => continue,
        };
        // The unverified mount that landed there: the one whose last component it has.
        let (src, destination) = watch
            .unverified
            .iter()
            .find(|(_, d)| Path::new(d).file_name() == mp.file_name())
            .unwrap_or(&watch.unverified[0])
            .clone();
        return Err(MountRefusal {
            src,
            destination,
            why: format!(
                "{:?} cannot be mounted because it {why}",
                format!("{}{}", watch.rootfs, mp.display())
            ),
        });
    }
    Ok(())
}

/// Where a (resolved, absolute) container destination lies relative to `/proc`.
#[derive(Debug, PartialEq, Eq)]
enum ProcRule {
    Outside,
    Over,
    Inside,
    LxcfsFile,
}

fn proc_rule(dest: &Path) -> ProcRule {
    let dest = crate::sys::paths::clean(&PathBuf::from("/").join(dest));
    if dest == Path::new("/proc") {
        ProcRule::Over
    } else if !dest.starts_with("/proc") {
        ProcRule::Outside
    } else if LXCFS_FILES.iter().any(|f| dest == Path::new(f)) {
        ProcRule::LxcfsFile
    } else {
        ProcRule::Inside
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::MountBuilder;

    fn mount(dest: &str, typ: &str, src: &str, opts: &[&str]) -> Mount {
        MountBuilder::default()
            .destination(dest)
            .typ(typ)
            .source(src)
            .options(opts.iter().map(|o| o.to_string()).collect::<Vec<_>>())
            .build()
            .unwrap()
    }

    #[test]
    fn made_mounts_inside_proc_are_refused_unless_they_passed() {
        let made = crate::sys::mountinfo::parse(
            "20 1 0:5 / / rw - ext4 /dev/vda rw\n\
             21 20 0:6 / /proc rw - proc proc rw\n\
             22 21 0:7 / /proc/cpuinfo rw - fuse lxcfs rw\n\
             23 20 0:8 / /vol ro - overlay overlay ro\n",
        );
        let mut watch = ProcWatch {
            rootfs: "/b/rootfs".into(),
            unverified: vec![("/h/x".into(), "/vol/link/attr".into())],
            allowed: Vec::new(),
        };
        assert!(check_made(&made, &watch).is_ok());
        let mut landed = made.clone();
        landed.extend(crate::sys::mountinfo::parse(
            "24 21 0:5 /h/x /proc/1/attr rw - ext4 /dev/vda rw\n",
        ));
        let e = check_made(&landed, &watch).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "error mounting \"/h/x\" to rootfs at \"/vol/link/attr\": \
                 \"/b/rootfs/proc/1/attr\" cannot be mounted because it is inside /proc"
            ),
            "{e}"
        );
        // a destination the spec gave (and check passed) is fine
        watch.allowed.push(PathBuf::from("/proc/1/attr"));
        assert!(check_made(&landed, &watch).is_ok());
        // something else over /proc
        let mut over = made.clone();
        over.extend(crate::sys::mountinfo::parse(
            "25 21 0:5 /h/x /proc rw - ext4 /dev/vda rw\n",
        ));
        let e = check_made(&over, &watch).unwrap_err().to_string();
        assert!(
            e.contains("cannot be mounted because it is not of type proc"),
            "{e}"
        );
        // nothing unverified: nothing to check
        assert!(check_made(&over, &ProcWatch::default()).is_ok());
    }

    #[test]
    fn proc_rule_follows_runc() {
        assert_eq!(proc_rule(Path::new("/proc")), ProcRule::Over);
        assert_eq!(proc_rule(Path::new("/proc/")), ProcRule::Over);
        assert_eq!(proc_rule(Path::new("/proc/x")), ProcRule::Inside);
        assert_eq!(proc_rule(Path::new("/proc/net/dev")), ProcRule::LxcfsFile);
        assert_eq!(proc_rule(Path::new("/proc/net")), ProcRule::Inside);
        assert_eq!(proc_rule(Path::new("/procx")), ProcRule::Outside);
        assert_eq!(proc_rule(Path::new("/sys/x")), ProcRule::Outside);
    }

    #[test]
    fn missing_bind_source_is_runcs_stat_error() {
        let dir = tempfile::tempdir().unwrap();
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir(&rootfs).unwrap();
        let ms = [mount("/x", "bind", "/nonexistent-src", &["rbind"])];
        let e = check(&ms, 0, true, &rootfs, dir.path(), Path::new("/x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unable to start container process: error during container init: error \
             mounting \"/nonexistent-src\" to rootfs at \"/x\": stat /nonexistent-src: no \
             such file or directory"
        );
        // relative: joined to the bundle, as runc shows it
        let ms = [mount("/x", "none", "data", &["bind"])];
        let e = check(&ms, 0, true, &rootfs, dir.path(), Path::new("/x")).unwrap_err();
        assert!(
            e.to_string().contains(&format!(
                "error mounting \"{0}/data\" to rootfs at \"/x\": stat {0}/data:",
                dir.path().display()
            )),
            "{e}"
        );
    }

    #[test]
    fn source_under_an_earlier_tmpfs_is_not_checked() {
        let dir = tempfile::tempdir().unwrap();
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir(&rootfs).unwrap();
        let inner = rootfs.join("t/sub");
        let ms = [
            mount("/t", "tmpfs", "tmpfs", &[]),
            mount("/y", "bind", inner.to_str().unwrap(), &["rbind"]),
        ];
        check(&ms, 1, true, &rootfs, dir.path(), Path::new("/y")).unwrap();
    }

    #[test]
    fn proc_gets_procfs_only() {
        let dir = tempfile::tempdir().unwrap();
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir(&rootfs).unwrap();
        let ms = [mount("/proc", "bind", "/tmp", &["rbind"])];
        let e = check(&ms, 0, true, &rootfs, dir.path(), Path::new("/proc")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "unable to start container process: error during container init: error \
                 mounting \"/tmp\" to rootfs at \"/proc\": \"{}/proc\" cannot be mounted \
                 because it is not of type proc",
                rootfs.display()
            )
        );
        let ms = [mount("/proc", "bind", "/proc", &["rbind"])];
        check(&ms, 0, true, &rootfs, dir.path(), Path::new("/proc")).unwrap();
        // a symlink in the image resolved to /proc is checked as /proc
        let ms = [mount("/p", "bind", "/tmp", &["rbind"])];
        assert!(check(&ms, 0, true, &rootfs, dir.path(), Path::new("/proc")).is_err());
        let ms = [mount("/proc/x", "bind", "/tmp", &["rbind"])];
        let e = check(&ms, 0, true, &rootfs, dir.path(), Path::new("/proc/x")).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("/proc/x\" cannot be mounted because it is inside /proc"),
            "{e}"
        );
        let ms = [mount("/proc/cpuinfo", "bind", "/proc/cpuinfo", &["rbind"])];
        check(
            &ms,
            0,
            true,
            &rootfs,
            dir.path(),
            Path::new("/proc/cpuinfo"),
        )
        .unwrap();
        // another type: its source statfs'ed from the bundle
        let ms = [mount("/proc", "devpts", "devpts", &[])];
        let e = check(&ms, 0, false, &rootfs, dir.path(), Path::new("/proc")).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("to rootfs at \"/proc\": statfs devpts: no such file or directory"),
            "{e}"
        );
        // tmpfs is not checked, as in runc
        let ms = [mount("/proc", "tmpfs", "tmpfs", &[])];
        check(&ms, 0, false, &rootfs, dir.path(), Path::new("/proc")).unwrap();
    }
}
