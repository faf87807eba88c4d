//! The init process's working directory, made when the image lacks it, as runc does.
//!
//! runc creates a missing `process.cwd` inside the rootfs before the container starts
//! (mode 0755, as the container's root), so a Kubernetes `workingDir` or an image's
//! WORKDIR need not exist in the layers. libcontainer 0.7 only fails the chdir, with
//! "failed to unix syscall". siloc makes it after preparing the rootfs and before
//! libcontainer builds the container, so where the cwd lies under one of the spec's
//! mounts it is made in that mount's source when the mount is a bind (a Kubernetes
//! `workingDir` inside a volume), and left alone otherwise (a tmpfs does not exist
//! yet; libcontainer then fails the chdir as before).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat2, readlinkat};
use nix::sys::stat::{Mode, mkdirat};
use nix::unistd::{Gid, Uid, setfsgid, setfsuid};

/// Why the cwd could not be made; names the path in the container.
#[derive(Debug, thiserror::Error)]
#[error("process.cwd {cwd}: mkdir {at}: {errno}")]
pub struct CwdError {
    pub cwd: PathBuf,
    pub at: PathBuf,
    pub errno: Errno,
}

/// Where the missing parts of a cwd belong, from the spec's mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// In the rootfs (no mount covers the cwd).
    Rootfs,
    /// In the `source` of the bind mount at `dest`, at `rel` below it.
    Bind {
        dest: PathBuf,
        source: PathBuf,
        rel: PathBuf,
    },
    /// Under a mount siloc cannot reach before libcontainer makes it (tmpfs, proc, ...),
    /// at this destination: nothing is made.
    Elsewhere(PathBuf),
}

/// Which of `mounts` covers `cwd` (lexically clean): the last in spec order whose
/// destination holds it, as later mounts cover earlier ones. A read-only bind is left
/// alone (runc's mkdir fails there too). Relative bind sources are taken from
/// `bundle`, as runc does.
pub fn place(cwd: &Path, mounts: &[oci_spec::runtime::Mount], bundle: &Path) -> Place {
    // The last mount in spec order covers the ones before it (it is mounted later).
    let best = mounts
        .iter()
        .rfind(|m| m.destination() != Path::new("/") && cwd.starts_with(m.destination()));
    let Some(m) = best else {
        return Place::Rootfs;
    };
    let opts = m.options().clone().unwrap_or_default();
    let is_bind =
        m.typ().as_deref() == Some("bind") || opts.iter().any(|o| o == "bind" || o == "rbind");
    let read_only = opts.iter().any(|o| o == "ro");
    match (is_bind && !read_only, m.source()) {
        (true, Some(src)) => Place::Bind {
            dest: m.destination().clone(),
            source: bundle.join(src),
            rel: cwd
                .strip_prefix(m.destination())
                .unwrap_or(Path::new(""))
                .to_path_buf(),
        },
        _ => Place::Elsewhere(m.destination().clone()),
    }
}

/// Makes a missing `cwd` where it belongs ([`place`]): in `rootfs`, or in a bind
/// mount's source; under any other mount it does nothing. `owner` as for [`ensure`].
///
/// Errors: [`CwdError`], its path as the container sees it.
pub fn ensure_for_spec(
    cwd: &Path,
    mounts: &[oci_spec::runtime::Mount],
    bundle: &Path,
    rootfs: &Path,
    owner: (u32, u32),
) -> Result<(), CwdError> {
    let clean = crate::sys::paths::clean(cwd);
    let cwd = clean.as_path();
    match place(cwd, mounts, bundle) {
        Place::Rootfs => ensure(rootfs, cwd, owner, true),
        // A bind source is a host directory: the container's root holds no capability
        // over it, so siloc uses none either.
        Place::Bind { dest, source, rel } if source.is_dir() => {
            ensure(&source, &Path::new("/").join(&rel), owner, false).map_err(|e| CwdError {
                cwd: cwd.to_path_buf(),
                at: dest.join(e.at.strip_prefix("/").unwrap_or(&e.at)),
                errno: e.errno,
            })
        }
        Place::Bind { .. } => Ok(()),
        Place::Elsewhere(dest) => {
            tracing::debug!(
                ?cwd,
                ?dest,
                "process.cwd is under a mount siloc cannot reach yet"
            );
            Ok(())
        }
    }
}

