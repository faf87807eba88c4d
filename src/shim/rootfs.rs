//! Rootfs hand-over: what the shim does with CreateTaskRequest's rootfs mounts.
//!
//! - An `overlay` mount (containerd's overlayfs snapshotter) is NOT mounted. Its
//!   `lowerdir` (top first, `:`-separated), `upperdir` and `workdir` become the trusted
//!   annotations `io.siloc.rootfs.layers` (a JSON array, base first, the image
//!   manifest's order), `io.siloc.rootfs.upper` and `io.siloc.rootfs.work` in the
//!   bundle's config.json, so siloc assembles the one idmapped overlay at root.path.
//!   containerd 2.x adds `uidmap=`/`gidmap=` (`container:host:size` entries) for user
//!   namespaced pods: they must equal the spec's own mappings, which siloc idmaps the
//!   layers with.
//! - Any other mount (`bind`/`rbind` from the native snapshotter or a one-layer
//!   snapshot, btrfs, ext4, ...) is mounted at root.path as containerd's runc shim
//!   does, and said so in the shim's log; a type the kernel does not know is refused.
//! - No mounts: root.path is used as the bundle has it.
//!
//! Every `io.siloc.rootfs.*` annotation the bundle brought (a pod's annotations reach
//! config.json through containerd's pod_annotations allowlist) is removed first: they
//! name host paths, so only the shim writes them.

use std::path::{Path, PathBuf};

use containerd_shim::protos::types::mount::Mount;
use serde_json::{Value, json};
use siloc::annotations as ann;

use crate::error::{Result, ShimError};

/// What became of the rootfs mounts.
#[derive(Debug, PartialEq, Eq)]
pub enum Handover {
    /// No mounts: root.path as the bundle has it.
    AsIs,
    /// The overlay's directories, written as annotations for siloc.
    Overlay { layers: usize },
    /// Mounted by the shim at this path; unmount it on delete.
    Mounted(PathBuf),
}

/// One uid or gid mapping entry, `container:host:size` (OCI `LinuxIDMapping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdMap {
    pub container: u32,
    pub host: u32,
    pub size: u32,
}

/// The parsed options of an overlay mount.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Overlay {
    /// Base first.
    pub layers: Vec<String>,
    pub upper: Option<String>,
    pub work: Option<String>,
    pub uidmap: Vec<IdMap>,
    pub gidmap: Vec<IdMap>,
    /// Options siloc's assembly does not take (index=off, userxattr, ...), for the log.
    pub ignored: Vec<String>,
}

fn mount_err(i: usize, m: &Mount, msg: impl Into<String>) -> ShimError {
    ShimError::Mount {
        index: i,
        fstype: m.type_.clone(),
        source_path: m.source.clone(),
        msg: msg.into(),
    }
}

/// Parses `uidmap=`/`gidmap=` values: `c:h:s` entries, separated by `,` (or one run of
/// `c:h:s:c:h:s...`).
fn parse_idmap(v: &str) -> Option<Vec<IdMap>> {
    let nums: Vec<u32> = v
        .split([',', ':'])
        .map(|n| n.trim().parse::<u32>().ok())
        .collect::<Option<_>>()?;
    if nums.is_empty() || !nums.len().is_multiple_of(3) {
        return None;
    }
    Some(
        nums.chunks(3)
            .map(|c| IdMap {
                container: c[0],
                host: c[1],
                size: c[2],
            })
            .collect(),
    )
}

/// Parses an overlay mount's options. Errors name the mount and option.
pub fn parse_overlay(i: usize, m: &Mount) -> Result<Overlay> {
    let mut o = Overlay::default();
    let mut opts = m.options.iter().peekable();
    while let Some(opt) = opts.next() {
        let (k, v) = opt.split_once('=').unwrap_or((opt.as_str(), ""));
        match k {
            "lowerdir" => {
                // containerd's lowerdir is top first; siloc's layers are base first.
                o.layers = v.split(':').rev().map(str::to_string).collect();
            }
            "upperdir" => o.upper = Some(v.to_string()),
            "workdir" => o.work = Some(v.to_string()),
            "uidmap" | "gidmap" => {
                // A comma-separated list may have been split into several options.
                let mut text = v.to_string();
                while let Some(next) = opts.peek() {
                    if next.contains('=') {
                        break;
                    }
                    text.push(',');
                    text.push_str(next);
                    opts.next();
                }
                let maps = parse_idmap(&text).ok_or_else(|| {
                    mount_err(
                        i,
                        m,
                        format!("option {k}={text}: not container:host:size entries"),
                    )
                })?;
                if k == "uidmap" {
                    o.uidmap = maps;
                } else {
                    o.gidmap = maps;
                }
            }
            _ => o.ignored.push(opt.clone()),
        }
    }
    if o.layers.is_empty() || o.layers.iter().any(|l| l.is_empty() || !l.starts_with('/')) {
        return Err(mount_err(i, m, "no lowerdir of absolute paths"));
    }
    if o.upper.is_none() || o.work.is_none() {
        return Err(mount_err(
            i,
            m,
            "a read-only overlay (no upperdir/workdir) is not supported by siloc's shim",
        ));
    }
    Ok(o)
}

