//! The final spec: the bundle's spec with the plan's outcome applied, as libcontainer
//! receives it (saved beside the record as `config.json`).

use std::path::PathBuf;

use oci_spec::runtime::{LinuxIdMappingBuilder, LinuxNamespaceBuilder, LinuxNamespaceType, Spec};

use crate::annotations as ann;
use crate::lifecycle::plan::{RootfsPlan, UsernsPlan};
use crate::lifecycle::prepare::PrepareError;
use crate::lifecycle::record::Record;

/// Applies the plan's outcome to the spec libcontainer will run: the user namespace
/// and mappings, the absolute root.path, a default cgroupsPath, rootfsPropagation in
/// libcontainer's names, and siloc's report annotations.
pub fn final_spec(mut spec: Spec, rec: &Record, systemd: bool) -> Result<Spec, PrepareError> {
    let se = |e: oci_spec::OciSpecError| PrepareError::Spec(e.to_string());
    if let Some(root) = spec.root_mut() {
        root.set_path(rec.rootfs.clone());
    }
    let mut linux = spec.linux().clone().unwrap_or_default();
    // libcontainer 0.7 knows only the plain names and always applies them recursively
    // (MS_REC), which is what the `r` forms runc also takes mean.
    // An empty value means unset, as for runc.
    if let Some(p) = linux.rootfs_propagation().clone() {
        if p.is_empty() {
            linux.set_rootfs_propagation(None);
        } else if let Some(plain) = p.strip_prefix('r')
            && crate::lifecycle::bundle::ROOTFS_PROPAGATION.contains(&plain)
        {
            linux.set_rootfs_propagation(Some(plain.to_string()));
        }
    }
    if linux.cgroups_path().is_none() {
        // runc puts a container without cgroupsPath under its own name; siloc prefixes
        // the name so its cgroups are easy to tell apart.
        let p = if systemd {
            format!("system.slice:siloc:{}", rec.id)
        } else {
            format!("/siloc-{}", rec.id)
        };
        linux.set_cgroups_path(Some(PathBuf::from(p)));
    } else if !systemd && let Some(p) = linux.cgroups_path().clone() {
        // runc cleans a cgroupfs path first (utils.CleanPath: `..` never climbs above
        // its base); libcgroups joins it as written, so `../x` named a directory
        // outside the hierarchy (/sys/fs/cgroup/x).
        let clean = crate::sys::paths::clean(&p);
        let clean = if p.is_absolute() {
            clean
        } else {
            clean.strip_prefix("/").map(PathBuf::from).unwrap_or(clean)
        };
        if !clean.as_os_str().is_empty() {
            linux.set_cgroups_path(Some(clean));
        }
    }
    let mut notes = Vec::new();
    if let (UsernsPlan::Auto { .. }, Some(r)) = (&rec.plan.userns, rec.prepared.range) {
        let mut ns = linux.namespaces().clone().unwrap_or_default();
        ns.push(
            LinuxNamespaceBuilder::default()
                .typ(LinuxNamespaceType::User)
                .build()
                .map_err(se)?,
        );
        linux.set_namespaces(Some(ns));
        let map = |host| {
            LinuxIdMappingBuilder::default()
                .container_id(0u32)
                .host_id(host)
                .size(r.size)
                .build()
        };
        linux.set_uid_mappings(Some(vec![map(r.uid).map_err(se)?]));
        linux.set_gid_mappings(Some(vec![map(r.gid).map_err(se)?]));
        notes.push((
            ann::OUT_USERNS_RANGE,
            format!("uid={},gid={},size={}", r.uid, r.gid, r.size),
        ));
    }
    match &rec.plan.rootfs {
        RootfsPlan::AsIs => {}
        RootfsPlan::IdmapBind => notes.push((ann::OUT_ROOTFS, "idmapped-bind".to_string())),
        RootfsPlan::Overlay { .. } => {
            if let Some(a) = &rec.prepared.assembly {
                notes.push((ann::OUT_ROOTFS, a.clone()));
            }
        }
    }
    if let Some(p) = &rec.prepared.placement {
        notes.extend(crate::lifecycle::placement::finalize(&mut linux, p));
    }
    // Rate 0 means no limit (v1's meaning); a new cgroup has none, and io.max would
    // refuse `wbps=0` with ERANGE.
    if let Some(mut res) = linux.resources().clone()
        && let Some(mut b) = res.block_io().clone()
        && !crate::iopolicy::zero_rate::take_zero_rates(&mut b).is_empty()
    {
        res.set_block_io(Some(b));
        linux.set_resources(Some(res));
    }
    let has = |t: LinuxNamespaceType| linux.namespaces().iter().flatten().any(|n| n.typ() == t);
    let (in_userns, own_netns) = (
        has(LinuxNamespaceType::User),
        has(LinuxNamespaceType::Network),
    );
    spec.set_linux(Some(linux));
    if in_userns && !own_netns {
        sysfs_as_bind(&mut spec).map_err(se)?;
    }
    // A report annotation the bundle brought is not siloc's report (annotations.rs,
    // OUTPUTS): dropped, whether siloc writes its own or not.
    let forged = spec
        .annotations()
        .as_ref()
        .is_some_and(|a| ann::OUTPUTS.iter().any(|k| a.contains_key(*k)));
    if !notes.is_empty() || forged {
        let mut a = spec.annotations().clone().unwrap_or_default();
        for k in ann::OUTPUTS {
            if let Some(v) = a.remove(k) {
                tracing::warn!(target: "siloc", "annotation {k}={v:?} of the bundle dropped: siloc writes it");
            }
        }
        for (k, v) in notes {
            a.insert(k.to_string(), v);
        }
        spec.set_annotations(Some(a));
    }
    Ok(spec)
}

