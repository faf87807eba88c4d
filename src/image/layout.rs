//! Reading an OCI image layout (image-spec `image-layout.md`): `oci-layout`,
//! `index.json`, and the manifest, config and layer blobs under `blobs/<alg>/<hex>`,
//! as skopeo, umoci, buildah and `podman save --format oci-dir` write it.
//!
//! Every JSON blob read is checked against its descriptor's digest and size; layer
//! blobs are checked while they are unpacked (see [`super::unpack`]).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use oci_spec::image::{
    Arch, Descriptor, ImageConfiguration, ImageIndex, ImageManifest, MediaType, Os,
};

use super::digest;

/// The annotation naming a manifest in `index.json` (image-spec `annotations.md`).
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// Errors reading a layout; each names the file or the descriptor at fault.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error(transparent)]
    Io(#[from] crate::sys::fs::IoAt),
    #[error("{path}: not an OCI image layout (no oci-layout file)")]
    NotLayout { path: PathBuf },
    #[error("{path}: {msg}")]
    Json { path: PathBuf, msg: String },
    #[error("{layout}: no manifest is tagged {tag:?} (tags: {available})")]
    NoTag {
        layout: PathBuf,
        tag: String,
        available: String,
    },
    #[error(
        "{layout}: index.json lists {count} manifests; name one as {layout}:TAG (tags: {available})"
    )]
    Ambiguous {
        layout: PathBuf,
        count: usize,
        available: String,
    },
    #[error("{layout}: no manifest for {os}/{arch} in index {index}")]
    NoPlatform {
        layout: PathBuf,
        index: String,
        os: String,
        arch: String,
    },
    #[error("{path}: digest mismatch: the descriptor says {expected}, the content is {actual}")]
    Digest {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("{path}: size mismatch: the descriptor says {expected} bytes, the file has {actual}")]
    Size {
        path: PathBuf,
        expected: u64,
        actual: u64,
    },
    #[error("{layout}: {what}: {msg}")]
    Unsupported {
        layout: PathBuf,
        what: String,
        msg: String,
    },
}

/// How a layer blob is compressed, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// From a layer media type: OCI `...tar`, `...tar+gzip`, `...tar+zstd` (and their
    /// non-distributable forms), Docker's `...rootfs.diff.tar(.gzip)`. `None` for other
    /// types (image-spec `layer.md` says to refuse unknown media types).
    pub fn from_media_type(mt: &str) -> Option<Compression> {
        let docker = "application/vnd.docker.image.rootfs.";
        let oci = mt.starts_with("application/vnd.oci.image.layer.");
        if mt.ends_with(".tar+gzip") && oci || mt == format!("{docker}diff.tar.gzip") {
            Some(Compression::Gzip)
        } else if mt.ends_with(".tar+zstd") && oci {
            Some(Compression::Zstd)
        } else if mt.ends_with(".tar") && oci || mt == format!("{docker}diff.tar") {
            Some(Compression::None)
        } else {
            None
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }
}

/// `DIR[:TAG]` from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutRef {
    pub dir: PathBuf,
    pub tag: Option<String>,
}

impl LayoutRef {
    /// Splits `DIR[:TAG]`. A path that is itself a layout directory wins over a split,
    /// so directories with `:` in their name still work.
    pub fn parse(arg: &str) -> LayoutRef {
        let whole = Path::new(arg);
        if whole.join("oci-layout").exists() || !arg.contains(':') {
            return LayoutRef {
                dir: whole.to_path_buf(),
                tag: None,
            };
        }
        // A tag is after the first ':' that follows the layout directory; tags that
        // are full references (`localhost/x:latest`) contain ':' themselves.
        let mut at = 0;
        while let Some(i) = arg[at..].find(':') {
            let (d, t) = (&arg[..at + i], &arg[at + i + 1..]);
            if Path::new(d).join("oci-layout").exists() {
                return LayoutRef {
                    dir: d.into(),
                    tag: Some(t.to_string()),
                };
            }
            at += i + 1;
        }
        let (d, t) = arg.rsplit_once(':').unwrap_or((arg, ""));
        LayoutRef {
            dir: d.into(),
            tag: (!t.is_empty()).then(|| t.to_string()),
        }
    }
}