/// The spec's `linux.uidMappings` or `gidMappings` (`key`) as [`IdMap`]s.
fn spec_maps(spec: &Value, key: &str) -> Vec<IdMap> {
    spec["linux"][key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| {
            Some(IdMap {
                container: m["containerID"].as_u64()? as u32,
                host: m["hostID"].as_u64()? as u32,
                size: m["size"].as_u64()? as u32,
            })
        })
        .collect()
}

/// Removes every `io.siloc.rootfs.*` annotation; returns the keys removed.
pub fn strip_rootfs_annotations(spec: &mut Value) -> Vec<String> {
    let Some(a) = spec.get_mut("annotations").and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    let keys: Vec<String> = a
        .keys()
        .filter(|k| k.starts_with(ann::ROOTFS_PREFIX))
        .cloned()
        .collect();
    for k in &keys {
        a.remove(k);
    }
    keys
}

fn set_annotation(spec: &mut Value, key: &str, value: String) {
    if !spec["annotations"].is_object() {
        spec["annotations"] = json!({});
    }
    spec["annotations"][key] = Value::String(value);
}

/// root.path of `spec`, relative ones joined to `bundle`.
pub fn root_path(spec: &Value, bundle: &Path) -> PathBuf {
    let p = PathBuf::from(spec["root"]["path"].as_str().unwrap_or("rootfs"));
    if p.is_absolute() { p } else { bundle.join(p) }
}

/// Writes the overlay's facts into `spec`, or checks them against it. Pure: no mount.
pub fn hand_over_overlay(spec: &mut Value, i: usize, m: &Mount) -> Result<Handover> {
    let o = parse_overlay(i, m)?;
    for (key, given) in [("uidMappings", &o.uidmap), ("gidMappings", &o.gidmap)] {
        if given.is_empty() {
            continue;
        }
        let spec_has = spec_maps(spec, key);
        if spec_has != *given {
            return Err(mount_err(
                i,
                m,
                format!(
                    "its {} option {given:?} differs from the spec's linux.{key} {spec_has:?}: \
                     siloc idmaps the layers with the spec's mappings",
                    if key == "uidMappings" {
                        "uidmap"
                    } else {
                        "gidmap"
                    }
                ),
            ));
        }
    }
    if !o.ignored.is_empty() {
        log::info!(
            "overlay options siloc's assembly does not use: {:?}",
            o.ignored
        );
    }
    let layers = o.layers.len();
    set_annotation(
        spec,
        ann::ROOTFS_LAYERS,
        serde_json::to_string(&o.layers).unwrap_or_default(),
    );
    set_annotation(spec, ann::ROOTFS_UPPER, o.upper.unwrap_or_default());
    set_annotation(spec, ann::ROOTFS_WORK, o.work.unwrap_or_default());
    Ok(Handover::Overlay { layers })
}

/// Whether the kernel knows filesystem type `t` (/proc/filesystems), or it is a bind.
fn known_type(t: &str) -> bool {
    if matches!(t, "bind" | "rbind") {
        return true;
    }
    std::fs::read_to_string("/proc/filesystems")
        .is_ok_and(|s| s.lines().any(|l| l.split_whitespace().last() == Some(t)))
}

