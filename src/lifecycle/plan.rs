//! Planning: pure decisions from (spec, annotations, host config) to what `prepare`
//! will do. Nothing here touches the host, so every rule is unit-tested.

use std::collections::HashMap;
use std::path::PathBuf;

use oci_spec::runtime::Spec;
use serde::{Deserialize, Serialize};

use crate::annotations::{self as ann, AnnotationError, err};
use crate::config::HostConfig;
pub(crate) use crate::userns::UsernsPlan;

/// Where the container's writable layer lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum UpperPlan {
    /// `<data_root>/containers/<id>/{upper,work}`, removed on delete.
    Ephemeral,
    /// `io.siloc.rootfs.upper`; kept on delete. Its work dir is `<upper>.work`.
    Persistent(PathBuf),
    /// `io.siloc.rootfs.upper` with `io.siloc.rootfs.work`: an existing upper and work
    /// dir pair that another owner (containerd's snapshotter) made and removes.
    Snapshot { upper: PathBuf, work: PathBuf },
}

/// How `root.path` becomes the container's root filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RootfsPlan {
    /// Used as it is (runc's behaviour).
    AsIs,
    /// One idmapped bind mount of root.path onto itself.
    IdmapBind,
    /// Overlayfs from read-only layers (base first) attached at root.path.
    Overlay {
        layers: Vec<PathBuf>,
        upper: UpperPlan,
    },
}

/// Everything siloc decided for one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub userns: UsernsPlan,
    pub rootfs: RootfsPlan,
    /// NUMA-local placement ([`crate::numa`]).
    #[serde(default)]
    pub numa: crate::numa::NumaPlan,
    /// Disk I/O policy ([`crate::iopolicy`]).
    #[serde(default)]
    pub io: crate::iopolicy::IoPlan,
    /// Bind-mount sources as written (relative ones are relative to the bundle),
    /// whose devices placement and I/O policies cover.
    #[serde(default)]
    pub volumes: Vec<PathBuf>,
}

/// Decides the plan. `spec` is the bundle's config.json; `cfg` the host config.
///
/// Errors: [`AnnotationError`] naming the bad annotation.
pub fn plan(spec: &Spec, cfg: &HostConfig) -> Result<Plan, AnnotationError> {
    let empty = HashMap::new();
    let a = spec.annotations().as_ref().unwrap_or(&empty);
    for key in crate::annotations::unknown(a.keys()) {
        tracing::warn!(
            "annotation {key}: not one siloc reads, ignored (siloc reads {})",
            crate::annotations::INPUTS.join(", ")
        );
    }
    let userns = crate::userns::plan(spec, a, &cfg.userns)?;
    let rootfs = plan_rootfs(a, &userns)?;
    Ok(Plan {
        userns,
        rootfs,
        numa: crate::numa::plan(a, spec, &cfg.numa)?,
        io: crate::iopolicy::plan(a, &cfg.io)?,
        volumes: volumes(spec),
    })
}

