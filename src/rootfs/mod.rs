//! Rootfs assembly with exactly one attached mount (DESIGN.md item 2).
//!
//! Layers: per filesystem, one detached clone of the layers' common parent
//! (`open_tree(OPEN_TREE_CLONE)`), idmapped once (`mount_setattr(MOUNT_ATTR_IDMAP)`) when
//! the container has a user namespace; overlayfs built from fds into those trees
//! (`fsconfig("lowerdir+", fd)`, Linux 6.8+) and attached once at `root.path`
//! (`move_mount`). Kernels without `lowerdir+` get `mount(2)` with `/proc/self/fd/N`
//! paths into the same detached trees, run in a helper's private mount namespace
//! because overlayfs before 6.15 refuses layers in detached trees (`private_ns`). Kernel facts (checked on 6.18): overlayfs
//! itself cannot be idmapped (EINVAL); upper/work on an idmapped mount fail with
//! EOVERFLOW, so they stay plain directories owned by the container's host root ID.
//!
//! Plain directory rootfs under a user namespace: one idmapped clone of the directory
//! attached on top of itself.

pub(crate) mod creator_ns;
mod private_ns;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::mount::{MntFlags, umount2};
use nix::sys::stat::Mode;

use crate::sys::mountapi;
use crate::sys::mountinfo::{self, Mount};

/// overlayfs' limit on lower layers (`OVL_MAX_STACK`, fs/overlayfs/params.h).
pub(crate) const MAX_LAYERS: usize = 500;
/// `mount(2)` copies at most one page of options; the kernel cuts at 4095 bytes.
const LEGACY_OPTIONS_MAX: usize = 4095;
/// Set to `1` to take the pre-6.8 path (mount(2) with /proc/self/fd paths) even where
/// `lowerdir+` works; the test suite uses it to cover the fallback on new kernels.
const FORCE_LEGACY_ENV: &str = "SILOC_OVERLAY_LEGACY";

/// Errors while assembling or removing a rootfs; each names the path involved.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    #[error("rootfs layer {path}: {msg}")]
    Layer { path: PathBuf, msg: String },
    #[error("rootfs layers: {0} layers given, overlayfs takes at most {MAX_LAYERS}")]
    TooManyLayers(usize),
    #[error(
        "rootfs layers: {count} layers need {len} bytes of mount options, past the kernel's \
         {LEGACY_OPTIONS_MAX}-byte limit for mount(2); this kernel lacks overlayfs \
         lowerdir+ (Linux 6.8+), which has no such limit"
    )]
    LegacyOptionsTooLong { count: usize, len: usize },
    #[error(
        "{path}: this filesystem cannot be idmapped (mount_setattr MOUNT_ATTR_IDMAP: {errno}); \
         siloc never falls back to chown: give it layers and idmapped volumes on a \
         filesystem that can be (ext4, xfs, btrfs; tmpfs since Linux 6.3)"
    )]
    NotIdmappable { path: PathBuf, errno: Errno },
    #[error(
        "{path}: its mount ({mount}) is already idmapped, and the kernel does not idmap a \
         mount twice (mount_setattr MOUNT_ATTR_IDMAP: {errno}); give siloc a directory on a \
         mount that is not idmapped"
    )]
    AlreadyIdmapped {
        path: PathBuf,
        mount: PathBuf,
        errno: Errno,
    },
    #[error("{step} {path}: {errno}")]
    Sys {
        step: &'static str,
        path: PathBuf,
        errno: Errno,
    },
}

fn sys<'a>(step: &'static str, path: &'a Path) -> impl Fn(Errno) -> RootfsError + 'a {
    move |errno| RootfsError::Sys {
        step,
        path: path.to_path_buf(),
        errno,
    }
}

/// What one overlay assembly did, for logs and the benchmark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssemblyReport {
    /// Detached trees cloned (one per filesystem holding layers).
    pub(crate) trees: usize,
    /// `mount_setattr(MOUNT_ATTR_IDMAP)` calls made (0 without a user namespace).
    pub(crate) idmaps: usize,
    /// Mounts attached to the mount table: always 1.
    pub(crate) attached: usize,
    /// Whether the pre-6.8 `mount(2)` path was used.
    pub(crate) legacy: bool,
}

