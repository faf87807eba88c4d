//! Per-container user namespaces (DESIGN.md item 1): what the container gets
//! ([`plan`]), the host ID ranges behind it ([`idpool`], one table for the host; the
//! per-state-root tables of earlier versions are imported by [`idpool_import`]), and
//! the throwaway namespaces that carry a mapping for idmapped mounts ([`ns_fd`]).

pub(crate) mod idpool;
pub(crate) mod idpool_import;
pub(crate) mod idpool_spec;
pub(crate) mod ns_fd;

use std::collections::HashMap;
use std::path::PathBuf;

use oci_spec::runtime::{LinuxNamespaceType, Spec};
use serde::{Deserialize, Serialize};

use crate::annotations::{self as ann, AnnotationError, err};
pub(crate) use idpool::Range;
pub use ns_fd::{IdMap, userns_with_mapping};

/// Default pool when /etc/subuid has no `containers` entry: 16384 ranges of 65536 IDs
/// starting at 100000 (the first ID `useradd` leaves to sub-ID ranges).
pub(crate) const DEFAULT_POOL_START: u32 = 100_000;
pub(crate) const DEFAULT_POOL_SIZE: u32 = 65_536 * 16_384;
/// Default `[userns] max_size`: 16 ranges of 65536 (1/1024 of the default pool), so
/// that one container cannot take the pool; podman's `--userns=auto` caps at 65536
/// (containers.conf `auto_userns_max_size`), Kubernetes gives every pod 65536.
pub(crate) const DEFAULT_MAX_SIZE: u32 = 65_536 * 16;

/// `[userns]`: per-container user namespaces (DESIGN.md item 1).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct UsernsConfig {
    /// `off` or `auto`; a container's `io.siloc.userns` annotation overrides it.
    pub(crate) default: String,
    /// IDs per container when `io.siloc.userns.size` is not given.
    pub(crate) size: u32,
    /// The most IDs of the pool one container may hold: the largest
    /// `io.siloc.userns.size`, and the most pool IDs a spec's own mapping may cover
    /// ([`idpool_spec`]).
    pub(crate) max_size: u32,
    /// First host ID of the pool. Unset: /etc/subuid's `containers` entry, else 100000.
    pub(crate) pool_start: Option<u32>,
    /// Number of host IDs in the pool.
    pub(crate) pool_size: Option<u32>,
    /// The directory of the host's ID pool table (absolute), shared by every state
    /// root; default [`idpool::DEFAULT_POOL_DIR`], which says why there.
    pub(crate) pool_dir: PathBuf,
}

impl Default for UsernsConfig {
    fn default() -> Self {
        UsernsConfig {
            default: "off".into(),
            size: 65_536,
            max_size: DEFAULT_MAX_SIZE,
            pool_start: None,
            pool_size: None,
            pool_dir: PathBuf::from(idpool::DEFAULT_POOL_DIR),
        }
    }
}

impl UsernsConfig {
    /// Checks the section; errors are (key under `[userns]`, message).
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        if !matches!(self.default.as_str(), "off" | "auto") {
            return Err((
                "userns.default",
                format!("{:?}: use \"off\" or \"auto\"", self.default),
            ));
        }
        if self.size == 0 {
            return Err(("userns.size", "must be at least 1".into()));
        }
        if self.size > self.max_size {
            return Err((
                "userns.size",
                format!(
                    "{} is above userns.max_size {}, the per-container cap",
                    self.size, self.max_size
                ),
            ));
        }
        if !self.pool_dir.is_absolute() {
            return Err((
                "userns.pool_dir",
                format!("{}: must be an absolute path", self.pool_dir.display()),
            ));
        }
        if self.pool_size == Some(0) {
            return Err(("userns.pool_size", "must be at least 1".into()));
        }
        // Host IDs end below 4294967295, which is (uid_t)-1, "no ID" to the kernel.
        if let (Some(start), Some(size)) = (self.pool_start, self.pool_size)
            && u64::from(start) + u64::from(size) > u64::from(u32::MAX)
        {
            return Err((
                "userns.pool_size",
                format!(
                    "pool_start {start} + pool_size {size} passes the last host ID {}",
                    u32::MAX - 1
                ),
            ));
        }
        Ok(())
    }
}