/// Makes every missing directory of `cwd` (absolute, as the container sees it) under
/// `rootfs`, mode 0755, owned by `owner` (the host uid and gid of the container's
/// root; (0, 0) without a user namespace). Each part is resolved with openat2
/// RESOLVE_IN_ROOT, so the image's symlinks and `..` stay inside the rootfs, and made
/// with mkdirat in the directory that resolution returned. The directories are made
/// with that fsuid/fsgid rather than chowned: on an idmapped mount the kernel refuses a
/// creator whose IDs the mount does not map (EOVERFLOW), and the overlay's upper dir
/// takes the creator's IDs.
///
/// Must run while siloc is single-threaded (setfsuid is per thread).
///
/// Errors: [`CwdError`] with the first directory that could not be opened or made.
pub fn ensure(
    rootfs: &Path,
    cwd: &Path,
    owner: (u32, u32),
    with_caps: bool,
) -> Result<(), CwdError> {
    let fail = |at: &Path| {
        let (cwd, at) = (cwd.to_path_buf(), at.to_path_buf());
        move |errno| CwdError { cwd, at, errno }
    };
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let root = open(rootfs, flags, Mode::empty()).map_err(fail(Path::new("/")))?;
    // SAFETY: open returned a new fd that nothing else owns.
    let root = unsafe { OwnedFd::from_raw_fd(root) };
    let resolve = |rel: &Path| -> Result<OwnedFd, Errno> {
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_IN_ROOT);
        let fd = openat2(root.as_raw_fd(), rel, how)?;
        // SAFETY: openat2 returned a new fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    // The parts still to walk; a dangling symlink puts its target's parts in front,
    // as runc's secure join does, so the directories are made where it points.
    let mut todo: VecDeque<OsString> = parts(cwd);
    let mut rel = PathBuf::from(".");
    let mut parent = resolve(&rel).map_err(fail(Path::new("/")))?;
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        let next = rel.join(&name);
        let at = in_container(&next);
        match resolve(&next) {
            Ok(fd) => parent = fd,
            Err(Errno::ENOENT) if name != ".." => {
                let made = as_owner(owner, with_caps, || {
                    mkdirat(
                        Some(parent.as_raw_fd()),
                        name.as_os_str(),
                        Mode::from_bits_truncate(0o755),
                    )
                });
                match made {
                    Ok(()) => parent = resolve(&next).map_err(fail(&at))?,
                    Err(Errno::EEXIST) => {
                        let target = readlinkat(Some(parent.as_raw_fd()), name.as_os_str())
                            .map_err(fail(&at))?;
                        links += 1;
                        if links > MAX_SYMLINKS {
                            return Err(fail(&at)(Errno::ELOOP));
                        }
                        let target = PathBuf::from(target);
                        if target.is_absolute() {
                            rel = PathBuf::from(".");
                            parent = resolve(&rel).map_err(fail(&at))?;
                        }
                        for p in parts(&target).into_iter().rev() {
                            todo.push_front(p);
                        }
                        continue;
                    }
                    Err(e) => return Err(fail(&at)(e)),
                }
            }
            Err(e) => return Err(fail(&at)(e)),
        }
        rel = next;
    }
    Ok(())
}

/// Symlinks followed at most while walking one cwd (the kernel's own limit, 40).
const MAX_SYMLINKS: usize = 40;