/// One layer of an image, as its manifest and config describe it.
#[derive(Debug, Clone)]
pub struct LayerRef {
    /// Hex sha256 of the blob (compressed bytes).
    pub digest: String,
    /// Hex sha256 of the uncompressed tar: the store's key.
    pub diff_id: String,
    pub media_type: String,
    pub compression: Compression,
    /// Blob size in bytes.
    pub size: u64,
    pub blob: PathBuf,
}

/// An image found in a layout: the chosen manifest, its config and its layers.
#[derive(Debug, Clone)]
pub struct Image {
    pub layout: PathBuf,
    /// The ref name the manifest carries (`org.opencontainers.image.ref.name`), if any.
    pub ref_name: Option<String>,
    /// `sha256:<hex>` of the manifest.
    pub manifest_digest: String,
    /// `sha256:<hex>` of the config.
    pub config_digest: String,
    /// The config blob as JSON, unknown fields included.
    pub config_json: serde_json::Value,
    /// Base first (manifest order).
    pub layers: Vec<LayerRef>,
}

impl Image {
    /// The name `siloc image` gives the image when none is asked for: the ref name
    /// when it is a full reference (`localhost/siloc/busybox:latest`), else
    /// `<layout dir name>:<ref name or "latest">`.
    pub fn default_name(&self) -> String {
        match &self.ref_name {
            Some(r) if r.contains(':') || r.contains('/') => r.clone(),
            r => {
                let base = std::fs::canonicalize(&self.layout)
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| "image".into());
                format!("{base}:{}", r.as_deref().unwrap_or("latest"))
            }
        }
    }
}

/// Where a descriptor's blob lives; only sha256 blobs are supported.
fn blob_path(layout: &Path, d: &Descriptor) -> Result<(PathBuf, String), LayoutError> {
    let full = d.digest().to_string();
    let hex = digest::sha256_hex(&full).ok_or_else(|| LayoutError::Unsupported {
        layout: layout.to_path_buf(),
        what: format!("digest {full}"),
        msg: "only sha256 digests are supported".into(),
    })?;
    Ok((layout.join("blobs/sha256").join(hex), hex.to_string()))
}

/// Opens a file of a layout (symlinks followed) for reading, with its size; anything
/// but a regular file is an error: a FIFO would block the open and a device (a blob
/// linked to /dev/zero) would never end.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<(File, u64)> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((f, m.len()))
}

/// Reads a JSON blob and checks it against its descriptor.
fn read_blob(layout: &Path, d: &Descriptor) -> Result<(PathBuf, Vec<u8>), LayoutError> {
    let (path, hex) = blob_path(layout, d)?;
    let (f, len) = open_regular(&path).map_err(crate::sys::fs::io_at(&path))?;
    // The size first: a blob is read whole, and a hostile one may be huge.
    if len != d.size() {
        return Err(LayoutError::Size {
            path,
            expected: d.size(),
            actual: len,
        });
    }
    let mut data = Vec::new();
    f.take(len)
        .read_to_end(&mut data)
        .map_err(crate::sys::fs::io_at(&path))?;
    let actual = digest::sha256_of(&data);
    if actual != hex {
        return Err(LayoutError::Digest {
            path,
            expected: format!("sha256:{hex}"),
            actual: format!("sha256:{actual}"),
        });
    }
    Ok((path, data))
}

/// Parses a JSON file of the layout; the error says what is wrong and where
/// (oci-spec's own readers only say "serde failed").
fn parse<T: for<'de> serde::Deserialize<'de>>(path: &Path, data: &[u8]) -> Result<T, LayoutError> {
    serde_json::from_slice(data).map_err(|e| LayoutError::Json {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })
}