/// Which user namespace the container gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum UsernsPlan {
    /// No user namespace (or one joined by path): IDs are the host's.
    Host,
    /// siloc allocates `size` host IDs and maps container 0..size-1 onto them.
    Auto { size: u32 },
    /// The spec brings its own mappings; siloc leaves them and idmaps layers with them.
    /// `join_path`: the user namespace the spec joins by path (a pod's app container
    /// joining its sandbox's), whose mappings the spec repeats.
    FromSpec {
        uid: Vec<IdMap>,
        gid: Vec<IdMap>,
        #[serde(default)]
        join_path: Option<std::path::PathBuf>,
    },
}

/// Decides the container's user namespace from the spec (runtime-spec config-linux
/// "User namespace mappings": its own namespace wins), `io.siloc.userns` and
/// `io.siloc.userns.size`, else the host default `cfg`.
///
/// Errors: [`AnnotationError`] naming the bad annotation.
pub(crate) fn plan(
    spec: &Spec,
    a: &HashMap<String, String>,
    cfg: &UsernsConfig,
) -> Result<UsernsPlan, AnnotationError> {
    let linux = spec.linux().as_ref();
    let spec_ns = linux
        .and_then(|l| l.namespaces().as_ref())
        .and_then(|ns| ns.iter().find(|n| n.typ() == LinuxNamespaceType::User));
    // Both values are trimmed, as the other io.siloc.* values are, and checked
    // whether or not they apply: a typo must not wait for the day it takes effect.
    let mode = a.get(ann::USERNS).map(|m| m.trim());
    if let Some(m) = mode
        && !matches!(m, "auto" | "off")
    {
        return Err(err(ann::USERNS, format!("{m:?}: use \"auto\" or \"off\"")));
    }
    let given_size = match a.get(ann::USERNS_SIZE) {
        None => None,
        Some(s) => match s.trim().parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(err(
                    ann::USERNS_SIZE,
                    format!("{s:?} is not a count of IDs >= 1"),
                ));
            }
        },
    };
    if let (Some(l), Some(ns)) = (linux, spec_ns) {
        let conv = |m: &Option<Vec<oci_spec::runtime::LinuxIdMapping>>| -> Vec<IdMap> {
            m.iter()
                .flatten()
                .map(|m| IdMap {
                    container_id: m.container_id(),
                    host_id: m.host_id(),
                    size: m.size(),
                })
                .collect()
        };
        // runtime-spec: the spec's own user namespace wins; a path means "join". A
        // joined namespace's mappings, when the spec repeats them (containerd's CRI
        // does for a pod's app containers; runc checks they match), are the ones to
        // idmap the layers with; without them siloc leaves the IDs alone.
        // containerd 2.x `hostUsers: false` pods, say: the kubelet's mapping is used.
        for key in [ann::USERNS, ann::USERNS_SIZE] {
            if let Some(v) = a.get(key) {
                tracing::warn!(
                    "annotation {key}={v}: ignored, the spec gives the container's user \
                     namespace (linux.namespaces, type user)"
                );
            }
        }
        if ns.path().is_some() && (l.uid_mappings().is_none() || l.gid_mappings().is_none()) {
            return Ok(UsernsPlan::Host);
        }
        return Ok(UsernsPlan::FromSpec {
            uid: conv(l.uid_mappings()),
            gid: conv(l.gid_mappings()),
            join_path: ns.path().clone(),
        });
    }
    let mode = mode.unwrap_or(cfg.default.as_str());
    if mode != "auto" {
        if a.contains_key(ann::USERNS_SIZE) && mode == "off" && a.contains_key(ann::USERNS) {
            return Err(err(
                ann::USERNS_SIZE,
                "given, but io.siloc.userns is \"off\"",
            ));
        }
        if a.contains_key(ann::USERNS_SIZE) {
            tracing::warn!(
                "annotation {}: ignored, the container gets no user namespace of siloc's \
                 (io.siloc.userns \"auto\" not given, and the host default [userns] default \
                 is \"{}\")",
                ann::USERNS_SIZE,
                cfg.default
            );
        }
        return Ok(UsernsPlan::Host);
    }
    let size = given_size.unwrap_or(cfg.size);
    // One container must not take the host's pool (issue 16): the cap is the config's.
    if size > cfg.max_size {
        return Err(err(
            ann::USERNS_SIZE,
            format!(
                "{size} IDs is above the per-container cap of {} IDs ([userns] max_size)",
                cfg.max_size
            ),
        ));
    }
    check_ids_fit(spec, size)?;
    Ok(UsernsPlan::Auto { size })
}

