//! The content-addressed layer store: each layer unpacked once, keyed by its diffID,
//! and the images that name them.
//!
//! ```text
//! <store>/                            default <data_root>/store (HostConfig::store_root)
//!     lock                            flock: shared while unpacking or bundling, exclusive for rm
//!     layers/sha256-<diffID hex>/
//!         fs/                         the layer in overlayfs form: io.siloc.rootfs.layers names it
//!         layer.json                  LayerMeta
//!     images/<escaped name>.json      ImageRecord
//!     tmp/                            unpacks in progress and removals (same filesystem)
//! ```
//! All layers share one parent directory on one filesystem (`layers/`), so the rootfs
//! assembly clones that parent once as a detached tree for any number of layers.
//! A layer appears only by `rename(2)` of a fully unpacked and verified directory:
//! a crash or a digest mismatch leaves nothing under `layers/`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::layout::{LayerRef, LayoutError};
use super::unpack::{self, UnpackError};

/// Errors of the store; each names the store path, layer, image or container at fault.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Unpack(#[from] UnpackError),
    #[error(transparent)]
    Io(#[from] crate::sys::fs::IoAt),
    #[error("{path}: {msg}")]
    Corrupt { path: PathBuf, msg: String },
    #[error(
        "layer {blob}: digest mismatch: the manifest says sha256:{expected}, the blob is \
         sha256:{actual}; nothing was stored"
    )]
    BlobDigest {
        blob: PathBuf,
        expected: String,
        actual: String,
    },
    #[error(
        "layer {blob}: size mismatch: the manifest says {expected} bytes, the blob has \
         {actual}; nothing was stored"
    )]
    BlobSize {
        blob: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error(
        "layer {blob}: diffID mismatch: the config's rootfs.diff_ids says sha256:{expected}, \
         the uncompressed tar is sha256:{actual}; nothing was stored"
    )]
    DiffId {
        blob: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("image name {name:?}: {msg}")]
    BadName { name: String, msg: String },
    #[error("no image {reference} in store {store}")]
    NoImage { reference: String, store: PathBuf },
    #[error("image reference {reference} is ambiguous in store {store}: {matches}")]
    Ambiguous {
        reference: String,
        store: PathBuf,
        matches: String,
    },
    #[error("image {image}: layer {layer} is missing from store {store}; unpack the image again")]
    MissingLayer {
        image: String,
        layer: String,
        store: PathBuf,
    },
    #[error(
        "layer {layer} is used by container {container} (state root {root}); delete the \
         container first"
    )]
    InUse {
        layer: PathBuf,
        container: String,
        root: PathBuf,
    },
    #[error("state root {root}: {source}")]
    Record {
        root: PathBuf,
        source: crate::lifecycle::record::RecordError,
    },
}

const LAYER_META: &str = "layer.json";

/// What the store knows of one layer (`layers/sha256-<hex>/layer.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerMeta {
    /// `sha256:<hex>` of the uncompressed tar: the key.
    pub diff_id: String,
    /// `sha256:<hex>` of the blob it was unpacked from.
    pub digest: String,
    pub media_type: String,
    /// Bytes of the blob, of the tar, and of regular-file content.
    pub blob_bytes: u64,
    pub tar_bytes: u64,
    pub content_bytes: u64,
    /// Tar entries applied.
    pub entries: u64,
    /// RFC 3339 time of the unpack.
    pub unpacked: String,
}

/// One image in the store (`images/<escaped name>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// The name `siloc image` commands use (`localhost/siloc/busybox:latest`).
    pub name: String,
    /// `sha256:<hex>` of the manifest.
    pub manifest: String,
    /// `sha256:<hex>` of the image config.
    pub config_digest: String,
    /// The layout it was unpacked from.
    pub source: PathBuf,
    /// diffIDs (`sha256:<hex>`), base first.
    pub layers: Vec<String>,
    /// The image config blob (image-spec `config.md`).
    pub config: serde_json::Value,
}

/// Whether [`Store::install_layer`] did the work or found the layer there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    New(LayerMeta),
    Present,
}

