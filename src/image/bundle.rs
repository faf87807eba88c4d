//! An image as a runtime bundle (image-spec `conversion.md`): config.json from the
//! image config on top of the runtime defaults, with `io.siloc.rootfs.layers` naming
//! the stored layers, and an empty `rootfs/` where siloc attaches the overlay.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::store::ImageRecord;
use super::user::User;
use crate::annotations as ann;

/// Errors building or writing a bundle; each names the image field or path.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("image {image}: neither Entrypoint nor Cmd is set; give the command after --")]
    NoCommand { image: String },
    #[error("image {image}: config field {field}: {msg}")]
    Field {
        image: String,
        field: &'static str,
        msg: String,
    },
    #[error("{path}: {msg}")]
    Path { path: PathBuf, msg: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Choices the image does not make.
#[derive(Debug, Clone, Default)]
pub struct BundleOptions {
    /// Replaces the image's Cmd (the Entrypoint stays), as `docker run IMAGE ARGS`.
    pub args: Option<Vec<String>>,
    /// `process.terminal`.
    pub terminal: bool,
    /// Adds `io.siloc.userns=auto` (a per-container user namespace).
    pub userns: bool,
}

/// The image-spec annotation keys for config fields without a runtime-spec field.
const OS: &str = "org.opencontainers.image.os";
const ARCH: &str = "org.opencontainers.image.architecture";
const AUTHOR: &str = "org.opencontainers.image.author";
const CREATED: &str = "org.opencontainers.image.created";
const STOP_SIGNAL: &str = "org.opencontainers.image.stopSignal";
const EXPOSED_PORTS: &str = "org.opencontainers.image.exposedPorts";

/// The runtime spec for `image` on top of `base` (the `siloc spec` defaults), with
/// `layers` (the stored layer directories, base first) and the resolved `user`.
///
/// - process.args: Entrypoint + Cmd (or `opts.args` for Cmd); env: the base's, with
///   the image's variables replacing same-named ones; cwd: WorkingDir (default /).
/// - root: `rootfs`, writable (the overlay's upper dir takes the writes).
/// - annotations: os, architecture, author, created, stopSignal, exposedPorts as
///   `org.opencontainers.image.*`; Labels over those (conversion.md lets labels win);
///   labels under `io.siloc.` are dropped, since an image must not choose host
///   policy (writable dirs, I/O classes); then `io.siloc.rootfs.layers` and
///   `io.siloc.userns`.
///
/// Errors: [`BundleError::NoCommand`]; bad field types name the field.
pub fn runtime_spec(
    mut base: Value,
    image: &ImageRecord,
    layers: &[PathBuf],
    user: &User,
    opts: &BundleOptions,
) -> Result<Value, BundleError> {
    let cfg = image.config.get("config").cloned().unwrap_or(Value::Null);
    let strings = |field: &'static str| -> Result<Option<Vec<String>>, BundleError> {
        match cfg.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                serde_json::from_value(v.clone())
                    .map(Some)
                    .map_err(|e| BundleError::Field {
                        image: image.name.clone(),
                        field,
                        msg: e.to_string(),
                    })
            }
        }
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_string();

    let mut args = strings("Entrypoint")?.unwrap_or_default();
    match &opts.args {
        Some(a) => args.extend(a.iter().cloned()),
        None => args.extend(strings("Cmd")?.unwrap_or_default()),
    }
    if args.is_empty() {
        return Err(BundleError::NoCommand {
            image: image.name.clone(),
        });
    }
    let mut env: Vec<String> = base["process"]["env"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    for var in strings("Env")?.unwrap_or_default() {
        let key = var.split('=').next().unwrap_or("").to_string();
        match env
            .iter_mut()
            .find(|e| e.split('=').next() == Some(key.as_str()))
        {
            Some(slot) => *slot = var,
            None => env.push(var),
        }
    }
    let wd = text(cfg.get("WorkingDir"));
    let cwd = if wd.is_empty() {
        "/".to_string()
    } else if wd.starts_with('/') {
        wd
    } else {
        format!("/{wd}")
    };
    if let Some(v) = strings("Volumes").ok().flatten().filter(|v| !v.is_empty()) {
        tracing::warn!(target: "siloc", "image {}: Volumes {v:?} are not mounted; their data stays in the writable layer", image.name);
    }

    let p = &mut base["process"];
    p["terminal"] = json!(opts.terminal);
    p["args"] = json!(args);
    p["env"] = json!(env);
    p["cwd"] = json!(cwd);
    p["user"] = json!({"uid": user.uid, "gid": user.gid});
    if !user.additional_gids.is_empty() {
        p["user"]["additionalGids"] = json!(user.additional_gids);
    }
    base["root"] = json!({"path": "rootfs", "readonly": false});

    let mut a: BTreeMap<String, String> = BTreeMap::new();
    for (key, field) in [
        (OS, "os"),
        (ARCH, "architecture"),
        (AUTHOR, "author"),
        (CREATED, "created"),
    ] {
        let v = text(image.config.get(field));
        if !v.is_empty() {
            a.insert(key.into(), v);
        }
    }
    let stop = text(cfg.get("StopSignal"));
    if !stop.is_empty() {
        a.insert(STOP_SIGNAL.into(), stop);
    }
    if let Some(ports) = cfg.get("ExposedPorts").and_then(Value::as_object)
        && !ports.is_empty()
    {
        let mut keys: Vec<&str> = ports.keys().map(String::as_str).collect();
        keys.sort();
        a.insert(EXPOSED_PORTS.into(), keys.join(","));
    }
    if let Some(labels) = cfg.get("Labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if k.starts_with(crate::annotations::PREFIX) {
                tracing::warn!(target: "siloc", "image {}: label {k} ignored: io.siloc.* annotations are the host's choice", image.name);
                continue;
            }
            a.insert(k.clone(), v.as_str().unwrap_or("").to_string());
        }
    }
    let layer_list: Vec<String> = layers.iter().map(|l| l.display().to_string()).collect();
    a.insert(ann::ROOTFS_LAYERS.into(), json!(layer_list).to_string());
    if opts.userns {
        a.insert(ann::USERNS.into(), "auto".into());
    }
    base["annotations"] = json!(a);
    Ok(base)
}