/// A container uid or gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdKind {
    Uid,
    Gid,
}

/// The container IDs the spec names, each with where: `process.user` (uid, gid,
/// additionalGids) and the `uid=N` / `gid=N` options of `mounts` (containerd's
/// /dev/pts has `gid=5`). The kernel cannot run or mount with an unmapped ID;
/// libcontainer then fails with a message naming neither the ID nor the mapping
/// ("mount options require mapping valid uid ...", or "failed to prepare rootfs").
fn ids_needed(spec: &Spec) -> Vec<(IdKind, u32, String)> {
    let mut needed = Vec::new();
    if let Some(u) = spec.process().as_ref().map(|p| p.user()) {
        needed.push((IdKind::Uid, u.uid(), "process.user.uid".into()));
        needed.push((IdKind::Gid, u.gid(), "process.user.gid".into()));
        for g in u.additional_gids().iter().flatten() {
            needed.push((IdKind::Gid, *g, "process.user.additionalGids".into()));
        }
    }
    for m in spec.mounts().iter().flatten() {
        for o in m.options().iter().flatten() {
            let id = if let Some(v) = o.strip_prefix("uid=") {
                v.parse::<u32>().ok().map(|v| (IdKind::Uid, v))
            } else {
                o.strip_prefix("gid=")
                    .and_then(|v| v.parse::<u32>().ok())
                    .map(|v| (IdKind::Gid, v))
            };
            if let Some((kind, id)) = id {
                needed.push((
                    kind,
                    id,
                    format!("mount {} option {o}", m.destination().display()),
                ));
            }
        }
    }
    needed
}

/// Checks that a range of `size` IDs (container 0..size-1) maps every container ID
/// the spec names ([`ids_needed`]).
///
/// Errors: [`AnnotationError`] naming `io.siloc.userns.size`, the ID and where it is.
fn check_ids_fit(spec: &Spec, size: u32) -> Result<(), AnnotationError> {
    match ids_needed(spec).into_iter().find(|(_, id, _)| *id >= size) {
        None => Ok(()),
        Some((_, id, what)) => Err(err(
            ann::USERNS_SIZE,
            format!(
                "{size} IDs map container IDs 0..={}, but the spec's {what} needs ID {id}: \
                 give at least {} IDs",
                size - 1,
                u64::from(id) + 1
            ),
        )),
    }
}

/// A spec's own mapping (`linux.uidMappings`/`gidMappings`, as containerd 2.x writes
/// for a `hostUsers: false` pod) that leaves an ID the spec names unmapped.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "linux.{field} {maps} maps container {kind}s {mapped}, but the spec's {what} needs {kind} \
     {id}: map it (at least {need} IDs from container ID 0: in a pod with io.siloc.userns=auto, \
     set io.siloc.userns.size; for hostUsers: false the kubelet maps 65536)"
)]
pub struct SpecMappingError {
    field: &'static str,
    maps: String,
    kind: &'static str,
    mapped: String,
    what: String,
    id: u32,
    need: u64,
}

/// Checks that the spec's own mappings map every container ID the spec names
/// ([`ids_needed`]). A spec without mappings of one kind (a user namespace joined by
/// path) is not checked for it.
///
/// Errors: [`SpecMappingError`] naming the mapping field, the ID and where it is.
pub(crate) fn check_spec_maps_fit(
    spec: &Spec,
    uid: &[IdMap],
    gid: &[IdMap],
) -> Result<(), SpecMappingError> {
    let covers = |maps: &[IdMap], id: u32| {
        maps.iter().any(|m| {
            u64::from(id) >= u64::from(m.container_id)
                && u64::from(id) < u64::from(m.container_id) + u64::from(m.size)
        })
    };
    for (kind, id, what) in ids_needed(spec) {
        let (maps, field, name) = match kind {
            IdKind::Uid => (uid, "uidMappings", "uid"),
            IdKind::Gid => (gid, "gidMappings", "gid"),
        };
        if maps.is_empty() || covers(maps, id) {
            continue;
        }
        let text = |f: fn(&IdMap) -> String| maps.iter().map(f).collect::<Vec<_>>().join(", ");
        return Err(SpecMappingError {
            field,
            maps: format!(
                "[{}]",
                text(|m| format!("{} {} {}", m.container_id, m.host_id, m.size))
            ),
            kind: name,
            mapped: text(|m| {
                format!(
                    "{}..={}",
                    m.container_id,
                    u64::from(m.container_id) + u64::from(m.size).max(1) - 1
                )
            }),
            what,
            id,
            need: u64::from(id) + 1,
        });
    }
    Ok(())
}