/// Holds the store lock while alive.
pub type StoreLock = crate::sys::lock::Lock;

/// What [`Store::remove`] did.
#[derive(Debug, Default)]
pub struct Removed {
    pub images: Vec<String>,
    /// diffIDs of the layers removed.
    pub layers: Vec<String>,
    /// Bytes of file content freed.
    pub bytes: u64,
}

/// A layer store rooted at a directory.
pub struct Store {
    root: PathBuf,
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Longest escaped image name: `<name>.json.tmp<pid>` must fit NAME_MAX (255).
const MAX_ESCAPED_NAME: usize = 200;

impl Store {
    /// Opens the store at `root`, creating it (mode 0700: layers hold set-user-ID
    /// files that must not be reachable by host users) when missing.
    /// Parent directories are created with the usual mode: bundles may live there,
    /// and a container's user must be able to reach its rootfs.
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        if let Some(parent) = root.parent() {
            std::fs::create_dir_all(parent).map_err(crate::sys::fs::io_at(parent))?;
        }
        for d in [
            root.to_path_buf(),
            root.join("layers"),
            root.join("images"),
            root.join("tmp"),
        ] {
            match std::fs::DirBuilder::new().mode(0o700).create(&d) {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(crate::sys::fs::io_at(&d)(e).into());
                }
                _ => {}
            }
        }
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    /// The store root.
    #[cfg(test)]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `layers/sha256-<hex>` for diffID hex `hex`.
    pub fn layer_dir(&self, hex: &str) -> PathBuf {
        self.root.join("layers").join(format!("sha256-{hex}"))
    }

    /// The layer's files, the directory `io.siloc.rootfs.layers` names.
    pub fn layer_fs(&self, hex: &str) -> PathBuf {
        self.layer_dir(hex).join("fs")
    }

    /// Whether the layer with diffID hex `hex` is stored.
    pub fn has_layer(&self, hex: &str) -> bool {
        self.layer_dir(hex).join(LAYER_META).is_file()
    }

    /// Takes the store lock: shared for unpack and bundle, exclusive for rm.
    pub fn lock(&self, exclusive: bool) -> Result<StoreLock, StoreError> {
        use crate::sys::lock::{Mode, lock_path};
        let path = self.root.join("lock");
        let mode = if exclusive {
            Mode::Exclusive
        } else {
            Mode::Shared
        };
        Ok(lock_path(&path, mode).map_err(crate::sys::fs::io_at(&path))?)
    }

