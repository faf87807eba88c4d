//! Idmapped bind mounts from the spec (runtime-spec 1.1 config.md "Mounts":
//! `uidMappings`/`gidMappings` and the `idmap`/`ridmap` options).
//!
//! libcontainer gap covered: libcontainer 0.7 refuses every mount that carries mappings
//! or one of these options (`idmapped mount is not supported`,
//! container/mount_validation.rs). Delete this module when libcontainer makes them.
//!
//! Second gap covered, with the same staging: in a container with a user namespace,
//! libcontainer resolves bind sources as the container's root, so a source below a
//! directory others cannot search (0700) fails with EACCES; runc opens such sources
//! before it joins the namespace. siloc stages a plain clone of them
//! ([`unreachable_by_others`]).
//!
//! How: before libcontainer builds the container, siloc (host root, in the host's user
//! namespace, so it reaches sources the container's root could not) makes each such
//! mount as a detached idmapped clone of its source ([`crate::rootfs::idmapped_clone`]:
//! `open_tree(OPEN_TREE_CLONE[|AT_RECURSIVE])`, `mount_setattr(MOUNT_ATTR_IDMAP
//! [|AT_RECURSIVE])`), attaches it at a staging point ([`staging_dir`]) inside
//! create's private mount namespace ([`crate::rootfs::creator_ns`]),
//! and hands libcontainer a plain bind mount of the staging point instead. A bind of an
//! idmapped mount keeps its ID mapping, so libcontainer places the mount where and when
//! the spec says (destination, order among the other mounts, `ro`, propagation). The
//! staging mounts exist only in create's private mount namespace and, until
//! `pivot_root` detaches the old root, in the container's copy of it; the clone fds are
//! closed before libcontainer starts, so none reaches the container.
//!
//! Mapping semantics (as runc 1.2+): the mount's `uidMappings` entry `containerID
//! hostID size` writes that line to the uid_map of the user namespace the mount is
//! idmapped with, so a file owned by `containerID` on disk appears owned by `hostID`.
//! Without mount mappings the container's own user namespace is used.
//!
//! Mount order: a source that lies in the rootfs under an earlier mount's destination
//! is resolved through that mount ([`resolve_source`]); through an earlier bind mount
//! this names the earlier mount's source, other earlier mounts (tmpfs, ...) cannot be
//! seen before the container exists and are refused by name. runc 1.2 resolves such a
//! source in the container's mount namespace at mount time; siloc matches it for binds.
//!
//! Known limit: the staging point's mount (that of /run) becomes a slave in
//! create's private mount namespace, so, as for the rootfs holder, `rshared` volumes
//! from that same host mount do not propagate container mounts back to the host.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxIdMapping, LinuxNamespaceType, Mount, Spec};

use crate::rootfs::{self, RootfsError};
use crate::userns::IdMap;

/// Errors while making the spec's idmapped mounts; each names the mount by its index
/// in `mounts` (`mounts[N]`), as the bundle checks do.
#[derive(Debug, thiserror::Error)]
pub enum IdmapMountError {
    #[error("mounts[{index}]: idmapped mounts are only supported for bind mounts")]
    NotBind { index: usize },
    #[error(
        "mounts[{index}]: uidMappings and gidMappings must both be given and non-empty \
         for an idmapped mount"
    )]
    Mappings { index: usize },
    #[error(
        "mounts[{index}]: idmap without uidMappings/gidMappings takes the container's \
         user namespace, and this container has none with mappings"
    )]
    NoUserns { index: usize },
    #[error(
        "mounts[{index}]: source {src} lies under mounts[{earlier}] ({typ} at {destination}), \
         which does not exist before the container does; give the source on the host"
    )]
    UnderEarlier {
        index: usize,
        src: PathBuf,
        earlier: usize,
        typ: String,
        destination: PathBuf,
    },
    #[error("mounts[{index}]: source {src}: {err}")]
    Source {
        index: usize,
        src: PathBuf,
        err: RootfsError,
    },
    #[error("mounts[{index}]: {err}")]
    Userns {
        index: usize,
        err: crate::userns::ns_fd::UsernsFdError,
    },
    #[error("mounts[{index}]: {what} {path}: {err}")]
    Io {
        index: usize,
        what: &'static str,
        path: PathBuf,
        err: std::io::Error,
    },
    #[error("mounts[{index}]: {err}")]
    Stage { index: usize, err: RootfsError },
}