/// A checked lower layer: its canonical path and the filesystem (st_dev) it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub(crate) path: PathBuf,
    pub(crate) dev: u64,
}

/// The overlay to build: lower layers base first (image-manifest order, checked by
/// [`check_layers`]), plain upper and work dirs on one filesystem, and the mount
/// source shown in mountinfo.
pub struct OverlaySpec<'a> {
    pub layers: &'a [Layer],
    pub upper: &'a Path,
    pub work: &'a Path,
    /// mountinfo `source` of the overlay, e.g. `siloc-<id>`; lets delete find it.
    pub source: &'a str,
}

/// Checks layer paths before anything is created: absolute, existing directories,
/// at most [`MAX_LAYERS`]. Four system calls a layer (open O_PATH, fstat, readlink of
/// the fd for the canonical path, close), where `canonicalize` takes one per path
/// component: layers are many and deep. Errors: [`RootfsError::Layer`].
pub fn check_layers(layers: &[PathBuf]) -> Result<Vec<Layer>, RootfsError> {
    if layers.len() > MAX_LAYERS {
        return Err(RootfsError::TooManyLayers(layers.len()));
    }
    let layer_err = |path: &Path, msg: String| RootfsError::Layer {
        path: path.to_path_buf(),
        msg,
    };
    layers
        .iter()
        .map(|l| {
            if !l.is_absolute() {
                return Err(layer_err(l, "must be an absolute path".into()));
            }
            let fd = nix::fcntl::open(
                l.as_path(),
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| match e {
                Errno::ENOTDIR => layer_err(l, "is not a directory".into()),
                e => layer_err(l, std::io::Error::from(e).to_string()),
            })?;
            // SAFETY: open returned a new fd that nothing else owns.
            let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
            let st = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd))
                .map_err(|e| layer_err(l, e.to_string()))?;
            let path = std::fs::read_link(format!(
                "/proc/self/fd/{}",
                std::os::fd::AsRawFd::as_raw_fd(&fd)
            ))
            .map_err(|e| layer_err(l, e.to_string()))?;
            Ok(Layer {
                path,
                dev: st.st_dev,
            })
        })
        .collect::<Result<Vec<Layer>, RootfsError>>()
        .and_then(|checked| {
            check_apart(&checked)?;
            Ok(checked)
        })
}

/// Refuses a layer listed twice or inside another one: overlayfs fails those with
/// ELOOP ("overlapping layers"), which says nothing of the cause. Sorted
/// component-wise, a directory's descendants follow it directly, so neighbours tell.
fn check_apart(layers: &[Layer]) -> Result<(), RootfsError> {
    let mut sorted: Vec<&Path> = layers.iter().map(|l| l.path.as_path()).collect();
    sorted.sort();
    for w in sorted.windows(2) {
        let msg = if w[0] == w[1] {
            format!("listed twice in {}", crate::annotations::ROOTFS_LAYERS)
        } else if w[1].starts_with(w[0]) {
            format!(
                "inside layer {}: overlayfs refuses overlapping layers",
                w[0].display()
            )
        } else {
            continue;
        };
        return Err(RootfsError::Layer {
            path: w[1].to_path_buf(),
            msg,
        });
    }
    Ok(())
}

/// The deepest directory containing all `paths` (component-wise).
fn common_parent(paths: &[&Path]) -> PathBuf {
    let mut common: Vec<&OsStr> = paths[0].iter().collect();
    for p in &paths[1..] {
        let n = common
            .iter()
            .zip(p.iter())
            .take_while(|(a, b)| *a == b)
            .count();
        common.truncate(n);
    }
    // A single layer's parent keeps the tree rooted above the layer itself.
    if paths.len() == 1 && common.len() > 1 {
        common.pop();
    }
    common.iter().collect()
}

/// One detached tree per filesystem and an fd for each layer inside those trees, in
/// the caller's order. The trees must stay open while the fds are used.
struct LayerFds {
    trees: Vec<OwnedFd>,
    fds: Vec<OwnedFd>,
    idmaps: usize,
}