/// Writes `config_json` (the text) and an empty `rootfs/` into bundle directory
/// `dir`, created if missing. Refuses an existing config.json or a non-empty rootfs;
/// on error removes what it created.
pub fn write(dir: &Path, config_json: &str) -> Result<(), BundleError> {
    let config = dir.join("config.json");
    if config.exists() {
        return Err(BundleError::Path {
            path: config,
            msg: "exists; remove it first".into(),
        });
    }
    let rootfs = dir.join("rootfs");
    if rootfs.exists()
        && std::fs::read_dir(&rootfs)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(BundleError::Path {
            path: rootfs,
            msg: "must be an empty directory (siloc attaches the image's layers there)".into(),
        });
    }
    let made_dir = !dir.exists();
    let made_rootfs = !rootfs.exists();
    let undo = || {
        if made_dir {
            let _ = std::fs::remove_dir_all(dir);
        } else if made_rootfs {
            let _ = std::fs::remove_dir(&rootfs);
        }
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BundleError::Io { path, source }
    };
    let r = std::fs::create_dir_all(&rootfs)
        .map_err(io(&rootfs))
        .and_then(|_| std::fs::write(&config, config_json).map_err(io(&config)));
    if r.is_err() {
        undo();
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Value {
        json!({
            "ociVersion": "1.2.0",
            "process": {"terminal": true, "user": {"uid": 0, "gid": 0}, "args": ["sh"],
                        "env": ["PATH=/usr/bin:/bin", "TERM=xterm"], "cwd": "/"},
            "root": {"path": "rootfs", "readonly": true},
            "linux": {}
        })
    }

    fn image(config: Value) -> ImageRecord {
        ImageRecord {
            name: "localhost/x:latest".into(),
            manifest: "sha256:00".into(),
            config_digest: "sha256:11".into(),
            source: "/src".into(),
            layers: vec![],
            config,
        }
    }

    #[test]
    fn image_config_becomes_process_and_annotations() {
        let img = image(json!({
            "architecture": "amd64", "os": "linux", "created": "2024-01-01T00:00:00Z",
            "config": {
                "Entrypoint": ["/bin/app"], "Cmd": ["--serve"],
                "Env": ["PATH=/app/bin:/bin", "MODE=prod"],
                "WorkingDir": "srv", "StopSignal": "SIGINT",
                "ExposedPorts": {"8080/tcp": {}, "53/udp": {}},
                "Labels": {"org.example.team": "infra", "org.opencontainers.image.os": "custom",
                           "io.siloc.rootfs.upper": "/etc"}
            }
        }));
        let layers = vec![
            PathBuf::from("/s/layers/sha256-aa/fs"),
            PathBuf::from("/s/layers/sha256-bb/fs"),
        ];
        let user = User {
            uid: 1000,
            gid: 1001,
            additional_gids: vec![10],
        };
        let opts = BundleOptions {
            userns: true,
            ..Default::default()
        };
        let s = runtime_spec(base(), &img, &layers, &user, &opts).unwrap();
        assert_eq!(s["process"]["args"], json!(["/bin/app", "--serve"]));
        assert_eq!(
            s["process"]["env"],
            json!(["PATH=/app/bin:/bin", "TERM=xterm", "MODE=prod"])
        );
        assert_eq!(s["process"]["cwd"], "/srv");
        assert_eq!(s["process"]["terminal"], false);
        assert_eq!(
            s["process"]["user"],
            json!({"uid": 1000, "gid": 1001, "additionalGids": [10]})
        );
        assert_eq!(s["root"], json!({"path": "rootfs", "readonly": false}));
        let a = &s["annotations"];
        assert_eq!(a["org.opencontainers.image.stopSignal"], "SIGINT");
        assert_eq!(
            a["org.opencontainers.image.exposedPorts"],
            "53/udp,8080/tcp"
        );
        assert_eq!(a["org.opencontainers.image.architecture"], "amd64");
        assert_eq!(a["org.opencontainers.image.os"], "custom", "labels win");
        assert_eq!(a["org.example.team"], "infra");
        assert!(
            a.get("io.siloc.rootfs.upper").is_none(),
            "an image cannot pick host dirs"
        );
        assert_eq!(a[ann::USERNS], "auto");
        let listed: Vec<PathBuf> =
            serde_json::from_str(a[ann::ROOTFS_LAYERS].as_str().unwrap()).unwrap();
        assert_eq!(listed, layers);
        // the result is a valid runtime spec
        crate::lifecycle::bundle::parse(s.to_string().as_bytes()).unwrap();
    }

    #[test]
    fn args_replace_cmd_and_a_command_is_required() {
        let img = image(json!({"config": {"Entrypoint": ["tini", "--"], "Cmd": ["sh"]}}));
        let opts = BundleOptions {
            args: Some(vec!["true".into()]),
            ..Default::default()
        };
        let s = runtime_spec(base(), &img, &[], &User::default(), &opts).unwrap();
        assert_eq!(s["process"]["args"], json!(["tini", "--", "true"]));
        assert!(s["annotations"].get(ann::USERNS).is_none());
        let bare = image(json!({"config": {}}));
        let e = runtime_spec(
            base(),
            &bare,
            &[],
            &User::default(),
            &BundleOptions::default(),
        )
        .unwrap_err();
        assert!(matches!(e, BundleError::NoCommand { .. }), "{e}");
        let bad = image(json!({"config": {"Cmd": "sh -c x"}}));
        let e = runtime_spec(
            base(),
            &bad,
            &[],
            &User::default(),
            &BundleOptions::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("Cmd"), "{e}");
    }

    #[test]
    fn write_refuses_existing_config_and_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let b = d.path().join("b");
        write(&b, "{}").unwrap();
        assert!(b.join("rootfs").is_dir());
        let e = write(&b, "{}").unwrap_err();
        assert!(e.to_string().contains("config.json"), "{e}");
        let c = d.path().join("c");
        std::fs::create_dir_all(c.join("rootfs/x")).unwrap();
        assert!(write(&c, "{}").is_err());
        assert!(!c.join("config.json").exists() && c.join("rootfs/x").exists());
    }
}