/// Hands the rootfs mounts over: see the module doc. `spec` is config.json (edited in
/// place), `bundle` its directory. Mounts only for non-overlay types, after every check.
pub fn hand_over(spec: &mut Value, bundle: &Path, mounts: &[Mount]) -> Result<Handover> {
    let removed = strip_rootfs_annotations(spec);
    if !removed.is_empty() {
        log::warn!(
            "removed the bundle's own rootfs annotations {removed:?}: only the shim sets them"
        );
    }
    match mounts {
        [] => Ok(Handover::AsIs),
        [m] if m.type_ == "overlay" => hand_over_overlay(spec, 0, m),
        [m] => {
            if !known_type(&m.type_) {
                return Err(mount_err(
                    0,
                    m,
                    "unknown mount type (not in /proc/filesystems)",
                ));
            }
            let target = root_path(spec, bundle);
            log::info!(
                "rootfs: mounting {} {} at {} with {:?} as the runc shim does (only overlay is handed to siloc unmounted)",
                m.type_,
                m.source,
                target.display(),
                m.options
            );
            let t = if m.type_ == "rbind" {
                "bind"
            } else {
                m.type_.as_str()
            };
            containerd_shim::mount::mount_rootfs(Some(t), Some(&m.source), &m.options, &target)
                .map_err(|e| mount_err(0, m, format!("mount at {}: {e}", target.display())))?;
            Ok(Handover::Mounted(target))
        }
        [m, ..] => Err(mount_err(
            1,
            &mounts[1],
            format!(
                "{} rootfs mounts; siloc's shim takes one (first: {} {})",
                mounts.len(),
                m.type_,
                m.source
            ),
        )),
    }
}

/// Unmounts a rootfs the shim mounted (lazily: the container is gone). A path that is
/// no longer a mount point is fine.
pub fn unmount(target: &Path) -> Result<()> {
    match nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(ShimError::Io {
            path: target.to_path_buf(),
            source: e.into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(t: &str, opts: &[&str]) -> Mount {
        Mount {
            type_: t.into(),
            source: "overlay".into(),
            options: opts.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn overlay_options_become_annotations_base_first() {
        let mut spec = json!({"root": {"path": "rootfs"}, "annotations": {
            "io.siloc.rootfs.upper": "/etc", "io.siloc.rootfs.layers": "[\"/\"]", "other": "x"}});
        let m = mount(
            "overlay",
            &[
                "index=off",
                "workdir=/s/3/work",
                "upperdir=/s/3/fs",
                "lowerdir=/s/2/fs:/s/1/fs",
            ],
        );
        let h = hand_over(&mut spec, Path::new("/b"), &[m]).unwrap();
        assert_eq!(h, Handover::Overlay { layers: 2 });
        let a = &spec["annotations"];
        assert_eq!(a[ann::ROOTFS_LAYERS], r#"["/s/1/fs","/s/2/fs"]"#);
        assert_eq!(a[ann::ROOTFS_UPPER], "/s/3/fs");
        assert_eq!(a[ann::ROOTFS_WORK], "/s/3/work");
        assert_eq!(a["other"], "x");
    }

    #[test]
    fn a_pods_rootfs_annotations_are_removed_without_mounts_too() {
        let mut spec = json!({"annotations": {"io.siloc.rootfs.upper": "/etc"}});
        assert_eq!(
            hand_over(&mut spec, Path::new("/b"), &[]).unwrap(),
            Handover::AsIs
        );
        assert!(spec["annotations"].as_object().unwrap().is_empty());
    }

    #[test]
    fn idmap_options_must_match_the_spec() {
        let opts = [
            "upperdir=/u",
            "workdir=/w",
            "lowerdir=/l",
            "uidmap=0:100000:65536",
            "gidmap=0:100000:65536",
        ];
        let maps = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        let mut spec = json!({"linux": {"uidMappings": maps, "gidMappings": maps}});
        hand_over(&mut spec, Path::new("/b"), &[mount("overlay", &opts)]).unwrap();
        let mut spec = json!({"linux": {"uidMappings": maps}});
        let e = hand_over(&mut spec, Path::new("/b"), &[mount("overlay", &opts)]).unwrap_err();
        assert!(e.to_string().contains("gidmap"), "{e}");
        assert_eq!(
            parse_idmap("0:1:2,5:6:7"),
            Some(vec![
                IdMap {
                    container: 0,
                    host: 1,
                    size: 2
                },
                IdMap {
                    container: 5,
                    host: 6,
                    size: 7
                }
            ])
        );
        assert_eq!(parse_idmap("0:1"), None);
    }

    #[test]
    fn bad_mounts_are_named_before_anything_is_mounted() {
        let mut spec = json!({});
        let e = hand_over(
            &mut spec,
            Path::new("/nonexistent"),
            &[mount("nosuchfs", &[])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown mount type"), "{e}");
        let e = hand_over(
            &mut spec,
            Path::new("/b"),
            &[mount("overlay", &["lowerdir=/l"])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("read-only overlay"), "{e}");
        let e = hand_over(
            &mut spec,
            Path::new("/b"),
            &[mount("overlay", &["upperdir=/u", "workdir=/w"])],
        )
        .unwrap_err();
        assert!(e.to_string().contains("lowerdir"), "{e}");
        let two = [mount("bind", &[]), mount("bind", &[])];
        assert!(hand_over(&mut spec, Path::new("/b"), &two).is_err());
    }
}