fn open_layers(layers: &[Layer], userns: Option<BorrowedFd<'_>>) -> Result<LayerFds, RootfsError> {
    let mut by_dev: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, l) in layers.iter().enumerate() {
        by_dev.entry(l.dev).or_default().push(i);
    }
    let mut trees = Vec::new();
    let mut slots: Vec<Option<OwnedFd>> = (0..layers.len()).map(|_| None).collect();
    let mut idmaps = 0;
    for (dev, idx) in by_dev {
        let paths: Vec<&Path> = idx.iter().map(|&i| layers[i].path.as_path()).collect();
        let mut parent = common_parent(&paths);
        // The parent must be on the layers' filesystem, or the clone would not hold them.
        if std::fs::metadata(&parent).map(|m| m.dev()).ok() != Some(dev) {
            parent = layers[idx[0]].path.clone();
            if idx.len() > 1 {
                // Layers that share a device but not a mount: one tree per layer.
                for &i in &idx {
                    let p = layers[i].path.as_path();
                    let (t, f, n) = tree_for(p, &[p], userns)?;
                    trees.push(t);
                    idmaps += n;
                    slots[i] = f.into_iter().next();
                }
                continue;
            }
        }
        let (t, fds, n) = tree_for(&parent, &paths, userns)?;
        idmaps += n;
        trees.push(t);
        for (i, fd) in idx.into_iter().zip(fds) {
            slots[i] = Some(fd);
        }
    }
    Ok(LayerFds {
        trees,
        fds: slots.into_iter().flatten().collect(),
        idmaps,
    })
}

/// Clones `root` detached, idmaps it when `userns` is given, and opens each path in it.
fn tree_for(
    root: &Path,
    paths: &[&Path],
    userns: Option<BorrowedFd<'_>>,
) -> Result<(OwnedFd, Vec<OwnedFd>, usize), RootfsError> {
    let tree = mountapi::clone_tree(root, false).map_err(sys("open_tree", root))?;
    let mut idmaps = 0;
    let mut attrs = mountapi::MOUNT_ATTR_RDONLY;
    if userns.is_some() {
        attrs |= mountapi::MOUNT_ATTR_IDMAP;
        idmaps = 1;
    }
    mountapi::set_attr(tree.as_fd(), attrs, userns, false).map_err(|errno| match errno {
        Errno::EINVAL | Errno::EPERM if userns.is_some() => idmap_refused(root, errno),
        _ => RootfsError::Sys {
            step: "mount_setattr",
            path: root.to_path_buf(),
            errno,
        },
    })?;
    let mut fds = Vec::with_capacity(paths.len());
    for p in paths {
        let rel = p.strip_prefix(root).unwrap_or(Path::new(""));
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let fd = openat(
            Some(std::os::fd::AsRawFd::as_raw_fd(&tree)),
            rel,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::empty(),
        )
        .map_err(sys("open layer in detached tree", p))?;
        // SAFETY: openat returned a new fd that nothing else owns.
        fds.push(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) });
    }
    Ok((tree, fds, idmaps))
}

fn force_legacy() -> bool {
    std::env::var_os(FORCE_LEGACY_ENV).is_some_and(|v| v == "1")
}

/// Builds the overlay and attaches it at `target` (an existing empty directory).
/// `userns` (from [`userns_with_mapping`]) idmaps the lower layers.
///
/// Errors: [`RootfsError`]. On error nothing is attached.
pub fn mount_overlay(
    target: &Path,
    spec: &OverlaySpec<'_>,
    userns: Option<BorrowedFd<'_>>,
) -> Result<AssemblyReport, RootfsError> {
    let lfds = open_layers(spec.layers, userns)?;
    let mut report = AssemblyReport {
        trees: lfds.trees.len(),
        idmaps: lfds.idmaps,
        attached: 1,
        legacy: false,
    };
    if !force_legacy() {
        match overlay_by_fd(&lfds.fds, spec) {
            Ok(mnt) => {
                mountapi::move_mount_to(mnt.as_fd(), target).map_err(sys("move_mount", target))?;
                return Ok(report);
            }
            // The kernel has no "lowerdir+" (before 6.8) or refuses layers in detached
            // trees (before 6.15): take the mount(2) path.
            Err(Fallback::UseMountPath(why)) => {
                tracing::debug!("overlay by fd refused ({why}); using the mount(2) path");
            }
            Err(Fallback::Failed(e)) => return Err(e),
        }
    }
    report.legacy = true;
    overlay_legacy(target, &lfds, spec)?;
    Ok(report)
}