/// The spec's `idmap` option (idmap the mount, not its submounts).
pub const IDMAP: &str = "idmap";
/// The spec's `ridmap` option (idmap the mount and its submounts).
pub const RIDMAP: &str = "ridmap";

/// Whether mount `m` asks for an idmapped mount (runtime-spec: the options, or
/// mappings given on the mount).
pub fn wants_idmap(m: &Mount) -> bool {
    m.uid_mappings().is_some()
        || m.gid_mappings().is_some()
        || m.options()
            .iter()
            .flatten()
            .any(|o| o == IDMAP || o == RIDMAP)
}

/// libcontainer's (and runc's) rule for a bind mount: type `bind`, or a `bind`/`rbind`
/// option.
fn is_bind(m: &Mount) -> bool {
    m.typ().as_deref() == Some("bind")
        || m.options()
            .iter()
            .flatten()
            .any(|o| o == "bind" || o == "rbind")
}

fn has(m: &Mount, opt: &str) -> bool {
    m.options().iter().flatten().any(|o| o == opt)
}

/// The host path that mount `index`'s source names when that mount is made: the source
/// (relative ones against `bundle`, cleaned lexically), and, when it lies in `rootfs`
/// under the destination of an earlier mount, the same path through that mount (the
/// latest earlier mount whose destination holds it: it covers the others). Pure.
///
/// Errors: [`IdmapMountError::UnderEarlier`] when that earlier mount is not a bind.
pub fn resolve_source(
    mounts: &[Mount],
    index: usize,
    rootfs: &Path,
    bundle: &Path,
) -> Result<PathBuf, IdmapMountError> {
    let given = mounts[index].source().clone().unwrap_or_default();
    let mut path = crate::sys::paths::clean(&bundle.join(&given));
    let mut before = index;
    while let Some((j, rest)) = (0..before).rev().find_map(|j| {
        let dest = rootfs.join(
            crate::sys::paths::clean(mounts[j].destination())
                .strip_prefix("/")
                .ok()?,
        );
        path.strip_prefix(&dest).ok().map(|r| (j, r.to_path_buf()))
    }) {
        let m = &mounts[j];
        if !is_bind(m) {
            return Err(IdmapMountError::UnderEarlier {
                index,
                src: path,
                earlier: j,
                typ: m.typ().clone().unwrap_or_default(),
                destination: m.destination().clone(),
            });
        }
        let src = crate::sys::paths::clean(&bundle.join(m.source().clone().unwrap_or_default()));
        path = if rest.as_os_str().is_empty() {
            src
        } else {
            src.join(rest)
        };
        before = j;
    }
    Ok(path)
}

fn id_maps(v: &[LinuxIdMapping]) -> Vec<IdMap> {
    v.iter()
        .map(|m| IdMap {
            container_id: m.container_id(),
            host_id: m.host_id(),
            size: m.size(),
        })
        .collect()
}

/// Where the container's user namespace comes from, for mounts without mappings.
enum ContainerUserns {
    Path(PathBuf),
    Maps(Vec<IdMap>, Vec<IdMap>),
    None,
}

fn container_userns(spec: &Spec) -> ContainerUserns {
    let Some(linux) = spec.linux() else {
        return ContainerUserns::None;
    };
    let Some(ns) = linux
        .namespaces()
        .iter()
        .flatten()
        .find(|n| n.typ() == LinuxNamespaceType::User)
    else {
        return ContainerUserns::None;
    };
    if let Some(p) = ns.path() {
        return ContainerUserns::Path(p.clone());
    }
    let u = id_maps(linux.uid_mappings().as_deref().unwrap_or_default());
    let g = id_maps(linux.gid_mappings().as_deref().unwrap_or_default());
    if u.is_empty() || g.is_empty() {
        ContainerUserns::None
    } else {
        ContainerUserns::Maps(u, g)
    }
}

/// Checks every idmapped mount of `spec` (bind only, mappings both or neither, a user
/// namespace to take mappings from) before anything is made. Pure.
///
/// Errors: [`IdmapMountError::NotBind`], [`IdmapMountError::Mappings`],
/// [`IdmapMountError::NoUserns`].
pub fn check(spec: &Spec) -> Result<(), IdmapMountError> {
    let has_userns = !matches!(container_userns(spec), ContainerUserns::None);
    for (index, m) in spec.mounts().iter().flatten().enumerate() {
        if !wants_idmap(m) {
            continue;
        }
        if !is_bind(m) {
            return Err(IdmapMountError::NotBind { index });
        }
        match (m.uid_mappings(), m.gid_mappings()) {
            (None, None) if !has_userns => return Err(IdmapMountError::NoUserns { index }),
            (None, None) => {}
            (Some(u), Some(g)) if !u.is_empty() && !g.is_empty() => {}
            _ => return Err(IdmapMountError::Mappings { index }),
        }
    }
    Ok(())
}