fn plan_rootfs(
    a: &HashMap<String, String>,
    userns: &UsernsPlan,
) -> Result<RootfsPlan, AnnotationError> {
    let dir = |key: &'static str| -> Result<Option<PathBuf>, AnnotationError> {
        let Some(u) = a.get(key) else {
            return Ok(None);
        };
        let p = PathBuf::from(u);
        if !p.is_absolute() {
            return Err(err(key, format!("{u:?} must be an absolute path")));
        }
        // Its work dir is `<upper>.work`, a sibling: a ".." part, a trailing "/" or
        // a "." part would put it elsewhere (inside the upper dir, for "/x/up/").
        if p.components().any(|c| c == std::path::Component::ParentDir) {
            return Err(err(key, format!("{u:?} must not contain \"..\"")));
        }
        Ok(Some(p.components().collect()))
    };
    let upper = dir(ann::ROOTFS_UPPER)?;
    let work = dir(ann::ROOTFS_WORK)?;
    if work.is_some() && upper.is_none() {
        return Err(err(ann::ROOTFS_WORK, "needs io.siloc.rootfs.upper"));
    }
    let Some(text) = a.get(ann::ROOTFS_LAYERS) else {
        if upper.is_some() {
            return Err(err(ann::ROOTFS_UPPER, "needs io.siloc.rootfs.layers"));
        }
        return Ok(match userns {
            UsernsPlan::Auto { .. } => RootfsPlan::IdmapBind,
            _ => RootfsPlan::AsIs,
        });
    };
    let layers: Vec<PathBuf> = serde_json::from_str(text).map_err(|e| {
        err(
            ann::ROOTFS_LAYERS,
            format!("not a JSON array of directory paths: {e}"),
        )
    })?;
    if layers.is_empty() {
        return Err(err(ann::ROOTFS_LAYERS, "the list of layers is empty"));
    }
    if layers.len() > crate::rootfs::MAX_LAYERS {
        return Err(err(
            ann::ROOTFS_LAYERS,
            format!(
                "{} layers; overlayfs takes at most {}",
                layers.len(),
                crate::rootfs::MAX_LAYERS
            ),
        ));
    }
    if let Some(bad) = layers.iter().find(|l| !l.is_absolute()) {
        return Err(err(
            ann::ROOTFS_LAYERS,
            format!("{} must be an absolute path", bad.display()),
        ));
    }
    let upper = match (upper, work) {
        (Some(upper), Some(work)) => UpperPlan::Snapshot { upper, work },
        (Some(u), None) => UpperPlan::Persistent(u),
        (None, _) => UpperPlan::Ephemeral,
    };
    Ok(RootfsPlan::Overlay { layers, upper })
}