enum Fallback {
    UseMountPath(&'static str),
    Failed(RootfsError),
}

/// Whether `fsconfig(FSCONFIG_SET_FD, "lowerdir+")` failing with `errno` means "this
/// kernel cannot take layers by fd". Before 6.5 overlayfs used the legacy mount API,
/// and fsconfig refuses fd parameters for legacy filesystems with EOPNOTSUPP
/// (fs/fsopen.c; seen on Debian's 6.1); 6.5 to 6.7 parse the new API but know no
/// "lowerdir+" and answer EINVAL ("Unknown parameter"); some 6.8+ kernels refuse
/// O_PATH layer fds with EBADF (reported for 6.13; not checked here).
fn lacks_lowerdir_plus(errno: Errno) -> bool {
    matches!(errno, Errno::EINVAL | Errno::EOPNOTSUPP | Errno::EBADF)
}

fn overlay_by_fd(fds: &[OwnedFd], spec: &OverlaySpec<'_>) -> Result<OwnedFd, Fallback> {
    let fail = |step, path: &Path| {
        let path = path.to_path_buf();
        move |errno| Fallback::Failed(RootfsError::Sys { step, path, errno })
    };
    let ctx = mountapi::fs_open("overlay").map_err(fail("fsopen overlay", spec.upper))?;
    mountapi::fs_set_string(ctx.as_fd(), "source", spec.source)
        .map_err(fail("fsconfig source", spec.upper))?;
    // overlayfs lists the topmost lower layer first; images list the base first.
    for (n, fd) in fds.iter().rev().enumerate() {
        match mountapi::fs_set_fd(ctx.as_fd(), "lowerdir+", fd.as_fd()) {
            Ok(()) => {}
            Err(e) if lacks_lowerdir_plus(e) => {
                return Err(Fallback::UseMountPath(if n == 0 {
                    "no lowerdir+"
                } else {
                    "lowerdir+ refused a layer fd"
                }));
            }
            Err(e) => return Err(fail("fsconfig lowerdir+", spec.upper)(e)),
        }
    }
    mountapi::fs_set_string(ctx.as_fd(), "upperdir", &spec.upper.to_string_lossy())
        .map_err(fail("fsconfig upperdir", spec.upper))?;
    mountapi::fs_set_string(ctx.as_fd(), "workdir", &spec.work.to_string_lossy())
        .map_err(fail("fsconfig workdir", spec.work))?;
    // Before 6.15 overlayfs refuses lower layers in detached trees at create time
    // ("failed to clone lowerpath", EINVAL); the mount(2) path attaches them privately.
    mountapi::fs_create_mount(ctx.as_fd(), 0).map_err(|e| match e {
        Errno::EINVAL => Fallback::UseMountPath("detached layers refused"),
        e => fail("fsmount overlay", spec.upper)(e),
    })
}

/// The mount(2) option string for the pre-6.8 path, from the layers' raw fds (base
/// first). Errors past the 4095-byte limit.
fn legacy_options(fds: &[i32], spec: &OverlaySpec<'_>) -> Result<String, RootfsError> {
    let lower: Vec<String> = fds
        .iter()
        .rev()
        .map(|fd| format!("/proc/self/fd/{fd}"))
        .collect();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.join(":"),
        spec.upper.display(),
        spec.work.display()
    );
    if opts.len() > LEGACY_OPTIONS_MAX {
        return Err(RootfsError::LegacyOptionsTooLong {
            count: fds.len(),
            len: opts.len(),
        });
    }
    Ok(opts)
}

