//! Prepare: the side effects of a plan (ID range, writable dirs, the one rootfs
//! mount), each recorded before it acts, and their undo in reverse order. Then the
//! final spec that libcontainer receives.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::annotations as ann;
use crate::lifecycle::plan::{RootfsPlan, UpperPlan, UsernsPlan};
use crate::lifecycle::record::{Record, RootfsMount};
use crate::lifecycle::test_hooks;
use crate::rootfs::{self, OverlaySpec};
use crate::userns::idpool::IdPool;
use crate::userns::userns_with_mapping;

/// Errors while preparing; each names the path or setting involved.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    IdPool(#[from] crate::userns::idpool::IdPoolError),
    #[error(transparent)]
    Rootfs(#[from] crate::rootfs::RootfsError),
    #[error(transparent)]
    Userns(#[from] crate::userns::ns_fd::UsernsFdError),
    #[error(transparent)]
    Record(#[from] crate::lifecycle::record::RecordError),
    #[error(transparent)]
    Placement(#[from] crate::lifecycle::placement::PlacementError),
    #[error("root.path {path}: {msg}")]
    RootPath { path: PathBuf, msg: String },
    #[error(transparent)]
    Unreachable(#[from] Box<crate::userns::reach::Unreachable>),
    #[error("annotation {key}: {path}: {msg}")]
    Upper {
        key: &'static str,
        path: PathBuf,
        msg: String,
    },
    #[error(transparent)]
    Io(#[from] crate::sys::fs::IoAt),
    #[error("spec: {0}")]
    Spec(String),
    #[error(transparent)]
    OuterNs(#[from] crate::engine::outer_namespaces::OuterNsError),
}

/// Where prepare works: the state root (record), the data root and the host's ID pool.
pub struct Env<'a> {
    pub state_root: &'a Path,
    pub data_root: &'a Path,
    pub pool: &'a IdPool,
}

/// Carries out the plan in `rec`, saving `rec` before each step. On error the caller
/// runs [`undo`] with the same record.
pub fn apply(env: &Env<'_>, rec: &mut Record) -> Result<(), PrepareError> {
    check_not_mounted_overlay(rec)?;
    check_layers_over_unmounted_root(rec)?;
    // Devices, NUMA node and I/O policy first: only reads, so a refusal leaves nothing.
    let placement = crate::lifecycle::placement::place(
        &crate::lifecycle::placement::HostSources::system(),
        rec.target(),
        env.data_root,
    )?;
    if placement.is_some() {
        rec.prepared.placement = placement;
        rec.save(env.state_root)?;
    }
    // A persistent upper dir is checked before it can pick the ID range:
    // (as given, (resolved, work dir)).
    let persistent = match &rec.plan.rootfs {
        RootfsPlan::Overlay {
            upper: UpperPlan::Persistent(u),
            ..
        } => Some((u.clone(), persistent_dirs(env, &rec.id, u)?)),
        RootfsPlan::Overlay {
            upper: UpperPlan::Snapshot { upper, work },
            ..
        } => Some((upper.clone(), snapshot_dirs(env, &rec.id, upper, work)?)),
        _ => None,
    };
    if let UsernsPlan::Auto { size } = rec.plan.userns {
        // The pool table is this step's record: release by id is always safe.
        // A persistent upper dir is owned by the host root of the range that made it.
        let prefer = persistent
            .as_ref()
            .and_then(|(_, (u, _))| std::fs::metadata(u).ok())
            .map(|m| (m.uid(), m.gid()));
        let range = env.pool.allocate_preferring(&rec.id, size, prefer)?;
        rec.prepared.range = Some(range);
        rec.save(env.state_root)?;
        // Another range would show the upper dir's files as the overflow ID: refuse,
        // rather than hand the container someone else's files it cannot own.
        if let (Some(p), Some((u, _))) = (prefer, &persistent)
            && (range.uid, range.gid) != p
            && let Some(holder) = env.pool.holder_of(p.0, &rec.id)?
        {
            return Err(PrepareError::Upper {
                key: ann::ROOTFS_UPPER,
                path: u.clone(),
                msg: format!(
                    "belongs to host root {} of the ID range container {holder} holds; its \
                     files would not be this container's",
                    p.0
                ),
            });
        }
        test_hooks::crash_point("after-idpool");
    }
    if let UsernsPlan::FromSpec {
        uid,
        gid,
        join_path,
    } = &rec.plan.userns
    {
        // The spec's own mappings (containerd 2.1 and the kubelet for `hostUsers:
        // false` pods, podman --uidmap): held in the host pool while the container
        // lives, so no range siloc hands out overlaps them; refused when too wide or
        // overlapping another container's range (userns::idpool_spec). Released by undo.
        // A joined namespace gone since create's first check (a pod's sandbox that
        // stopped) gets that check's words, not an overlap with the sandbox's range.
        let joined = match join_path.as_deref() {
            None => None,
            Some(p) => Some(crate::sys::ns::id(p).map_err(|e| {
                crate::engine::outer_namespaces::unreachable_path(
                    oci_spec::runtime::LinuxNamespaceType::User,
                    p,
                    &e,
                )
            })?),
        };
        let owns =
            |root: &Path, id: &str| joined.is_some_and(|ns| holder_userns(root, id) == Some(ns));
        let owns: Option<crate::userns::idpool::JoinsHolder<'_>> = joined.map(|_| &owns as _);
        env.pool.hold_spec(&rec.id, uid, gid, owns)?;
        test_hooks::crash_point("after-idpool");
    }
    let maps = crate::userns::id_maps(&rec.plan.userns, rec.prepared.range);
    // libcontainer sets up the rootfs as the container's root: say which directory
    // it cannot search before anything else is made (the range is undone).
    if let Some(m) = &maps {
        crate::userns::reach::check(&rec.rootfs, crate::userns::host_root(&maps), m)?;
    }
    match rec.plan.rootfs.clone() {
        RootfsPlan::AsIs => {}
        RootfsPlan::IdmapBind => {
            let Some((uid, gid)) = &maps else {
                return Ok(());
            };
            let ns = userns_with_mapping(uid, gid)?;
            rec.prepared.mount = Some(RootfsMount::IdmapBind);
            rec.save(env.state_root)?;
            rootfs::creator_ns::enter(&rec.rootfs)?;
            rootfs::mount_idmapped_bind(&rec.rootfs, std::os::fd::AsFd::as_fd(&ns))?;
            test_hooks::crash_point("after-mount");
        }
        RootfsPlan::Overlay { layers, upper } => {
            // Check everything the caller can get wrong before creating anything.
            let layers = rootfs::check_layers(&layers)?;
            check_empty_dir(&rec.rootfs)?;
            let (upper_dir, work_dir) = writable_dirs(env, rec, persistent.as_ref())?;
            check_writable_apart(&upper_dir, &work_dir, &layers, &rec.rootfs, &upper)?;
            let owner = crate::userns::host_root(&maps);
            rec.save(env.state_root)?;
            for d in [&upper_dir, &work_dir] {
                make_owned_dir(d, owner)?;
            }
            test_hooks::crash_point("after-upper");
            let ns = match &maps {
                Some((u, g)) => Some(userns_with_mapping(u, g)?),
                None => None,
            };
            let source = format!("siloc-{}", rec.id);
            rec.prepared.mount = Some(RootfsMount::Overlay {
                source: source.clone(),
            });
            rec.save(env.state_root)?;
            rootfs::creator_ns::enter(&rec.rootfs)?;
            let report = rootfs::mount_overlay(
                &rec.rootfs,
                &OverlaySpec {
                    layers: &layers,
                    upper: &upper_dir,
                    work: &work_dir,
                    source: &source,
                },
                ns.as_ref().map(std::os::fd::AsFd::as_fd),
            )?;
            tracing::debug!(?report, id = rec.id, "rootfs assembled");
            rec.prepared.assembly = Some(format!(
                "overlay layers={} trees={} idmapped={} attached={} via={}",
                layers.len(),
                report.trees,
                if report.idmaps > 0 { "yes" } else { "no" },
                report.attached,
                if report.legacy {
                    "mount(2)"
                } else {
                    "lowerdir+"
                }
            ));
            rec.save(env.state_root)?;
            test_hooks::crash_point("after-mount");
        }
    }
    Ok(())
}

/// Chooses the upper and work dirs and records the ones siloc creates: the ephemeral
/// ones under the data root, or the `persistent` upper dir (as given, and as checked by
/// [`persistent_dirs`]) with its work dir.
fn writable_dirs(
    env: &Env<'_>,
    rec: &mut Record,
    persistent: Option<&(PathBuf, (PathBuf, PathBuf))>,
) -> Result<(PathBuf, PathBuf), PrepareError> {
    match persistent {
        None => {
            let base = env.data_root.join("containers").join(&rec.id);
            if base.exists() {
                return Err(PrepareError::Io(crate::sys::fs::IoAt {
                    path: base,
                    source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
                }));
            }
            rec.prepared.made_dirs.push(base.clone());
            Ok((base.join("upper"), base.join("work")))
        }
        Some((_, (u, work)))
            if matches!(
                rec.plan.rootfs,
                RootfsPlan::Overlay {
                    upper: UpperPlan::Snapshot { .. },
                    ..
                }
            ) =>
        {
            // The snapshotter's own pair: it made both and removes both.
            Ok((u.clone(), work.clone()))
        }
        Some((given, (u, work))) => {
            let bad = |msg: &str| PrepareError::Upper {
                key: ann::ROOTFS_UPPER,
                path: given.clone(),
                msg: msg.to_string(),
            };
            // Made exclusively: the work dir is the claim on the upper dir, so two
            // creates racing for one upper dir cannot both get it.
            if let Err(e) = std::fs::create_dir(work) {
                let msg = if e.kind() == std::io::ErrorKind::AlreadyExists {
                    format!(
                        "work dir {} exists: another container uses this upper dir, or one \
                         that crashed left it (remove it if none uses {})",
                        work.display(),
                        u.display()
                    )
                } else {
                    format!("work dir {}: {e}", work.display())
                };
                return Err(bad(&msg));
            }
            rec.prepared.made_dirs.push(work.clone());
            rec.save(env.state_root)?;
            Ok((u.clone(), work.clone()))
        }
    }
}

/// The persistent upper dir `given` with symlinks resolved (two spellings of one
/// directory are one upper dir) and its work dir `<upper>.work`, checked: the parent
/// exists, the upper is a directory if it exists, and both stay apart from siloc's
/// roots and other containers ([`crate::lifecycle::upper_guard`]). Creates nothing.
///
/// Errors: [`PrepareError::Upper`] naming the annotation and why.
fn persistent_dirs(
    env: &Env<'_>,
    id: &str,
    given: &Path,
) -> Result<(PathBuf, PathBuf), PrepareError> {
    let bad = |msg: &str| PrepareError::Upper {
        key: ann::ROOTFS_UPPER,
        path: given.to_path_buf(),
        msg: msg.to_string(),
    };
    let parent = given
        .parent()
        .ok_or_else(|| bad("has no parent directory"))?;
    if !parent.is_dir() {
        return Err(bad("its parent directory does not exist"));
    }
    let u = crate::sys::paths::canonical_to_be(given).map_err(crate::sys::fs::io_at(given))?;
    if u.exists() && !u.is_dir() {
        return Err(bad("exists and is not a directory"));
    }
    let mut work = u.clone().into_os_string();
    work.push(".work");
    let work = PathBuf::from(work);
    crate::lifecycle::upper_guard::check_apart(env.data_root, env.state_root, id, &u, &work)
        .map_err(|m| bad(&m))?;
    Ok((u, work))
}

/// The snapshotter's upper and work dirs (`io.siloc.rootfs.upper` and
/// `io.siloc.rootfs.work`) with symlinks resolved, checked: both exist as directories
/// and stay apart from siloc's roots and other containers
/// ([`crate::lifecycle::upper_guard`]). Creates nothing.
///
/// Errors: [`PrepareError::Upper`] naming the annotation and why.
fn snapshot_dirs(
    env: &Env<'_>,
    id: &str,
    upper: &Path,
    work: &Path,
) -> Result<(PathBuf, PathBuf), PrepareError> {
    let mut out = Vec::new();
    for (key, given) in [(ann::ROOTFS_UPPER, upper), (ann::ROOTFS_WORK, work)] {
        let bad = |msg: String| PrepareError::Upper {
            key,
            path: given.to_path_buf(),
            msg,
        };
        let c = std::fs::canonicalize(given).map_err(|e| bad(e.to_string()))?;
        if !c.is_dir() {
            return Err(bad("is not a directory".into()));
        }
        out.push(c);
    }
    let (u, w) = (out.remove(0), out.remove(0));
    crate::lifecycle::upper_guard::check_apart(env.data_root, env.state_root, id, &u, &w).map_err(
        |m| PrepareError::Upper {
            key: ann::ROOTFS_UPPER,
            path: upper.to_path_buf(),
            msg: m,
        },
    )?;
    Ok((u, w))
}

/// The user namespace of container `id`'s init (under state root `root`): the
/// namespace whose range that container holds in the ID pool.
fn holder_userns(root: &Path, id: &str) -> Option<(u64, u64)> {
    let pid = crate::engine::load_saved(root, id).ok()?.pid()?;
    crate::sys::ns::id(format!("/proc/{pid}/ns/user")).ok()
}

/// Refuses at once (before any ID range or mount) a user namespace for a root.path
/// that is already an overlayfs mount: containerd's runc shim (BinaryName = siloc) and
/// podman mount the image's layers there before siloc runs, and overlayfs cannot be
/// idmapped (mount_setattr MOUNT_ATTR_IDMAP fails with EINVAL), so an idmapped bind of
/// it cannot work. The way to a user namespace for a pod is siloc's own shim, which
/// hands siloc the layers unmounted. Rebuilding the overlay from mountinfo's lowerdirs
/// was not chosen: the upper dir would be used by two overlay mounts at once (the
/// kernel warns, or refuses with index=on), and exec, logs and restarts would see
/// two different mounts.
///
/// Errors: [`PrepareError::RootPath`] naming the mount, the annotation and the shim.
fn check_not_mounted_overlay(rec: &Record) -> Result<(), PrepareError> {
    if rec.plan.rootfs != RootfsPlan::IdmapBind {
        return Ok(());
    }
    match rootfs::mount_at(&rec.rootfs) {
        Some(m) if m.fs_type == "overlay" => Err(PrepareError::RootPath {
            path: rec.rootfs.clone(),
            msg: format!(
                "is already an overlay mount (source {:?}; containerd's runc shim or podman \
                 mounted the image's layers there), and overlayfs cannot be idmapped, so \
                 {}=auto cannot give this container a user namespace: run it through \
                 siloc's shim (containerd runtime_type \"io.containerd.siloc.v2\", binary \
                 containerd-shim-siloc-v2), which hands siloc the layers unmounted, \
                 name the layers with {}, or give the spec its own mappings (podman \
                 --uidmap 0:HOSTID:SIZE --gidmap 0:HOSTID:SIZE, Kubernetes hostUsers: \
                 false)",
                m.source,
                ann::USERNS,
                ann::ROOTFS_LAYERS
            ),
        }),
        _ => Ok(()),
    }
}

/// Refuses `io.siloc.rootfs.layers` (and so `io.siloc.rootfs.upper`) when root.path
/// is already a mount, before any ID range, directory or mount. siloc's shim strips
/// these annotations from every bundle and sets them itself with root.path left
/// unmounted; a root.path that is a mount means another shim (containerd's runc shim
/// with BinaryName = siloc, podman) mounted the image there and passed the pod's own
/// annotations through. Taken from a pod, they would name host directories as layers
/// or as the upper dir, which the container then reads and writes as host root.
///
/// Errors: [`PrepareError::RootPath`] naming the annotation, the mount and the shim.
fn check_layers_over_unmounted_root(rec: &Record) -> Result<(), PrepareError> {
    // One statx on the create path; the mount table only for the message.
    if !matches!(rec.plan.rootfs, RootfsPlan::Overlay { .. })
        || !rootfs::creator_ns::is_mount_root(&rec.rootfs)?
    {
        return Ok(());
    }
    let what = rootfs::mount_at(&rec.rootfs).map_or("a mount".to_string(), |m| {
        format!("a {} mount (source {:?})", m.fs_type, m.source)
    });
    Err(PrepareError::RootPath {
        path: rec.rootfs.clone(),
        msg: format!(
            "is already {what}, so annotation {} did not come from siloc's shim, the only \
             shim that sets it (it leaves root.path unmounted): refused, since a pod's own \
             annotation would name host directories as its layers; run the container \
             through containerd-shim-siloc-v2 (runtime_type \"io.containerd.siloc.v2\") or \
             drop the annotation",
            ann::ROOTFS_LAYERS
        ),
    })
}

/// Refuses upper and work dirs that are a layer, inside one or hold one: siloc chowns
/// them to the container's root and the container writes there, which would change
/// layers other containers share (overlayfs itself refuses only some of these). Also
/// refuses them inside root.path (or holding it): the rootfs is mounted over root.path,
/// so the container would write under its own rootfs and a kept upper dir would stay
/// hidden there.
fn check_writable_apart(
    upper: &Path,
    work: &Path,
    layers: &[rootfs::Layer],
    rootfs: &Path,
    plan: &UpperPlan,
) -> Result<(), PrepareError> {
    let overlaps = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    for dir in [upper, work] {
        let canon = crate::sys::paths::canonical_to_be(dir).map_err(crate::sys::fs::io_at(dir))?;
        let msg = if let Some(layer) = layers.iter().find(|l| overlaps(&canon, &l.path)) {
            format!(
                "overlaps rootfs layer {}: the writable dirs must be apart from every layer",
                layer.path.display()
            )
        } else if overlaps(&canon, rootfs) {
            format!(
                "overlaps root.path {}: the rootfs is mounted there, so the writable dirs \
                 must be outside it",
                rootfs.display()
            )
        } else {
            continue;
        };
        return Err(match plan {
            UpperPlan::Persistent(u) | UpperPlan::Snapshot { upper: u, .. } => {
                PrepareError::Upper {
                    key: ann::ROOTFS_UPPER,
                    path: u.clone(),
                    msg,
                }
            }
            UpperPlan::Ephemeral => PrepareError::Upper {
                key: ann::ROOTFS_LAYERS,
                path: dir.to_path_buf(),
                msg: format!("{msg} (this writable dir is under the config's data_root)"),
            },
        });
    }
    Ok(())
}

fn check_empty_dir(p: &Path) -> Result<(), PrepareError> {
    let bad = |msg: &str| PrepareError::RootPath {
        path: p.to_path_buf(),
        msg: msg.to_string(),
    };
    let mut entries = std::fs::read_dir(p).map_err(|e| bad(&e.to_string()))?;
    if entries.next().is_some() {
        return Err(bad(
            "must be an empty directory when io.siloc.rootfs.layers is given",
        ));
    }
    Ok(())
}

/// Creates `d` (and parents) if missing, mode 0755, owned by `owner` (container root).
fn make_owned_dir(d: &Path, owner: (u32, u32)) -> Result<(), PrepareError> {
    std::fs::create_dir_all(d).map_err(crate::sys::fs::io_at(d))?;
    // Through an fd opened without following a symlink at `d`: a symlink swapped in
    // after the checks must not make siloc chown or chmod its target.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(d)
        .map_err(crate::sys::fs::io_at(d))?;
    let meta = f.metadata().map_err(crate::sys::fs::io_at(d))?;
    if (meta.uid(), meta.gid()) != owner {
        std::os::unix::fs::fchown(&f, Some(owner.0), Some(owner.1))
            .map_err(crate::sys::fs::io_at(d))?;
    }
    f.set_permissions(std::fs::Permissions::from_mode(0o755))
        .map_err(crate::sys::fs::io_at(d))?;
    Ok(())
}

/// Undoes whatever `rec.prepared` says was (or may have been) done, in reverse order.
/// Idempotent: safe to run after a crash at any point, and twice. Returns the first
/// error after trying every step.
pub fn undo(env: &Env<'_>, rec: &Record) -> Result<(), PrepareError> {
    let mut first: Option<PrepareError> = None;
    let mut keep = |r: Result<(), PrepareError>| {
        if let Err(e) = r {
            tracing::warn!("cleanup: {e}");
            first.get_or_insert(e);
        }
    };
    let mut unmounted = true;
    if let Some(m) = &rec.prepared.mount {
        let ours = rootfs::mount_at(&rec.rootfs).is_some_and(|e| match m {
            RootfsMount::Overlay { source } => e.fs_type == "overlay" && &e.source == source,
            RootfsMount::IdmapBind => e.has_option("idmapped"),
        });
        if ours {
            let r = rootfs::unmount(&rec.rootfs).map_err(PrepareError::from);
            unmounted = r.is_ok();
            keep(r);
        }
    }
    // Never remove an upper dir that may still be mounted.
    if unmounted {
        for d in rec.prepared.made_dirs.iter().rev() {
            match std::fs::remove_dir_all(d) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => keep(Err(crate::sys::fs::io_at(d)(e).into())),
            }
        }
    }
    let held = match &rec.plan.userns {
        UsernsPlan::Auto { .. } => true,
        UsernsPlan::FromSpec { uid, gid, .. } => !uid.is_empty() || !gid.is_empty(),
        UsernsPlan::Host => false,
    };
    if held {
        keep(
            env.pool
                .release(&rec.id)
                .map(|_| ())
                .map_err(PrepareError::from),
        );
    }
    first.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owned_dir_is_never_reached_through_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let link = d.path().join("upper");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let before = std::fs::metadata(&target).unwrap();
        assert!(make_owned_dir(&link, (before.uid() + 1, before.gid() + 1)).is_err());
        let after = std::fs::metadata(&target).unwrap();
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        make_owned_dir(&d.path().join("new/dir"), (before.uid(), before.gid())).unwrap();
    }
}