/// The bind-mount sources of `spec` (runtime-spec `mounts[]` of type `bind` or with
/// a `bind`/`rbind` option), as written.
pub fn volumes(spec: &Spec) -> Vec<PathBuf> {
    spec.mounts()
        .iter()
        .flatten()
        .filter(|m| {
            m.typ().as_deref() == Some("bind")
                || m.options()
                    .iter()
                    .flatten()
                    .any(|o| o == "bind" || o == "rbind")
        })
        .filter_map(|m| m.source().clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userns::IdMap;

    fn spec(annotations: &[(&str, &str)], userns: Option<&str>) -> Spec {
        let ns = match userns {
            Some(maps) => format!(r#",{{"type":"user"}}],{maps}"#),
            None => "]".to_string(),
        };
        let ann: HashMap<String, String> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let text = format!(
            r#"{{"ociVersion":"1.0.2","root":{{"path":"rootfs"}},
            "process":{{"cwd":"/","args":["sh"],"user":{{"uid":0,"gid":0}}}},
            "annotations":{},
            "linux":{{"namespaces":[{{"type":"mount"}}{ns}}}}}"#,
            serde_json::to_string(&ann).unwrap()
        );
        serde_json::from_str(&text).unwrap()
    }

    fn cfg(default_userns: &str) -> HostConfig {
        let mut c = HostConfig::default();
        c.userns.default = default_userns.into();
        c
    }

    #[test]
    fn no_annotations_is_runc_behaviour() {
        let p = plan(&spec(&[], None), &cfg("off")).unwrap();
        assert_eq!(p.userns, UsernsPlan::Host);
        assert_eq!(p.rootfs, RootfsPlan::AsIs);
    }

    #[test]
    fn auto_userns_idmaps_a_plain_rootfs() {
        let p = plan(&spec(&[(ann::USERNS, "auto")], None), &cfg("off")).unwrap();
        assert_eq!(p.userns, UsernsPlan::Auto { size: 65536 });
        assert_eq!(p.rootfs, RootfsPlan::IdmapBind);
        // the host default applies when the annotation is absent
        let p = plan(&spec(&[(ann::USERNS_SIZE, "1000")], None), &cfg("auto")).unwrap();
        assert_eq!(p.userns, UsernsPlan::Auto { size: 1000 });
        // and the annotation can turn it off
        let p = plan(&spec(&[(ann::USERNS, "off")], None), &cfg("auto")).unwrap();
        assert_eq!(p.userns, UsernsPlan::Host);
    }

    /// Values are trimmed, as the other io.siloc.* values are, and a bad size is
    /// refused even where it would be ignored (userns off by default, or the spec's
    /// own user namespace), so a typo does not wait for the day it applies.
    #[test]
    fn userns_values_are_trimmed_and_always_checked() {
        let p = plan(&spec(&[(ann::USERNS, " auto\n")], None), &cfg("off")).unwrap();
        assert_eq!(p.userns, UsernsPlan::Auto { size: 65536 });
        let maps = r#""uidMappings":[{"containerID":0,"hostID":5000,"size":10}],
                      "gidMappings":[{"containerID":0,"hostID":5000,"size":10}]"#;
        for (a, userns) in [
            (vec![(ann::USERNS_SIZE, "lots")], None),
            (vec![(ann::USERNS_SIZE, "0")], None),
            (vec![(ann::USERNS, "off"), (ann::USERNS_SIZE, "-1")], None),
            (vec![(ann::USERNS_SIZE, "1e6")], Some(maps)),
        ] {
            let e = plan(&spec(&a, userns), &cfg("off")).unwrap_err();
            assert_eq!(e.key, ann::USERNS_SIZE, "{a:?}");
            assert!(e.msg.contains("is not a count of IDs >= 1"), "{a:?}: {e}");
        }
        // A good one where it does not apply is only ignored (with a warning).
        let p = plan(&spec(&[(ann::USERNS_SIZE, "1000")], None), &cfg("off")).unwrap();
        assert_eq!(p.userns, UsernsPlan::Host);
    }

    #[test]
    fn a_userns_size_must_map_the_specs_ids() {
        let mut s = spec(&[(ann::USERNS, "auto"), (ann::USERNS_SIZE, "5")], None);
        let mounts: Vec<oci_spec::runtime::Mount> = serde_json::from_str(
            r#"[{"destination":"/dev/pts","type":"devpts","source":"devpts",
                 "options":["nosuid","mode=0620","gid=5"]}]"#,
        )
        .unwrap();
        s.set_mounts(Some(mounts));
        let e = plan(&s, &cfg("off")).unwrap_err();
        assert_eq!(e.key, ann::USERNS_SIZE);
        assert!(e.msg.contains("mount /dev/pts option gid=5"), "{e}");
        assert!(e.msg.contains("at least 6 IDs"), "{e}");
        // 6 IDs map gid 5.
        let mut a = s.annotations().clone().unwrap();
        a.insert(ann::USERNS_SIZE.into(), "6".into());
        s.set_annotations(Some(a.clone()));
        assert_eq!(
            plan(&s, &cfg("off")).unwrap().userns,
            UsernsPlan::Auto { size: 6 }
        );
        // The process's user: the pause image's 65535 needs the full 65536.
        let mut u = s.process().clone().unwrap();
        u.set_user(serde_json::from_str(r#"{"uid":65535,"gid":65535}"#).unwrap());
        s.set_process(Some(u));
        a.insert(ann::USERNS_SIZE.into(), "65535".into());
        s.set_annotations(Some(a));
        let e = plan(&s, &cfg("off")).unwrap_err();
        assert!(e.msg.contains("process.user.uid needs ID 65535"), "{e}");
    }

    #[test]
    fn spec_userns_is_left_alone() {
        let maps = r#""uidMappings":[{"containerID":0,"hostID":5000,"size":10}],
                      "gidMappings":[{"containerID":0,"hostID":6000,"size":10}]"#;
        let p = plan(&spec(&[(ann::USERNS, "auto")], Some(maps)), &cfg("auto")).unwrap();
        assert_eq!(
            p.userns,
            UsernsPlan::FromSpec {
                uid: vec![IdMap {
                    container_id: 0,
                    host_id: 5000,
                    size: 10
                }],
                gid: vec![IdMap {
                    container_id: 0,
                    host_id: 6000,
                    size: 10
                }],
                join_path: None,
            }
        );
        assert_eq!(p.rootfs, RootfsPlan::AsIs);
    }

    #[test]
    fn layers_make_an_overlay() {
        let s = spec(
            &[
                (ann::USERNS, "auto"),
                (ann::ROOTFS_LAYERS, r#"["/l/base","/l/top"]"#),
                (ann::ROOTFS_UPPER, "/data/up"),
            ],
            None,
        );
        let p = plan(&s, &cfg("off")).unwrap();
        assert_eq!(
            p.rootfs,
            RootfsPlan::Overlay {
                layers: vec!["/l/base".into(), "/l/top".into()],
                upper: UpperPlan::Persistent("/data/up".into()),
            }
        );
        // A trailing "/" or "." part is dropped, so the work dir stays a sibling.
        for up in ["/data/up/", "/data/./up/."] {
            let s = spec(
                &[
                    (ann::ROOTFS_LAYERS, r#"["/l/base"]"#),
                    (ann::ROOTFS_UPPER, up),
                ],
                None,
            );
            match plan(&s, &cfg("off")).unwrap().rootfs {
                RootfsPlan::Overlay { upper, .. } => {
                    assert_eq!(upper, UpperPlan::Persistent("/data/up".into()), "{up}")
                }
                other => panic!("{other:?}"),
            }
        }
        let s = spec(
            &[
                (ann::ROOTFS_LAYERS, r#"["/l/base"]"#),
                (ann::ROOTFS_UPPER, "/data/up/.."),
            ],
            None,
        );
        let e = plan(&s, &cfg("off")).unwrap_err().to_string();
        assert!(e.contains(ann::ROOTFS_UPPER) && e.contains("\"..\""), "{e}");
        let s = spec(&[(ann::ROOTFS_LAYERS, r#"["/l/base"]"#)], None);
        let p = plan(&s, &cfg("off")).unwrap();
        assert!(matches!(
            p.rootfs,
            RootfsPlan::Overlay {
                upper: UpperPlan::Ephemeral,
                ..
            }
        ));
        assert_eq!(p.userns, UsernsPlan::Host);
    }

    /// `io.siloc.userns.size` is capped by `[userns] max_size` (issue 16): the error
    /// names the annotation, the value and the cap; the cap itself is accepted.
    #[test]
    fn a_size_above_the_per_container_cap_is_refused() {
        let mut c = cfg("auto");
        c.userns.max_size = 131_072;
        let e = plan(&spec(&[(ann::USERNS_SIZE, "131073")], None), &c).unwrap_err();
        assert_eq!(
            e.to_string(),
            "annotation io.siloc.userns.size: 131073 IDs is above the per-container cap of \
             131072 IDs ([userns] max_size)"
        );
        let p = plan(&spec(&[(ann::USERNS_SIZE, "131072")], None), &c).unwrap();
        assert_eq!(p.userns, UsernsPlan::Auto { size: 131_072 });
        // the default cap: 16 ranges of 65536
        let big = (65_536u32 * 16 + 1).to_string();
        let e = plan(&spec(&[(ann::USERNS_SIZE, &big)], None), &cfg("auto")).unwrap_err();
        assert!(e.msg.contains("cap of 1048576 IDs"), "{e}");
        // a default size above the cap is a config error
        c.userns.size = 131_073;
        assert_eq!(c.userns.check().unwrap_err().0, "userns.size");
    }

    #[test]
    fn bad_annotations_are_named() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[(ann::USERNS, "yes")], ann::USERNS),
            (
                &[(ann::USERNS, "auto"), (ann::USERNS_SIZE, "0")],
                ann::USERNS_SIZE,
            ),
            (
                &[(ann::USERNS, "auto"), (ann::USERNS_SIZE, "lots")],
                ann::USERNS_SIZE,
            ),
            (
                &[(ann::USERNS, "off"), (ann::USERNS_SIZE, "10")],
                ann::USERNS_SIZE,
            ),
            (&[(ann::ROOTFS_LAYERS, "/l/base")], ann::ROOTFS_LAYERS),
            (&[(ann::ROOTFS_LAYERS, "[]")], ann::ROOTFS_LAYERS),
            (&[(ann::ROOTFS_LAYERS, r#"["rel"]"#)], ann::ROOTFS_LAYERS),
            (
                &[(ann::ROOTFS_LAYERS, r#"["/a"]"#), (ann::ROOTFS_UPPER, "up")],
                ann::ROOTFS_UPPER,
            ),
            (&[(ann::ROOTFS_UPPER, "/up")], ann::ROOTFS_UPPER),
        ];
        for (a, key) in cases {
            let e = plan(&spec(a, None), &cfg("off")).unwrap_err();
            assert_eq!(&e.key, key, "{a:?}: {e}");
        }
        let many: Vec<String> = (0..501).map(|i| format!("/l/{i}")).collect();
        let e = plan(
            &spec(
                &[(ann::ROOTFS_LAYERS, &serde_json::to_string(&many).unwrap())],
                None,
            ),
            &cfg("off"),
        )
        .unwrap_err();
        assert!(e.msg.contains("500"), "{e}");
    }
}