/// Makes every idmapped mount of `spec` (see the module doc) and rewrites it into a
/// plain bind of its staging point under `staging` (a directory siloc owns, created
/// here). Also makes relative destinations absolute (runc 1.1: relative to the rootfs;
/// mount_compat::prepare gave the warning). Returns how many mounts were made; with
/// none, does nothing else.
/// The caller must be single-threaded and, after this, create the container from this
/// process (the staging mounts live in its private mount namespace).
///
/// Errors: [`IdmapMountError`] naming the mount; a failure leaves only mounts in the
/// private mount namespace, which end with the process.
pub fn stage(
    spec: &mut Spec,
    rootfs: &Path,
    bundle: &Path,
    staging: &Path,
) -> Result<usize, IdmapMountError> {
    let mut mounts = spec.mounts().clone().unwrap_or_default();
    for m in mounts.iter_mut() {
        // mount_compat::prepare warned about it (runc 1.1's text) and resolved it.
        if !m.destination().is_absolute() {
            m.set_destination(Path::new("/").join(m.destination()));
        }
    }
    check(spec)?;
    let original = mounts.clone();
    // Some(true): idmapped; Some(false): a plain bind the container's root cannot reach
    // (the second libcontainer gap, see [`unreachable_by_others`]).
    let in_userns = has_user_namespace(spec);
    let todo: Vec<Option<bool>> = original
        .iter()
        .enumerate()
        .map(|(i, m)| {
            if wants_idmap(m) {
                Some(true)
            } else if in_userns
                && is_bind(m)
                && resolve_source(&original, i, rootfs, bundle)
                    .is_ok_and(|s| unreachable_by_others(&s))
            {
                Some(false)
            } else {
                None
            }
        })
        .collect();
    if todo.iter().all(Option::is_none) {
        spec.set_mounts(Some(mounts));
        return Ok(0);
    }
    let mut container_ns: Option<OwnedFd> = None;
    let mut entered = false;
    let mut made = 0;
    for (index, m) in mounts.iter_mut().enumerate() {
        let Some(idmap) = todo[index] else {
            continue;
        };
        let source = resolve_source(&original, index, rootfs, bundle)?;
        if !idmap {
            let tree =
                crate::sys::mountapi::clone_tree(&source, has(m, "rbind")).map_err(|errno| {
                    IdmapMountError::Source {
                        index,
                        src: source.clone(),
                        err: RootfsError::Sys {
                            step: "open_tree",
                            path: source.clone(),
                            errno,
                        },
                    }
                })?;
            attach_staged(index, tree, staging, &mut entered)?;
            m.set_source(Some(staging.join(index.to_string())));
            made += 1;
            continue;
        }
        let own_ns;
        let userns = match (m.uid_mappings(), m.gid_mappings()) {
            (Some(u), Some(g)) => {
                own_ns = crate::userns::userns_with_mapping(&id_maps(u), &id_maps(g))
                    .map_err(|err| IdmapMountError::Userns { index, err })?;
                own_ns.as_fd()
            }
            _ => {
                if container_ns.is_none() {
                    container_ns = Some(open_container_userns(spec, index)?);
                }
                container_ns
                    .as_ref()
                    .map(AsFd::as_fd)
                    .ok_or(IdmapMountError::NoUserns { index })?
            }
        };
        let tree = rootfs::idmapped_clone(&source, userns, has(m, "rbind"), has(m, RIDMAP))
            .map_err(|err| IdmapMountError::Source {
                index,
                src: source.clone(),
                err,
            })?;
        attach_staged(index, tree, staging, &mut entered)?;
        let point = staging.join(index.to_string());
        m.set_source(Some(point));
        m.set_uid_mappings(None);
        m.set_gid_mappings(None);
        let opts: Vec<String> = m
            .options()
            .iter()
            .flatten()
            .filter(|o| *o != IDMAP && *o != RIDMAP)
            .cloned()
            .collect();
        m.set_options(Some(opts));
        made += 1;
    }
    spec.set_mounts(Some(mounts));
    Ok(made)
}