    /// Removes what crashed unpacks and removals left in `tmp/` (entries whose
    /// process is gone; the pid is in the name).
    pub fn clean_tmp(&self) {
        let tmp = self.root.join("tmp");
        let Ok(rd) = std::fs::read_dir(&tmp) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name.split('.').nth(1).and_then(|p| p.parse::<u32>().ok());
            let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
            if !alive {
                tracing::debug!(path = %e.path().display(), "removing leftover");
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }

    fn tmp_dir(&self, tag: &str) -> PathBuf {
        let n = TMP_SEQ.fetch_add(1, Ordering::Relaxed);
        self.root
            .join("tmp")
            .join(format!("{tag}.{}.{n}", std::process::id()))
    }

    /// Unpacks `layer` into the store unless it is there: into a temporary directory
    /// on the store's filesystem, checked against the manifest's digest and size and
    /// the config's diffID, flushed to disk, then renamed into place. `progress(n)`
    /// gets blob bytes as they are read.
    ///
    /// Errors: [`StoreError::BlobDigest`], [`StoreError::BlobSize`],
    /// [`StoreError::DiffId`], [`UnpackError`]; the temporary directory is removed.
    pub fn install_layer(
        &self,
        layer: &LayerRef,
        progress: impl FnMut(u64) + Send + 'static,
    ) -> Result<Installed, StoreError> {
        if self.has_layer(&layer.diff_id) {
            return Ok(Installed::Present);
        }
        // The size before any work: a blob is read to its end.
        let (_, len) =
            super::layout::open_regular(&layer.blob).map_err(|source| UnpackError::Read {
                blob: layer.blob.clone(),
                source,
            })?;
        if len != layer.size {
            return Err(StoreError::BlobSize {
                blob: layer.blob.clone(),
                expected: layer.size,
                actual: len,
            });
        }
        let tmp = TmpDir(self.tmp_dir(&layer.diff_id[..12]));
        let fs = tmp.0.join("fs");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp.0)
            .map_err(crate::sys::fs::io_at(&tmp.0))?;
        std::fs::create_dir(&fs).map_err(crate::sys::fs::io_at(&fs))?;
        std::fs::set_permissions(&fs, std::fs::Permissions::from_mode(0o755))
            .map_err(crate::sys::fs::io_at(&fs))?;
        let got = unpack::unpack_layer(&layer.blob, layer.compression, &fs, progress)?;
        if got.digest != layer.digest {
            return Err(StoreError::BlobDigest {
                blob: layer.blob.clone(),
                expected: layer.digest.clone(),
                actual: got.digest,
            });
        }
        if got.blob_bytes != layer.size {
            return Err(StoreError::BlobSize {
                blob: layer.blob.clone(),
                expected: layer.size,
                actual: got.blob_bytes,
            });
        }
        if got.diff_id != layer.diff_id {
            return Err(StoreError::DiffId {
                blob: layer.blob.clone(),
                expected: layer.diff_id.clone(),
                actual: got.diff_id,
            });
        }
        let meta = LayerMeta {
            diff_id: format!("sha256:{}", layer.diff_id),
            digest: format!("sha256:{}", layer.digest),
            media_type: layer.media_type.clone(),
            blob_bytes: got.blob_bytes,
            tar_bytes: got.tar_bytes,
            content_bytes: got.content_bytes,
            entries: got.entries,
            unpacked: chrono::Utc::now().to_rfc3339(),
        };
        write_json(&tmp.0.join(LAYER_META), &meta)?;
        // The layer must be on disk before its name says it is complete.
        let dir = std::fs::File::open(&tmp.0).map_err(crate::sys::fs::io_at(&tmp.0))?;
        nix::unistd::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir))
            .map_err(|e| crate::sys::fs::io_at(&tmp.0)(e.into()))?;
        let dest = self.layer_dir(&layer.diff_id);
        match std::fs::rename(&tmp.0, &dest) {
            Ok(()) => {
                std::mem::forget(tmp);
                Ok(Installed::New(meta))
            }
            // Another unpack stored the same layer first; ours is dropped.
            Err(e) if dest.join(LAYER_META).is_file() => {
                tracing::debug!("layer {} stored concurrently: {e}", layer.diff_id);
                Ok(Installed::Present)
            }
            Err(e) => Err(crate::sys::fs::io_at(&dest)(e).into()),
        }
    }

    /// The metadata of a stored layer.
    pub fn layer_meta(&self, hex: &str) -> Result<LayerMeta, StoreError> {
        read_json(&self.layer_dir(hex).join(LAYER_META))
    }

    /// All stored layers, by diffID hex.
    pub fn layers(&self) -> Result<BTreeMap<String, LayerMeta>, StoreError> {
        let dir = self.root.join("layers");
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir(&dir).map_err(crate::sys::fs::io_at(&dir))? {
            let e = e.map_err(crate::sys::fs::io_at(&dir))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(hex) = name.strip_prefix("sha256-") {
                out.insert(hex.to_string(), self.layer_meta(hex)?);
            }
        }
        Ok(out)
    }

    /// Checks that an image of this name can be saved: not empty, and short enough
    /// that its escaped file name (with a temporary suffix) fits a file name.
    /// Errors: [`StoreError::BadName`].
    pub fn check_name(name: &str) -> Result<(), StoreError> {
        let bad = |msg: &str| StoreError::BadName {
            name: name.to_string(),
            msg: msg.to_string(),
        };
        if name.is_empty() {
            return Err(bad("empty"));
        }
        if escape(name).len() > MAX_ESCAPED_NAME {
            return Err(bad("too long for a file name in the store"));
        }
        Ok(())
    }

    fn image_path(&self, name: &str) -> PathBuf {
        self.root
            .join("images")
            .join(format!("{}.json", escape(name)))
    }

    /// Saves `rec` under its name (replacing an image of that name). Returns whether
    /// anything changed.
    pub fn save_image(&self, rec: &ImageRecord) -> Result<bool, StoreError> {
        let path = self.image_path(&rec.name);
        if read_json::<ImageRecord>(&path).is_ok_and(|old| old == *rec) {
            return Ok(false);
        }
        write_json(&path, rec)?;
        Ok(true)
    }

    /// All images, sorted by name.
    pub fn images(&self) -> Result<Vec<ImageRecord>, StoreError> {
        let dir = self.root.join("images");
        let mut out = Vec::new();
        for e in std::fs::read_dir(&dir).map_err(crate::sys::fs::io_at(&dir))? {
            let p = e.map_err(crate::sys::fs::io_at(&dir))?.path();
            if p.extension().is_some_and(|x| x == "json") {
                out.push(read_json::<ImageRecord>(&p)?);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Finds the image `reference` names: its exact name, the name with `:latest`
    /// added, without a `localhost/` prefix, its last path component, or a manifest
    /// digest (`sha256:<hex>` or a hex prefix of at least 6 digits).
    ///
    /// Errors: [`StoreError::NoImage`], [`StoreError::Ambiguous`].
    pub fn find_image(&self, reference: &str) -> Result<ImageRecord, StoreError> {
        let images = self.images()?;
        let tagged = |r: &str| -> String {
            let last = r.rsplit('/').next().unwrap_or(r);
            if last.contains(':') {
                r.to_string()
            } else {
                format!("{r}:latest")
            }
        };
        let want = tagged(reference);
        let rules: [&dyn Fn(&ImageRecord) -> bool; 5] = [
            &|i| i.name == reference,
            &|i| i.name == want,
            &|i| i.name.strip_prefix("localhost/") == Some(want.as_str()),
            &|i| !reference.contains('/') && i.name.rsplit('/').next() == Some(want.as_str()),
            &|i| {
                let hex = reference.strip_prefix("sha256:").unwrap_or(reference);
                hex.len() >= 6
                    && hex.bytes().all(|b| b.is_ascii_hexdigit())
                    && i.manifest
                        .strip_prefix("sha256:")
                        .is_some_and(|m| m.starts_with(hex))
            },
        ];
        for rule in rules {
            let hits: Vec<&ImageRecord> = images.iter().filter(|i| rule(i)).collect();
            match hits.len() {
                0 => continue,
                1 => return Ok(hits[0].clone()),
                _ => {
                    return Err(StoreError::Ambiguous {
                        reference: reference.to_string(),
                        store: self.root.clone(),
                        matches: hits
                            .iter()
                            .map(|i| i.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
            }
        }
        Err(StoreError::NoImage {
            reference: reference.to_string(),
            store: self.root.clone(),
        })
    }

    /// The layer directories of `image`, base first, each checked to be stored. A
    /// layer the image repeats is listed once, where it is topmost: overlayfs refuses
    /// a lower dir given twice, and the topmost copy shows all that the lower ones
    /// would.
    /// Errors: [`StoreError::MissingLayer`].
    pub fn image_layers(&self, image: &ImageRecord) -> Result<Vec<PathBuf>, StoreError> {
        image
            .layers
            .iter()
            .enumerate()
            .filter(|(i, d)| !image.layers[i + 1..].contains(d))
            .map(|(_, d)| {
                let hex = d.strip_prefix("sha256:").unwrap_or(d);
                if self.has_layer(hex) {
                    Ok(self.layer_fs(hex))
                } else {
                    Err(StoreError::MissingLayer {
                        image: image.name.clone(),
                        layer: d.clone(),
                        store: self.root.clone(),
                    })
                }
            })
            .collect()
    }

    /// Removes the images `references` name, then every layer no remaining image
    /// names. Refuses, removing nothing, when a container recorded in `state_root`
    /// uses one of those layers. Takes the store lock and the state root's lock while
    /// it decides, so no `create` can start using a layer being removed.
    ///
    /// Errors: [`StoreError::NoImage`], [`StoreError::InUse`], I/O.
    pub fn remove(&self, references: &[String], state_root: &Path) -> Result<Removed, StoreError> {
        let _lock = self.lock(true)?;
        let mut gone = BTreeSet::new();
        for r in references {
            gone.insert(self.find_image(r)?.name);
        }
        let images = self.images()?;
        let kept: BTreeSet<String> = images
            .iter()
            .filter(|i| !gone.contains(&i.name))
            .flat_map(|i| i.layers.iter())
            .map(|d| d.strip_prefix("sha256:").unwrap_or(d).to_string())
            .collect();
        let doomed: Vec<(String, LayerMeta)> = self
            .layers()?
            .into_iter()
            .filter(|(hex, _)| !kept.contains(hex))
            .collect();
        let _root_lock = if state_root.is_dir() {
            Some(
                crate::lifecycle::record::lock_root(state_root).map_err(|source| {
                    StoreError::Record {
                        root: state_root.to_path_buf(),
                        source,
                    }
                })?,
            )
        } else {
            None
        };
        let users = layer_users(state_root)?;
        let mut removed = Removed::default();
        for (hex, _) in &doomed {
            let fs = self.layer_fs(hex);
            let canon = std::fs::canonicalize(&fs).unwrap_or_else(|_| fs.clone());
            if let Some(id) = users.get(&canon) {
                return Err(StoreError::InUse {
                    layer: fs,
                    container: id.clone(),
                    root: state_root.to_path_buf(),
                });
            }
        }
        for name in &gone {
            let p = self.image_path(name);
            std::fs::remove_file(&p).map_err(crate::sys::fs::io_at(&p))?;
            removed.images.push(name.clone());
        }
        // Renamed out of layers/ under the locks, deleted after: a create that starts
        // later finds no half-deleted layer.
        let mut trash = Vec::new();
        for (hex, meta) in doomed {
            let t = self.tmp_dir(&format!("rm-{}", &hex[..12]));
            let src = self.layer_dir(&hex);
            std::fs::rename(&src, &t).map_err(crate::sys::fs::io_at(&src))?;
            trash.push(t);
            removed.layers.push(meta.diff_id);
            removed.bytes += meta.content_bytes;
        }
        drop(_root_lock);
        drop(_lock);
        for t in trash {
            std::fs::remove_dir_all(&t).map_err(crate::sys::fs::io_at(&t))?;
        }
        Ok(removed)
    }

    /// How many live containers in `state_root` use each stored layer, by diffID hex.
    pub fn layer_use(
        &self,
        state_root: &Path,
    ) -> Result<BTreeMap<String, Vec<String>>, StoreError> {
        let users = layer_users(state_root)?;
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for hex in self.layers()?.keys() {
            let fs = self.layer_fs(hex);
            let canon = std::fs::canonicalize(&fs).unwrap_or(fs);
            if let Some(id) = users.get(&canon) {
                out.entry(hex.clone()).or_default().push(id.clone());
            }
        }
        Ok(out)
    }
}

/// The layer directories used by the containers recorded in `state_root`
/// (canonical path → one container id). A container has a record from `create` until
/// `delete`, so stopped containers, whose rootfs is still mounted, count too.
fn layer_users(state_root: &Path) -> Result<BTreeMap<PathBuf, String>, StoreError> {
    let rec_err = |source| StoreError::Record {
        root: state_root.to_path_buf(),
        source,
    };
    let mut users = BTreeMap::new();
    for id in crate::lifecycle::record::list(state_root).map_err(rec_err)? {
        let Some(rec) = crate::lifecycle::record::Record::load(state_root, &id).map_err(rec_err)?
        else {
            continue;
        };
        if let crate::lifecycle::plan::RootfsPlan::Overlay { layers, .. } = rec.plan.rootfs {
            for l in layers {
                let canon = std::fs::canonicalize(&l).unwrap_or(l);
                users.entry(canon).or_insert_with(|| id.clone());
            }
        }
    }
    Ok(users)
}

/// Removes the directory when dropped, unless forgotten.
struct TmpDir(PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An image name as a file name: `[A-Za-z0-9._-]` kept, other bytes as `%XX`.
fn escape(name: &str) -> String {
    let mut s = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') && !s.is_empty() {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), StoreError> {
    let body = serde_json::to_vec_pretty(v).map_err(|e| StoreError::Corrupt {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    Ok(crate::sys::fs::write_atomic(path, &body)?)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, StoreError> {
    let b = std::fs::read(path).map_err(crate::sys::fs::io_at(path))?;
    serde_json::from_slice(&b).map_err(|e| StoreError::Corrupt {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, manifest_hex: &str, layers: &[&str]) -> ImageRecord {
        ImageRecord {
            name: name.into(),
            manifest: format!("sha256:{manifest_hex}"),
            config_digest: "sha256:00".into(),
            source: "/src".into(),
            layers: layers.iter().map(|l| format!("sha256:{l}")).collect(),
            config: serde_json::json!({}),
        }
    }

    #[test]
    fn names_escape_to_flat_file_names() {
        assert_eq!(
            escape("localhost/siloc/busybox:latest"),
            "localhost%2Fsiloc%2Fbusybox%3Alatest"
        );
        assert_eq!(escape(".hidden"), "%2Ehidden");
        assert_eq!(escape("a..b"), "a..b");
    }

    #[test]
    fn references_resolve_by_name_tag_short_name_and_digest() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path()).unwrap();
        s.save_image(&record("localhost/siloc/busybox:latest", "aaaaaa11", &[]))
            .unwrap();
        s.save_image(&record("localhost/siloc/debian:latest", "bbbbbb22", &[]))
            .unwrap();
        s.save_image(&record("other/debian:latest", "bbbbbb33", &[]))
            .unwrap();
        let name = |r: &str| s.find_image(r).map(|i| i.name);
        assert_eq!(
            name("localhost/siloc/busybox:latest").unwrap(),
            "localhost/siloc/busybox:latest"
        );
        assert_eq!(
            name("localhost/siloc/busybox").unwrap(),
            "localhost/siloc/busybox:latest"
        );
        assert_eq!(
            name("siloc/busybox").unwrap(),
            "localhost/siloc/busybox:latest"
        );
        assert_eq!(name("busybox").unwrap(), "localhost/siloc/busybox:latest");
        assert_eq!(
            name("sha256:aaaaaa").unwrap(),
            "localhost/siloc/busybox:latest"
        );
        assert_eq!(name("bbbbbb33").unwrap(), "other/debian:latest");
        let e = name("debian").unwrap_err().to_string();
        assert!(
            e.contains("ambiguous") && e.contains("other/debian:latest"),
            "{e}"
        );
        assert!(matches!(
            s.find_image("bbbbbb"),
            Err(StoreError::Ambiguous { .. })
        ));
        assert!(matches!(
            s.find_image("busybox:v2"),
            Err(StoreError::NoImage { .. })
        ));
        assert!(matches!(
            s.find_image("aaa"),
            Err(StoreError::NoImage { .. })
        ));
    }

    #[test]
    fn saving_the_same_record_twice_changes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path()).unwrap();
        let r = record("x:latest", "aa", &["11"]);
        assert!(s.save_image(&r).unwrap());
        assert!(!s.save_image(&r).unwrap());
        let mut r2 = r.clone();
        r2.manifest = "sha256:bb".into();
        assert!(s.save_image(&r2).unwrap());
        assert_eq!(s.images().unwrap(), vec![r2]);
    }

    fn fake_layer(s: &Store, hex: &str) {
        std::fs::create_dir_all(s.layer_fs(hex)).unwrap();
        let meta = LayerMeta {
            diff_id: format!("sha256:{hex}"),
            digest: format!("sha256:{hex}"),
            media_type: "application/vnd.oci.image.layer.v1.tar".into(),
            blob_bytes: 1,
            tar_bytes: 1,
            content_bytes: 10,
            entries: 1,
            unpacked: String::new(),
        };
        write_json(&s.layer_dir(hex).join(LAYER_META), &meta).unwrap();
    }

    #[test]
    fn a_layer_repeated_in_an_image_is_listed_once_where_it_is_topmost() {
        // Images repeat layers (two `RUN true` steps give two empty layers of one
        // diffID); overlayfs refuses a lower dir given twice.
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(d.path()).unwrap();
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        fake_layer(&s, &a);
        fake_layer(&s, &b);
        let img = record("rep:latest", "01", &[&a, &b, &a, &b, &a]);
        // [a b a b a] shows what [b a] shows: the topmost copy covers the lower ones
        assert_eq!(
            s.image_layers(&img).unwrap(),
            vec![s.layer_fs(&b), s.layer_fs(&a)]
        );
    }

    #[test]
    fn rm_keeps_shared_layers_and_collects_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("store")).unwrap();
        let (base, a, b, orphan) = (
            "0".repeat(64),
            "a".repeat(64),
            "b".repeat(64),
            "c".repeat(64),
        );
        for h in [&base, &a, &b, &orphan] {
            fake_layer(&s, h);
        }
        s.save_image(&record("one:latest", "01", &[&base, &a]))
            .unwrap();
        s.save_image(&record("two:latest", "02", &[&base, &b]))
            .unwrap();
        let state = d.path().join("state");
        let r = s.remove(&["one".to_string()], &state).unwrap();
        assert_eq!(r.images, vec!["one:latest"]);
        let mut gone = r.layers.clone();
        gone.sort();
        assert_eq!(
            gone,
            vec![format!("sha256:{a}"), format!("sha256:{orphan}")]
        );
        assert!(s.has_layer(&base) && s.has_layer(&b) && !s.has_layer(&a));
        assert_eq!(
            std::fs::read_dir(d.path().join("store/tmp"))
                .unwrap()
                .count(),
            0
        );
        // nothing is removed when one reference is unknown
        assert!(s.remove(&["two".into(), "nope".into()], &state).is_err());
        assert!(s.find_image("two").is_ok());
        // the state root is not created by a check
        assert!(!state.exists());
    }

    #[test]
    fn rm_refuses_a_layer_a_recorded_container_uses() {
        use crate::lifecycle::plan::{Plan, RootfsPlan, UpperPlan, UsernsPlan};
        use crate::lifecycle::record::{Prepared, Record};
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("store")).unwrap();
        let (base, a) = ("0".repeat(64), "a".repeat(64));
        fake_layer(&s, &base);
        fake_layer(&s, &a);
        s.save_image(&record("one:latest", "01", &[&base, &a]))
            .unwrap();
        let state = d.path().join("state");
        let rec = Record {
            id: "c1".into(),
            bundle: "/b".into(),
            rootfs: "/b/rootfs".into(),
            plan: Plan {
                userns: UsernsPlan::Host,
                rootfs: RootfsPlan::Overlay {
                    layers: vec![s.layer_fs(&base), s.layer_fs(&a)],
                    upper: UpperPlan::Ephemeral,
                },
                numa: Default::default(),
                io: Default::default(),
                volumes: Vec::new(),
            },
            prepared: Prepared::default(),
        };
        rec.create_new(&state).unwrap();
        let e = s.remove(&["one".into()], &state).unwrap_err();
        assert!(
            matches!(&e, StoreError::InUse { container, .. } if container == "c1"),
            "{e}"
        );
        assert!(e.to_string().contains("c1"), "{e}");
        assert!(s.find_image("one").is_ok() && s.has_layer(&a) && s.has_layer(&base));
        let used = s.layer_use(&state).unwrap();
        assert_eq!(used.get(&a), Some(&vec!["c1".to_string()]));
        crate::lifecycle::record::remove(&state, "c1").unwrap();
        s.remove(&["one".into()], &state).unwrap();
        assert!(s.layers().unwrap().is_empty());
    }
}