/// Records in `spec` the namespaces siloc joins for the container
/// ([`crate::engine::outer_namespaces::take`]) as `io.siloc.namespaces.inherited`,
/// and, when the network namespace is one of them, makes its sysfs mounts binds: its
/// user namespace does not own that network namespace either (see
/// [`sysfs_as_bind`]).
///
/// Errors: [`PrepareError::Spec`] when a mount cannot be rebuilt.
pub fn note_outer_namespaces(
    spec: &mut Spec,
    outer: &[crate::engine::outer_namespaces::Outer],
) -> Result<(), PrepareError> {
    if outer.is_empty() {
        return Ok(());
    }
    if outer.iter().any(|o| o.typ == LinuxNamespaceType::Network) {
        sysfs_as_bind(spec).map_err(|e| PrepareError::Spec(e.to_string()))?;
    }
    let mut a = spec.annotations().clone().unwrap_or_default();
    a.insert(
        ann::OUT_NS_INHERITED.to_string(),
        crate::engine::outer_namespaces::describe(outer),
    );
    spec.set_annotations(Some(a));
    Ok(())
}

/// A container in a user namespace that shares the host's network namespace cannot
/// mount sysfs (the kernel wants CAP_SYS_ADMIN over the network namespace's owner:
/// EPERM), so each `sysfs` mount becomes a read-only recursive bind of the host's
/// /sys, as runc does (libcontainer/rootfs_linux.go, the "sysfs" EPERM fallback).
fn sysfs_as_bind(spec: &mut Spec) -> Result<(), oci_spec::OciSpecError> {
    let Some(mounts) = spec.mounts().clone() else {
        return Ok(());
    };
    let mut out = Vec::with_capacity(mounts.len());
    for m in mounts {
        if m.typ().as_deref() != Some("sysfs") {
            out.push(m);
            continue;
        }
        let opts = ["rbind", "nosuid", "noexec", "nodev", "ro"]
            .map(String::from)
            .to_vec();
        out.push(
            oci_spec::runtime::MountBuilder::default()
                .destination(m.destination().clone())
                .typ("bind")
                .source("/sys")
                .options(opts)
                .build()?,
        );
    }
    spec.set_mounts(Some(out));
    Ok(())
}

#[cfg(test)]
mod sysfs_tests {
    use super::*;

    #[test]
    fn sysfs_becomes_a_bind_of_the_hosts() {
        let mut spec: Spec = serde_json::from_str(
            r#"{"ociVersion":"1.0.2","mounts":[{"destination":"/sys","type":"sysfs","source":"sysfs","options":["ro"]},
               {"destination":"/proc","type":"proc","source":"proc"}]}"#,
        )
        .unwrap();
        sysfs_as_bind(&mut spec).unwrap();
        let m = spec.mounts().clone().unwrap();
        assert_eq!(m[0].typ().as_deref(), Some("bind"));
        assert_eq!(m[0].source().as_deref(), Some(std::path::Path::new("/sys")));
        assert!(
            m[0].options()
                .as_ref()
                .unwrap()
                .contains(&"rbind".to_string())
        );
        assert_eq!(m[1].typ().as_deref(), Some("proc"));
    }
}