fn overlay_legacy(
    target: &Path,
    lfds: &LayerFds,
    spec: &OverlaySpec<'_>,
) -> Result<(), RootfsError> {
    let raw: Vec<i32> = lfds
        .fds
        .iter()
        .map(std::os::fd::AsRawFd::as_raw_fd)
        .collect();
    let opts = legacy_options(&raw, spec)?;
    let mnt = private_ns::overlay_mount(&lfds.trees, target, spec.source, &opts)?;
    mountapi::move_mount_to(mnt.as_fd(), target).map_err(sys("move_mount", target))
}

/// Attaches one idmapped clone of `dir` (recursively, with its submounts) on top of
/// `dir` itself, so files owned by host root appear owned by the container's root.
///
/// Errors: [`RootfsError::NotIdmappable`] when the filesystem refuses the idmap,
/// [`RootfsError::AlreadyIdmapped`] when `dir`'s mount carries one already.
pub fn mount_idmapped_bind(dir: &Path, userns: BorrowedFd<'_>) -> Result<(), RootfsError> {
    let tree = idmapped_clone(dir, userns, true, true)?;
    mountapi::move_mount_to(tree.as_fd(), dir).map_err(sys("move_mount", dir))
}

/// A detached clone of the mount at `source` (with its submounts when
/// `recursive_clone`), carrying the ID mapping of `userns` (on every mount of the
/// clone when `recursive_idmap`, else on its top mount only). Nothing is attached;
/// the fd is close-on-exec.
///
/// Errors: [`RootfsError::Sys`] (`open_tree`) naming `source`;
/// [`RootfsError::NotIdmappable`] or [`RootfsError::AlreadyIdmapped`] when the kernel
/// refuses the idmap.
pub(crate) fn idmapped_clone(
    source: &Path,
    userns: BorrowedFd<'_>,
    recursive_clone: bool,
    recursive_idmap: bool,
) -> Result<OwnedFd, RootfsError> {
    let tree = mountapi::clone_tree(source, recursive_clone).map_err(sys("open_tree", source))?;
    mountapi::set_attr(
        tree.as_fd(),
        mountapi::MOUNT_ATTR_IDMAP,
        Some(userns),
        recursive_idmap,
    )
    .map_err(|errno| idmap_refused(source, errno))?;
    Ok(tree)
}

/// The error for an idmap the kernel refused on a clone of `path`'s mount: the mount
/// is idmapped already (mountinfo shows `idmapped`; mount_setattr(2) refuses to change
/// an idmap with EPERM), or the filesystem cannot be idmapped at all.
fn idmap_refused(path: &Path, errno: Errno) -> RootfsError {
    let mounts = mountinfo::read(None).unwrap_or_default();
    match idmapped_at_or_below(&mounts, path) {
        Some(mount) => RootfsError::AlreadyIdmapped {
            path: path.to_path_buf(),
            mount,
            errno,
        },
        None => RootfsError::NotIdmappable {
            path: path.to_path_buf(),
            errno,
        },
    }
}

/// The mount point of an idmapped mount that holds `path` or lies below it (a
/// recursive clone takes submounts along).
fn idmapped_at_or_below(mounts: &[Mount], path: &Path) -> Option<PathBuf> {
    if let Some(m) = mountinfo::holder(mounts, path)
        && m.has_option("idmapped")
    {
        return Some(m.mount_point.clone());
    }
    mounts
        .iter()
        .find(|m| {
            m.mount_point.starts_with(path) && m.mount_point != path && m.has_option("idmapped")
        })
        .map(|m| m.mount_point.clone())
}

/// The topmost mount at `target` in this mount namespace, if any.
pub(crate) fn mount_at(target: &Path) -> Option<Mount> {
    mountinfo::read_at(target).ok()?.pop()
}