fn ref_name(d: &Descriptor) -> Option<String> {
    d.annotations().as_ref()?.get(REF_NAME).cloned()
}

fn tags(ds: &[Descriptor]) -> String {
    let t: Vec<String> = ds.iter().filter_map(ref_name).collect();
    if t.is_empty() {
        "none".into()
    } else {
        t.join(", ")
    }
}

/// Whether ref name `name` answers to `tag`: equal, or a full reference ending in
/// `:tag`.
fn tag_matches(name: &str, tag: &str) -> bool {
    name == tag
        || name
            .rsplit_once(':')
            .is_some_and(|(repo, t)| t == tag && !repo.is_empty())
}

/// Opens the image `r` names. Errors: [`LayoutError`], naming the file at fault.
pub fn open(r: &LayoutRef) -> Result<Image, LayoutError> {
    let layout = r.dir.as_path();
    if !layout.join("oci-layout").is_file() {
        return Err(LayoutError::NotLayout {
            path: layout.to_path_buf(),
        });
    }
    let index_path = layout.join("index.json");
    let (f, len) = open_regular(&index_path).map_err(crate::sys::fs::io_at(&index_path))?;
    let mut data = Vec::new();
    f.take(len)
        .read_to_end(&mut data)
        .map_err(crate::sys::fs::io_at(&index_path))?;
    let index: ImageIndex = parse(&index_path, &data)?;
    let manifests = index.manifests();
    let chosen = match &r.tag {
        Some(tag) => manifests
            .iter()
            .find(|d| ref_name(d).as_deref() == Some(tag))
            .or_else(|| {
                manifests
                    .iter()
                    .find(|d| ref_name(d).is_some_and(|n| tag_matches(&n, tag)))
            })
            .ok_or_else(|| LayoutError::NoTag {
                layout: layout.to_path_buf(),
                tag: tag.clone(),
                available: tags(manifests),
            })?,
        None if manifests.len() == 1 => &manifests[0],
        None => manifests
            .iter()
            .find(|d| ref_name(d).is_some_and(|n| tag_matches(&n, "latest")))
            .ok_or_else(|| LayoutError::Ambiguous {
                layout: layout.to_path_buf(),
                count: manifests.len(),
                available: tags(manifests),
            })?,
    };
    let ref_name = ref_name(chosen);
    let manifest_desc = resolve_platform(layout, chosen.clone())?;
    let (mpath, mdata) = read_blob(layout, &manifest_desc)?;
    let manifest: ImageManifest = parse(&mpath, &mdata)?;
    let (cpath, cdata) = read_blob(layout, manifest.config())?;
    let config: ImageConfiguration = parse(&cpath, &cdata)?;
    let config_json: serde_json::Value =
        serde_json::from_slice(&cdata).map_err(|e| LayoutError::Json {
            path: cpath.clone(),
            msg: e.to_string(),
        })?;
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != manifest.layers().len() {
        return Err(LayoutError::Json {
            path: cpath,
            msg: format!(
                "rootfs.diff_ids lists {} layers, the manifest {}",
                diff_ids.len(),
                manifest.layers().len()
            ),
        });
    }
    let mut layers = Vec::with_capacity(diff_ids.len());
    for (d, diff) in manifest.layers().iter().zip(diff_ids) {
        let (blob, hex) = blob_path(layout, d)?;
        let media_type = d.media_type().to_string();
        let compression =
            Compression::from_media_type(&media_type).ok_or_else(|| LayoutError::Unsupported {
                layout: layout.to_path_buf(),
                what: format!("layer sha256:{hex}"),
                msg: format!("media type {media_type} is not a tar layer siloc can unpack"),
            })?;
        let diff_id = digest::sha256_hex(diff).ok_or_else(|| LayoutError::Json {
            path: cpath.clone(),
            msg: format!("rootfs.diff_ids: {diff:?} is not a sha256 digest"),
        })?;
        layers.push(LayerRef {
            digest: hex,
            diff_id: diff_id.to_string(),
            media_type,
            compression,
            size: d.size(),
            blob,
        });
    }
    Ok(Image {
        layout: layout.to_path_buf(),
        ref_name,
        manifest_digest: manifest_desc.digest().to_string(),
        config_digest: manifest.config().digest().to_string(),
        config_json,
        layers,
    })
}