/// Attaches detached tree `tree` of mount `index` at its staging point
/// `staging/<index>` (a directory or a file, as the tree's root), entering create's
/// private mount namespace first if `entered` says it has not yet. Closes the tree fd.
fn attach_staged(
    index: usize,
    tree: OwnedFd,
    staging: &Path,
    entered: &mut bool,
) -> Result<(), IdmapMountError> {
    let point = staging.join(index.to_string());
    let io = |what, path: &Path| {
        let path = path.to_path_buf();
        move |err| IdmapMountError::Io {
            index,
            what,
            path,
            err,
        }
    };
    for d in [staging.parent().unwrap_or(staging), staging] {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().mode(0o711).create(d) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(io("create staging dir", d)(e));
            }
            _ => {}
        }
    }
    let is_dir = nix::sys::stat::fstat(std::os::fd::AsRawFd::as_raw_fd(&tree))
        .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        .unwrap_or(true);
    if is_dir {
        std::fs::create_dir(&point).map_err(io("create staging point", &point))?;
    } else {
        std::fs::File::create(&point).map_err(io("create staging point", &point))?;
    }
    if !*entered {
        rootfs::creator_ns::enter(staging).map_err(|err| IdmapMountError::Stage { index, err })?;
        *entered = true;
    }
    crate::sys::mountapi::move_mount_to(tree.as_fd(), &point).map_err(|errno| {
        IdmapMountError::Stage {
            index,
            err: RootfsError::Sys {
                step: "move_mount",
                path: point.clone(),
                errno,
            },
        }
    })?;
    drop(tree);
    Ok(())
}

/// Whether some directory above `path` (symlinks resolved) denies search to others.
/// libcontainer's container process resolves bind sources by path after it has become
/// the container's root, which in a user namespace is an "other" to host-owned
/// directories (runc opens such sources before it joins the namespace). libcontainer
/// gap: a 0700 directory above a volume fails the mount with EACCES.
pub fn unreachable_by_others(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    real.ancestors()
        .skip(1)
        .any(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 == 0))
}

/// Whether the spec gives the container a user namespace (new or joined).
fn has_user_namespace(spec: &Spec) -> bool {
    spec.linux().as_ref().is_some_and(|l| {
        l.namespaces()
            .iter()
            .flatten()
            .any(|n| n.typ() == LinuxNamespaceType::User)
    })
}

/// Where the staging points go: runc's and libcontainer's container process resolves
/// a bind source by path after it has become the container's root, so every ancestor
/// of a staging point must be traversable by anyone (a state root under a 0700
/// directory is not). `/run/siloc-staging/<id>.<pid>` (0711), unique per create;
/// entries of creates whose pid is gone (a crash between staging and unstaging leaves
/// an empty directory, never a mount) are removed here.
pub fn staging_dir(id: &str) -> PathBuf {
    let base = Path::new(STAGING_BASE);
    for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some((_, pid)) = name.rsplit_once('.')
            && pid
                .parse::<i32>()
                .is_ok_and(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_err())
        {
            unstage(&e.path());
        }
    }
    base.join(format!("{id}.{}", std::process::id()))
}

/// Runs [`unstage`] on its directory when dropped, so every way out of `create` (an
/// error before or after libcontainer) detaches the staging mounts.
pub struct StagingGuard(pub PathBuf);

impl Drop for StagingGuard {
    fn drop(&mut self) {
        unstage(&self.0);
    }
}

/// The parent of every [`staging_dir`].
pub const STAGING_BASE: &str = "/run/siloc-staging";

/// Detaches the staging mounts [`stage`] attached under `staging` from this process's
/// mount namespace, once libcontainer has made the container (which holds its own
/// copies): a foreground `run` stays in the namespace and later removes the record
/// directory they are in. Best effort; a missing `staging` is nothing to do.
///
/// The staging points are removed one by one, never recursively: a point still
/// mounted refuses (EBUSY) instead of letting a recursive removal of the record
/// directory reach into the mount's source.
pub fn unstage(staging: &Path) {
    for e in std::fs::read_dir(staging).into_iter().flatten().flatten() {
        let p = e.path();
        while nix::mount::umount2(&p, nix::mount::MntFlags::MNT_DETACH).is_ok() {}
        let gone = std::fs::remove_dir(&p).or_else(|_| std::fs::remove_file(&p));
        if let Err(err) = gone {
            tracing::warn!("idmapped mount staging point {}: {err}", p.display());
        }
    }
    let _ = std::fs::remove_dir(staging);
}