/// Detaches the mount at `target`: a plain unmount, lazily (MNT_DETACH) when busy.
/// Errors: the unmount fails for another reason than "not mounted".
pub(crate) fn unmount(target: &Path) -> Result<(), RootfsError> {
    match umount2(target, MntFlags::empty()) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => Ok(()),
        Err(Errno::EBUSY) => umount2(target, MntFlags::MNT_DETACH).map_err(sys("umount", target)),
        Err(e) => Err(sys("umount", target)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_parent_of_layers() {
        let a = Path::new("/var/lib/siloc/store/layers/aa/fs");
        let b = Path::new("/var/lib/siloc/store/layers/bb/fs");
        assert_eq!(
            common_parent(&[a, b]),
            PathBuf::from("/var/lib/siloc/store/layers")
        );
        assert_eq!(
            common_parent(&[a]),
            PathBuf::from("/var/lib/siloc/store/layers/aa")
        );
        assert_eq!(common_parent(&[a, Path::new("/srv/x")]), PathBuf::from("/"));
    }

    #[test]
    fn an_idmap_counts_where_it_holds_or_lies_below_the_path() {
        let mi = mountinfo::parse(
            "22 1 0:1 / / rw - ext4 /dev/vda rw\n\
             30 22 0:2 / /var/lib rw,idmapped - ext4 /dev/vdb rw\n\
             31 22 0:3 / /var rw - ext4 /dev/vdc rw\n\
             32 30 0:4 / /var/lib rw,nosuid - tmpfs t rw\n",
        );
        let h = mountinfo::holder(&mi, Path::new("/var/lib/x/rootfs")).unwrap();
        assert_eq!(h.mount_point, Path::new("/var/lib"));
        assert!(h.has_option("nosuid"));
        assert_eq!(
            mountinfo::holder(&mi, Path::new("/var/libx"))
                .unwrap()
                .mount_point,
            Path::new("/var")
        );
        // /var/lib is idmapped but covered by a tmpfs: only what holds or lies below
        // the path counts.
        assert_eq!(idmapped_at_or_below(&mi, Path::new("/var/lib/x")), None);
        assert_eq!(
            idmapped_at_or_below(&mi, Path::new("/var/lib")),
            None,
            "the top mount at /var/lib is the tmpfs"
        );
        let mut mi2 = mi.clone();
        mi2.extend(mountinfo::parse(
            "40 22 0:5 / /srv/rootfs/data rw,idmapped - ext4 /dev/vdd rw\n",
        ));
        assert_eq!(
            idmapped_at_or_below(&mi2, Path::new("/srv/rootfs")),
            Some(PathBuf::from("/srv/rootfs/data"))
        );
    }

    #[test]
    fn too_many_layers_is_refused_before_any_work() {
        let layers: Vec<PathBuf> = (0..501).map(|i| PathBuf::from(format!("/l{i}"))).collect();
        assert!(matches!(
            check_layers(&layers),
            Err(RootfsError::TooManyLayers(501))
        ));
    }

    #[test]
    fn old_kernels_answers_mean_no_lowerdir_plus() {
        assert!(lacks_lowerdir_plus(Errno::EOPNOTSUPP)); // < 6.5, legacy mount API
        assert!(lacks_lowerdir_plus(Errno::EINVAL)); // 6.5 .. 6.7
        assert!(lacks_lowerdir_plus(Errno::EBADF)); // O_PATH layer fds refused
        assert!(!lacks_lowerdir_plus(Errno::ENOENT));
        assert!(!lacks_lowerdir_plus(Errno::EPERM));
    }

    #[test]
    fn legacy_options_order_and_limit() {
        let spec = OverlaySpec {
            layers: &[],
            upper: Path::new("/u"),
            work: Path::new("/w"),
            source: "siloc-x",
        };
        assert_eq!(
            legacy_options(&[5, 6], &spec).unwrap(),
            "lowerdir=/proc/self/fd/6:/proc/self/fd/5,upperdir=/u,workdir=/w"
        );
        let many: Vec<i32> = (100..400).collect();
        assert!(matches!(
            legacy_options(&many, &spec),
            Err(RootfsError::LegacyOptionsTooLong { count: 300, .. })
        ));
    }

    #[test]
    fn relative_and_missing_layers_are_named() {
        let e = check_layers(&[PathBuf::from("rel/layer")]).unwrap_err();
        assert!(e.to_string().contains("rel/layer") && e.to_string().contains("absolute"));
        let e = check_layers(&[PathBuf::from("/nonexistent/layer")]).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/layer"));
    }
}