/// The `Normal` and `..` parts of `p`, in order.
fn parts(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

/// `rel` (relative to the rootfs, starting with ".") as the container sees it.
fn in_container(rel: &Path) -> PathBuf {
    Path::new("/").join(rel.strip_prefix(".").unwrap_or(rel))
}

/// Runs `f` with this thread's fsuid/fsgid set to `owner`, then restores them. A
/// non-zero fsuid drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER from the
/// effective set (capabilities(7)); they are raised again from the permitted set, so
/// siloc may write where the container's root may (it holds them in its namespace),
/// e.g. in a directory of the image owned by user 1000. Setting fsuid 0 again restores
/// them by itself.
fn as_owner<T>(owner: (u32, u32), with_caps: bool, f: impl FnOnce() -> T) -> T {
    use caps::{CapSet, Capability};
    let old_gid = setfsgid(Gid::from_raw(owner.1));
    let old_uid = setfsuid(Uid::from_raw(owner.0));
    let raised = if with_caps {
        &[
            Capability::CAP_DAC_OVERRIDE,
            Capability::CAP_DAC_READ_SEARCH,
            Capability::CAP_FOWNER,
        ][..]
    } else {
        &[]
    };
    for c in raised {
        let _ = caps::raise(None, CapSet::Effective, *c);
    }
    let out = f();
    setfsuid(old_uid);
    setfsgid(old_gid);
    out
}

/// runc's error when the process's cwd is missing in the container, for an exec that
/// failed. Resolved with openat2 RESOLVE_IN_ROOT under `/proc/PID/root`, so the
/// container's own symlinks resolve inside its root. Only a missing path, a
/// non-directory or a symlink loop is reported (as `Some(message)`); anything else is
/// `None`. libcontainer 0.7 reports a failed chdir as a bare "failed to unix syscall".
pub fn exec_cwd_error(pid: i32, cwd: &Path) -> Option<String> {
    let root = format!("/proc/{pid}/root");
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let Ok(dir) = open(root.as_str(), flags, Mode::empty()) else {
        return None;
    };
    // SAFETY: open returned a new fd that nothing else owns.
    let dir = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(dir) };
    let rel = cwd.strip_prefix("/").unwrap_or(cwd);
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT);
    let why = match openat2(std::os::fd::AsRawFd::as_raw_fd(&dir), rel, how) {
        Ok(fd) => {
            let _ = nix::unistd::close(fd);
            return None;
        }
        Err(nix::errno::Errno::ENOENT) => "no such file or directory",
        Err(nix::errno::Errno::ENOTDIR) => "not a directory",
        Err(nix::errno::Errno::ELOOP) => "too many levels of symbolic links",
        Err(_) => return None,
    };
    Some(format!(
        "unable to start container process: chdir to cwd ({:?}) set in config.json failed: {why}",
        cwd.display().to_string()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(dest: &str, typ: &str, source: &str, options: &[&str]) -> oci_spec::runtime::Mount {
        oci_spec::runtime::MountBuilder::default()
            .destination(dest)
            .typ(typ)
            .source(source)
            .options(options.iter().map(|o| o.to_string()).collect::<Vec<_>>())
            .build()
            .unwrap()
    }

    #[test]
    fn the_deepest_mount_decides_where_a_cwd_is_made() {
        let mounts = [
            mount("/data", "bind", "/host/data", &["rbind"]),
            mount("/data/cache", "tmpfs", "tmpfs", &[]),
            mount("/rel", "none", "vol", &["bind"]),
            mount("/", "bind", "/elsewhere", &["rbind"]),
        ];
        let b = Path::new("/bundle");
        let at = |cwd: &str| place(Path::new(cwd), &mounts, b);
        assert_eq!(at("/app/work"), Place::Rootfs);
        assert_eq!(at("/datax"), Place::Rootfs);
        assert_eq!(
            at("/data/w/x"),
            Place::Bind {
                dest: "/data".into(),
                source: "/host/data".into(),
                rel: "w/x".into()
            }
        );
        assert_eq!(at("/data/cache/x"), Place::Elsewhere("/data/cache".into()));
        // A later mount covers an earlier one below it; a read-only bind is left alone.
        let later = [
            mount("/data/sub", "tmpfs", "tmpfs", &[]),
            mount("/data", "bind", "/host/data", &["rbind"]),
            mount("/ro", "bind", "/host/ro", &["rbind", "ro"]),
        ];
        assert!(matches!(
            place(Path::new("/data/sub/x"), &later, b),
            Place::Bind { .. }
        ));
        assert_eq!(
            place(Path::new("/ro/x"), &later, b),
            Place::Elsewhere("/ro".into())
        );
        assert_eq!(
            crate::sys::paths::clean(Path::new("/data/../etc/./x/")),
            Path::new("/etc/x")
        );
        assert_eq!(
            at("/rel/x"),
            Place::Bind {
                dest: "/rel".into(),
                source: "/bundle/vol".into(),
                rel: "x".into()
            }
        );
    }

    fn ensure_t(root: &Path, cwd: &Path, owner: (u32, u32)) -> Result<(), CwdError> {
        ensure(root, cwd, owner, true)
    }

    #[test]
    fn missing_parts_are_made_and_symlinks_stay_inside() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("rootfs");
        std::fs::create_dir_all(root.join("etc")).unwrap();
        // An absolute symlink in the image points at the image's /etc, not the host's.
        std::os::unix::fs::symlink("/etc", root.join("link")).unwrap();
        let me = (Uid::current().as_raw(), Gid::current().as_raw());
        ensure_t(&root, Path::new("/work/a/b"), me).unwrap();
        assert!(root.join("work/a/b").is_dir());
        ensure_t(&root, Path::new("/link/new"), me).unwrap();
        assert!(root.join("etc/new").is_dir());
        // A dangling symlink: its target is made, inside the rootfs.
        std::os::unix::fs::symlink("/srv/app", root.join("app")).unwrap();
        std::os::unix::fs::symlink("../etc/x", root.join("work/rel")).unwrap();
        ensure_t(&root, Path::new("/app/data"), me).unwrap();
        assert!(root.join("srv/app/data").is_dir());
        ensure_t(&root, Path::new("/work/rel/y"), me).unwrap();
        assert!(root.join("etc/x/y").is_dir());
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        let e = ensure_t(&root, Path::new("/loop/z"), me).unwrap_err();
        assert_eq!(e.errno, Errno::ELOOP);
        ensure_t(&root, Path::new("/../../up"), me).unwrap();
        assert!(root.join("up").is_dir() && !d.path().join("up").exists());
        ensure_t(&root, Path::new("/"), me).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        let e = ensure_t(&root, Path::new("/file/sub"), me).unwrap_err();
        assert_eq!(
            (e.at.as_path(), e.errno),
            (Path::new("/file"), Errno::ENOTDIR)
        );
    }
}