/// The mappings the container (and the idmapped layers) use, if any.
pub(crate) fn id_maps(
    plan_userns: &UsernsPlan,
    range: Option<Range>,
) -> Option<(Vec<IdMap>, Vec<IdMap>)> {
    match (plan_userns, range) {
        (UsernsPlan::Auto { .. }, Some(r)) => Some((
            vec![IdMap {
                container_id: 0,
                host_id: r.uid,
                size: r.size,
            }],
            vec![IdMap {
                container_id: 0,
                host_id: r.gid,
                size: r.size,
            }],
        )),
        (UsernsPlan::FromSpec { uid, gid, .. }, _) if !uid.is_empty() && !gid.is_empty() => {
            Some((uid.clone(), gid.clone()))
        }
        _ => None,
    }
}

/// The host IDs that container root maps to (owner of the writable dirs).
pub(crate) fn host_root(maps: &Option<(Vec<IdMap>, Vec<IdMap>)>) -> (u32, u32) {
    let find = |m: &[IdMap]| {
        m.iter()
            .find(|m| m.container_id == 0)
            .map_or(0, |m| m.host_id)
    };
    maps.as_ref().map_or((0, 0), |(u, g)| (find(u), find(g)))
}
pub mod reach;

#[cfg(test)]
mod spec_mapping_tests {
    use super::*;

    fn spec_with_devpts() -> Spec {
        serde_json::from_str(
            r#"{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"args":["sh"],"cwd":"/"},
                "mounts":[{"destination":"/dev/pts","type":"devpts","source":"devpts",
                           "options":["nosuid","mode=0620","gid=5"]}]}"#,
        )
        .unwrap()
    }

    fn map(c: u32, h: u32, n: u32) -> Vec<IdMap> {
        vec![IdMap {
            container_id: c,
            host_id: h,
            size: n,
        }]
    }

    #[test]
    fn a_one_id_mapping_names_the_mapping_and_what_needs_more() {
        let s = spec_with_devpts();
        let e = check_spec_maps_fit(&s, &map(0, 3_000_000, 1), &map(0, 3_000_000, 1))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "linux.gidMappings [0 3000000 1] maps container gids 0..=0, but the spec's mount \
             /dev/pts option gid=5 needs gid 5: map it (at least 6 IDs from container ID 0: \
             in a pod with io.siloc.userns=auto, set io.siloc.userns.size; for hostUsers: \
             false the kubelet maps 65536)"
        );
        // Enough gids: fine; a uid the uid map misses is named as a uid.
        check_spec_maps_fit(&s, &map(0, 3_000_000, 1), &map(0, 3_000_000, 6)).unwrap();
        let mut s = s;
        let mut p = s.process().clone().unwrap();
        p.set_user(serde_json::from_str(r#"{"uid":1000,"gid":0}"#).unwrap());
        s.set_process(Some(p));
        let e = check_spec_maps_fit(&s, &map(0, 3_000_000, 1000), &map(0, 3_000_000, 6))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("linux.uidMappings [0 3000000 1000] maps container uids 0..=999, but the spec's process.user.uid needs uid 1000"),
            "{e}"
        );
        // Several ranges: an ID inside any of them is mapped; a kind without mappings
        // (a user namespace joined by path) is not checked.
        let two = vec![map(0, 1, 1)[0], map(1000, 2000, 1)[0]];
        check_spec_maps_fit(&s, &two, &[]).unwrap();
    }
}