fn open_container_userns(spec: &Spec, index: usize) -> Result<OwnedFd, IdmapMountError> {
    match container_userns(spec) {
        ContainerUserns::Path(p) => {
            std::fs::File::open(&p)
                .map(OwnedFd::from)
                .map_err(|err| IdmapMountError::Io {
                    index,
                    what: "open user namespace",
                    path: p,
                    err,
                })
        }
        ContainerUserns::Maps(u, g) => crate::userns::userns_with_mapping(&u, &g)
            .map_err(|err| IdmapMountError::Userns { index, err }),
        ContainerUserns::None => Err(IdmapMountError::NoUserns { index }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mounts(json: &str) -> Vec<Mount> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_source_under_an_earlier_bind_resolves_through_it() {
        let m = mounts(
            r#"[{"destination":"/vol","type":"bind","source":"/host/a","options":["rbind"]},
                {"destination":"/vol/deeper","type":"bind","source":"rel/b","options":["bind"]},
                {"destination":"/x","type":"bind","source":"/r/vol/deeper/c/../d","options":["idmap"]},
                {"destination":"/y","type":"bind","source":"/r/vol/e","options":["idmap"]},
                {"destination":"/z","type":"bind","source":"/elsewhere","options":["idmap"]}]"#,
        );
        let r = Path::new("/r");
        let b = Path::new("/bundle");
        assert_eq!(
            resolve_source(&m, 2, r, b).unwrap(),
            Path::new("/bundle/rel/b/d")
        );
        assert_eq!(resolve_source(&m, 3, r, b).unwrap(), Path::new("/host/a/e"));
        assert_eq!(
            resolve_source(&m, 4, r, b).unwrap(),
            Path::new("/elsewhere")
        );
        // Mount 0's own source is never read through later mounts.
        assert_eq!(resolve_source(&m, 0, r, b).unwrap(), Path::new("/host/a"));
    }

    #[test]
    fn a_source_under_an_earlier_tmpfs_is_refused_by_name() {
        let m = mounts(
            r#"[{"destination":"/t","type":"tmpfs","source":"tmpfs"},
                {"destination":"/x","type":"bind","source":"/r/t/sub","options":["idmap"]}]"#,
        );
        let e = resolve_source(&m, 1, Path::new("/r"), Path::new("/b")).unwrap_err();
        assert!(e.to_string().contains("mounts[0] (tmpfs at /t)"), "{e}");
    }

    fn spec(json: &str) -> Spec {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn checks_name_the_mount() {
        let bad = [
            (
                r#"{"ociVersion":"1.1.0","mounts":[{"destination":"/t","type":"tmpfs","source":"t","options":["idmap"]}],
                    "linux":{"namespaces":[{"type":"user"}],"uidMappings":[{"containerID":0,"hostID":1,"size":1}],"gidMappings":[{"containerID":0,"hostID":1,"size":1}]}}"#,
                "mounts[0]: idmapped mounts are only supported for bind mounts",
            ),
            (
                r#"{"ociVersion":"1.1.0","mounts":[{"destination":"/t","type":"bind","source":"/s","options":["idmap"]}]}"#,
                "takes the container's user namespace",
            ),
            (
                r#"{"ociVersion":"1.1.0","mounts":[{"destination":"/t","type":"bind","source":"/s","options":["rbind"],
                    "uidMappings":[{"containerID":0,"hostID":1,"size":1}]}]}"#,
                "must both be given",
            ),
        ];
        for (s, want) in bad {
            let e = check(&spec(s)).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        check(&spec(
            r#"{"ociVersion":"1.1.0","mounts":[{"destination":"/t","type":"bind","source":"/s","options":["rbind"],
                "uidMappings":[{"containerID":0,"hostID":1,"size":1}],"gidMappings":[{"containerID":0,"hostID":1,"size":1}]}]}"#,
        ))
        .unwrap();
    }

    #[test]
    fn relative_destinations_become_absolute_and_nothing_else_changes() {
        let mut s = spec(
            r#"{"ociVersion":"1.1.0","mounts":[{"destination":"rel/d","type":"bind","source":"/s","options":["rbind"]}]}"#,
        );
        let n = stage(
            &mut s,
            Path::new("/r"),
            Path::new("/b"),
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(n, 0);
        let m = &s.mounts().as_ref().unwrap()[0];
        assert_eq!(m.destination(), Path::new("/rel/d"));
        assert_eq!(m.source().as_deref(), Some(Path::new("/s")));
    }
}