/// Follows a nested index (a multi-platform image) to this host's manifest.
fn resolve_platform(layout: &Path, mut d: Descriptor) -> Result<Descriptor, LayoutError> {
    for _ in 0..8 {
        if *d.media_type() != MediaType::ImageIndex {
            return Ok(d);
        }
        let (path, data) = read_blob(layout, &d)?;
        let index: ImageIndex = parse(&path, &data)?;
        let (os, arch) = (Os::default(), Arch::default());
        d = index
            .manifests()
            .iter()
            .find(|m| {
                m.platform()
                    .as_ref()
                    .is_some_and(|p| *p.os() == os && *p.architecture() == arch)
            })
            .cloned()
            .ok_or_else(|| LayoutError::NoPlatform {
                layout: layout.to_path_buf(),
                index: d.digest().to_string(),
                os: os.to_string(),
                arch: arch.to_string(),
            })?;
    }
    Err(LayoutError::Unsupported {
        layout: layout.to_path_buf(),
        what: "index.json".into(),
        msg: "image indexes nested more than 8 deep".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types() {
        let c = Compression::from_media_type;
        assert_eq!(
            c("application/vnd.oci.image.layer.v1.tar+gzip"),
            Some(Compression::Gzip)
        );
        assert_eq!(
            c("application/vnd.oci.image.layer.v1.tar+zstd"),
            Some(Compression::Zstd)
        );
        assert_eq!(
            c("application/vnd.oci.image.layer.v1.tar"),
            Some(Compression::None)
        );
        assert_eq!(
            c("application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"),
            Some(Compression::Gzip)
        );
        assert_eq!(
            c("application/vnd.docker.image.rootfs.diff.tar.gzip"),
            Some(Compression::Gzip)
        );
        assert_eq!(c("application/vnd.oci.image.config.v1+json"), None);
        assert_eq!(c("application/x-tar+bzip2"), None);
    }

    #[test]
    fn tags_match_plain_and_full_references() {
        assert!(tag_matches("latest", "latest"));
        assert!(tag_matches("localhost/siloc/busybox:latest", "latest"));
        assert!(tag_matches(
            "localhost/siloc/busybox:latest",
            "localhost/siloc/busybox:latest"
        ));
        assert!(!tag_matches("v1", "latest"));
        assert!(!tag_matches(":latest", "latest"));
    }

    #[test]
    fn layout_refs_split_after_the_layout_dir() {
        let d = tempfile::tempdir().unwrap();
        let lay = d.path().join("img");
        std::fs::create_dir(&lay).unwrap();
        std::fs::write(lay.join("oci-layout"), "{}").unwrap();
        let s = lay.display().to_string();
        assert_eq!(LayoutRef::parse(&s).tag, None);
        assert_eq!(
            LayoutRef::parse(&format!("{s}:v1")),
            LayoutRef {
                dir: lay.clone(),
                tag: Some("v1".into())
            }
        );
        assert_eq!(
            LayoutRef::parse(&format!("{s}:localhost/x:latest"))
                .tag
                .as_deref(),
            Some("localhost/x:latest")
        );
        // not a layout: split at the last ':' so the error names the directory
        assert_eq!(
            LayoutRef::parse("/nonexistent:v2"),
            LayoutRef {
                dir: "/nonexistent".into(),
                tag: Some("v2".into())
            }
        );
    }
}
