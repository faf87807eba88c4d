//! Small OCI image layouts for tests, and the flattened view of an image.
//!
//! [`Tar`] builds a layer entry by entry (files, directories, symlinks, hard links,
//! devices, FIFOs, whiteouts, opaque markers, owners, modes, times, pax xattrs);
//! [`write_layout`] stores layers (gzip, zstd or uncompressed) and a config as an
//! image layout; [`flatten`] applies layer tars in order, the image-spec way, into a
//! map of what the image's root filesystem holds: the reference a merged rootfs is
//! compared with. Used by the integration tests and, through `#[path]`, by siloc's
//! unit tests, so it depends on crates only.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

/// The mtime entries get unless they say otherwise.
pub const MTIME: u64 = 1_600_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(Vec<u8>),
    Symlink(String),
    Link(String),
    Char(u32, u32),
    Block(u32, u32),
    Fifo,
}

/// One tar entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    pub kind: Kind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub mtime: u64,
    pub xattrs: Vec<(String, Vec<u8>)>,
}

impl Entry {
    fn new(path: &str, kind: Kind, mode: u32) -> Entry {
        Entry {
            path: path.to_string(),
            kind,
            mode,
            uid: 0,
            gid: 0,
            mtime: MTIME,
            xattrs: Vec::new(),
        }
    }
    pub fn dir(path: &str) -> Entry {
        Self::new(path, Kind::Dir, 0o755)
    }
    pub fn file(path: &str, data: &[u8]) -> Entry {
        Self::new(path, Kind::File(data.to_vec()), 0o644)
    }
    pub fn symlink(path: &str, target: &str) -> Entry {
        Self::new(path, Kind::Symlink(target.into()), 0o777)
    }
    pub fn link(path: &str, target: &str) -> Entry {
        Self::new(path, Kind::Link(target.into()), 0o644)
    }
    pub fn char_dev(path: &str, major: u32, minor: u32) -> Entry {
        Self::new(path, Kind::Char(major, minor), 0o666)
    }
    pub fn block_dev(path: &str, major: u32, minor: u32) -> Entry {
        Self::new(path, Kind::Block(major, minor), 0o660)
    }
    pub fn fifo(path: &str) -> Entry {
        Self::new(path, Kind::Fifo, 0o644)
    }
    /// `.wh.NAME` next to `path`: deletes `path` of lower layers.
    pub fn whiteout(path: &str) -> Entry {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let p = if dir.is_empty() {
            format!(".wh.{name}")
        } else {
            format!("{dir}/.wh.{name}")
        };
        Self::file(&p, b"")
    }
    /// `DIR/.wh..wh..opq`: hides lower layers' children of `dir`.
    pub fn opaque(dir: &str) -> Entry {
        Self::file(&format!("{dir}/.wh..wh..opq"), b"")
    }
    pub fn mode(mut self, mode: u32) -> Entry {
        self.mode = mode;
        self
    }
    pub fn owner(mut self, uid: u64, gid: u64) -> Entry {
        self.uid = uid;
        self.gid = gid;
        self
    }
    pub fn mtime(mut self, t: u64) -> Entry {
        self.mtime = t;
        self
    }
    pub fn xattr(mut self, name: &str, value: &[u8]) -> Entry {
        self.xattrs.push((name.into(), value.to_vec()));
        self
    }
}

/// A layer tar being built.
pub struct Tar {
    b: tar::Builder<Vec<u8>>,
}

impl Default for Tar {
    fn default() -> Self {
        Self::new()
    }
}

/// One pax record: `<len> <key>=<value>\n`, the length counting itself.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    let mut r = format!("{len} {key}=").into_bytes();
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

impl Tar {
    pub fn new() -> Tar {
        Tar {
            b: tar::Builder::new(Vec::new()),
        }
    }

    /// Adds entries in order.
    pub fn add(&mut self, entries: impl IntoIterator<Item = Entry>) -> &mut Tar {
        for e in entries {
            self.add_one(&e);
        }
        self
    }

    fn add_one(&mut self, e: &Entry) {
        if !e.xattrs.is_empty() {
            let mut data = Vec::new();
            for (k, v) in &e.xattrs {
                data.extend(pax_record(&format!("SCHILY.xattr.{k}"), v));
            }
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(tar::EntryType::XHeader);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            self.b
                .append_data(&mut h, "PaxHeaders/x", &data[..])
                .expect("pax header");
        }
        let mut h = tar::Header::new_ustar();
        h.set_mode(e.mode);
        h.set_uid(e.uid);
        h.set_gid(e.gid);
        h.set_mtime(e.mtime);
        h.set_size(0);
        let mut data: &[u8] = &[];
        match &e.kind {
            Kind::Dir => h.set_entry_type(tar::EntryType::Directory),
            Kind::File(d) => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(d.len() as u64);
                data = d;
            }
            Kind::Symlink(t) | Kind::Link(t) => {
                h.set_entry_type(if matches!(e.kind, Kind::Symlink(_)) {
                    tar::EntryType::Symlink
                } else {
                    tar::EntryType::Link
                });
                h.set_link_name(t).expect("link name");
            }
            Kind::Char(ma, mi) | Kind::Block(ma, mi) => {
                h.set_entry_type(if matches!(e.kind, Kind::Char(..)) {
                    tar::EntryType::Char
                } else {
                    tar::EntryType::Block
                });
                h.set_device_major(*ma).expect("major");
                h.set_device_minor(*mi).expect("minor");
            }
            Kind::Fifo => h.set_entry_type(tar::EntryType::Fifo),
        }
        self.b
            .append_data(&mut h, &e.path, data)
            .expect("tar entry");
    }

    /// Adds a directory tree from the host (owners, modes, times as they are there),
    /// entries named relative to `dir` (`./bin/sh`).
    pub fn add_tree(&mut self, dir: &Path) -> &mut Tar {
        self.b.follow_symlinks(false);
        self.b.append_dir_all(".", dir).expect("tar tree");
        self
    }

    pub fn bytes(mut self) -> Vec<u8> {
        self.b.finish().expect("finish tar");
        self.b.into_inner().expect("tar bytes")
    }
}

/// Layer compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comp {
    None,
    Gzip,
    Zstd,
}

impl Comp {
    pub fn media_type(self) -> &'static str {
        match self {
            Comp::None => "application/vnd.oci.image.layer.v1.tar",
            Comp::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
            Comp::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
        }
    }

    pub fn compress(self, tar: &[u8]) -> Vec<u8> {
        match self {
            Comp::None => tar.to_vec(),
            Comp::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(tar).expect("gzip");
                e.finish().expect("gzip")
            }
            Comp::Zstd => zstd::encode_all(tar, 3).expect("zstd"),
        }
    }

    fn from_media_type(mt: &str) -> Comp {
        if mt.ends_with("gzip") {
            Comp::Gzip
        } else if mt.ends_with("zstd") {
            Comp::Zstd
        } else {
            Comp::None
        }
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn put_blob(dir: &Path, data: &[u8]) -> (String, u64) {
    let hex = sha256_hex(data);
    std::fs::write(dir.join("blobs/sha256").join(&hex), data).expect("write blob");
    (format!("sha256:{hex}"), data.len() as u64)
}

/// Writes an image layout at `dir` with `layers` (uncompressed tar, compression) base
/// first, and `config` as the image config's `config` object. `ref_name` becomes the
/// manifest's `org.opencontainers.image.ref.name`. Returns the manifest digest.
pub fn write_layout(
    dir: &Path,
    layers: &[(Vec<u8>, Comp)],
    config: serde_json::Value,
    ref_name: &str,
) -> String {
    std::fs::create_dir_all(dir.join("blobs/sha256")).expect("layout dir");
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)
        .expect("oci-layout");
    let mut descs = Vec::new();
    let mut diffs = Vec::new();
    for (tar, comp) in layers {
        let (digest, size) = put_blob(dir, &comp.compress(tar));
        descs.push(
            serde_json::json!({"mediaType": comp.media_type(), "digest": digest, "size": size}),
        );
        diffs.push(format!("sha256:{}", sha256_hex(tar)));
    }
    let cfg = serde_json::json!({
        "architecture": "amd64", "os": "linux", "config": config,
        "rootfs": {"type": "layers", "diff_ids": diffs}
    });
    let (cd, cs) = put_blob(dir, cfg.to_string().as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": cs},
        "layers": descs
    });
    let (md, ms) = put_blob(dir, manifest.to_string().as_bytes());
    let index = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": md, "size": ms,
                       "annotations": {"org.opencontainers.image.ref.name": ref_name}}]
    });
    std::fs::write(dir.join("index.json"), index.to_string()).expect("index.json");
    md
}

/// The layer blobs of the (single) image in layout `dir`, base first, as readers of
/// the uncompressed tars.
pub fn layer_readers(dir: &Path) -> Vec<Box<dyn Read>> {
    let read_json = |p: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).expect("read json")).expect("json")
    };
    let blob = |d: &serde_json::Value| {
        dir.join("blobs/sha256")
            .join(d.as_str().expect("digest").trim_start_matches("sha256:"))
    };
    let index = read_json(&dir.join("index.json"));
    let manifest = read_json(&blob(&index["manifests"][0]["digest"]));
    manifest["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .map(|l| {
            let f = std::fs::File::open(blob(&l["digest"])).expect("open blob");
            let f = std::io::BufReader::new(f);
            let r: Box<dyn Read> =
                match Comp::from_media_type(l["mediaType"].as_str().unwrap_or("")) {
                    Comp::None => Box::new(f),
                    Comp::Gzip => Box::new(flate2::read::MultiGzDecoder::new(f)),
                    Comp::Zstd => Box::new(zstd::Decoder::new(f).expect("zstd")),
                };
            r
        })
        .collect()
}

/// One path of a flattened image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `d`, `f`, `l`, `c`, `b`, `p`.
    pub kind: char,
    /// Permission bits with set-ID and sticky bits (mode & 0o7777).
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    /// Regular files: size and sha256 of the content. Symlinks: the target.
    pub size: u64,
    pub content: String,
    /// Devices: (major, minor).
    pub rdev: (u32, u32),
    pub mtime: u64,
}

/// Applies layer tars (base first) the image-spec way: later entries replace earlier
/// ones, `.wh.NAME` deletes NAME and what is under it, `.wh..wh..opq` hides the lower
/// layers' children of its directory; a hard link is its target's node. Keys are
/// absolute paths without a trailing `/` (the root is `/`).
pub fn flatten(layers: Vec<Box<dyn Read>>) -> BTreeMap<String, Node> {
    let mut tree: BTreeMap<String, Node> = BTreeMap::new();
    let root = Node {
        kind: 'd',
        mode: 0o755,
        uid: 0,
        gid: 0,
        size: 0,
        content: String::new(),
        rdev: (0, 0),
        mtime: 0,
    };
    tree.insert("/".into(), root.clone());
    let remove_under = |tree: &mut BTreeMap<String, Node>, p: &str, itself: bool| {
        let prefix = if p == "/" {
            "/".to_string()
        } else {
            format!("{p}/")
        };
        tree.retain(|k, _| !(k.starts_with(&prefix) || (itself && k == p)));
    };
    for layer in layers {
        let mut a = tar::Archive::new(layer);
        // Whiteouts apply to the layers below, so collect this layer first.
        let mut added: Vec<(String, Node, Option<String>)> = Vec::new();
        for entry in a.entries().expect("entries") {
            let mut e = entry.expect("entry");
            let raw = String::from_utf8_lossy(&e.path_bytes()).into_owned();
            let path = norm(&raw);
            let name = path.rsplit('/').next().unwrap_or("").to_string();
            let parent = parent_of(&path);
            if name == ".wh..wh..opq" {
                remove_under(&mut tree, &parent, false);
                continue;
            }
            if let Some(target) = name.strip_prefix(".wh.") {
                let victim = if parent == "/" {
                    format!("/{target}")
                } else {
                    format!("{parent}/{target}")
                };
                remove_under(&mut tree, &victim, true);
                continue;
            }
            let h = e.header().clone();
            let mut node = Node {
                kind: 'f',
                mode: h.mode().expect("mode") & 0o7777,
                uid: h.uid().expect("uid"),
                gid: h.gid().expect("gid"),
                size: 0,
                content: String::new(),
                rdev: (0, 0),
                mtime: h.mtime().expect("mtime"),
            };
            let mut link = None;
            match h.entry_type() {
                tar::EntryType::Directory => node.kind = 'd',
                tar::EntryType::Symlink => {
                    node.kind = 'l';
                    node.content =
                        String::from_utf8_lossy(&e.link_name_bytes().expect("target")).into_owned();
                }
                tar::EntryType::Link => {
                    link = Some(norm(&String::from_utf8_lossy(
                        &e.link_name_bytes().expect("target"),
                    )));
                }
                tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                    node.kind = match h.entry_type() {
                        tar::EntryType::Char => 'c',
                        tar::EntryType::Block => 'b',
                        _ => 'p',
                    };
                    node.rdev = (
                        h.device_major().ok().flatten().unwrap_or(0),
                        h.device_minor().ok().flatten().unwrap_or(0),
                    );
                }
                tar::EntryType::XGlobalHeader => continue,
                _ => {
                    let mut data = Vec::new();
                    e.read_to_end(&mut data).expect("content");
                    node.size = data.len() as u64;
                    node.content = sha256_hex(&data);
                }
            }
            added.push((path, node, link));
        }
        for (path, node, link) in added {
            let node = match link {
                Some(t) => tree.get(&t).cloned().expect("hard link target"),
                None => node,
            };
            // Implicit parents, as unpackers create them.
            let mut p = parent_of(&path);
            let mut missing = Vec::new();
            while !tree.contains_key(&p) {
                missing.push(p.clone());
                p = parent_of(&p);
            }
            for m in missing {
                tree.insert(
                    m,
                    Node {
                        mtime: 0,
                        ..root.clone()
                    },
                );
            }
            match tree.get(&path) {
                Some(old) if old.kind == 'd' && node.kind == 'd' => {}
                Some(old) if old.kind == 'd' => remove_under(&mut tree, &path, false),
                _ => {}
            }
            tree.insert(path, node);
        }
    }
    tree
}

fn norm(raw: &str) -> String {
    let parts: Vec<&str> = raw
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    format!("/{}", parts.join("/"))
}

fn parent_of(p: &str) -> String {
    match p.rsplit_once('/') {
        Some(("", _)) | None => "/".into(),
        Some((d, _)) => d.into(),
    }
}

/// The shell command that lists a root filesystem in the form [`parse_listing`]
/// reads: one `stat` line per path (busybox or coreutils), then sha256sums.
pub const LIST_SCRIPT: &str = "find / -xdev -exec stat -c 'S|%n|%f|%u|%g|%s|%Y|%t|%T|%h' {} + \
     && find / -xdev -type f -exec sha256sum {} + \
     && find / -xdev -type l -exec sh -c 'for l; do echo \"L|$l|$(readlink \"$l\")\"; done' sh {} +";

/// Parses [`LIST_SCRIPT`]'s output into nodes (and the link count of each path).
pub fn parse_listing(out: &str) -> (BTreeMap<String, Node>, BTreeMap<String, u64>) {
    let mut tree = BTreeMap::new();
    let mut nlink = BTreeMap::new();
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("S|") {
            let f: Vec<&str> = rest.split('|').collect();
            let raw = u32::from_str_radix(f[1], 16).expect("mode");
            let kind = match raw & 0o170000 {
                0o040000 => 'd',
                0o100000 => 'f',
                0o120000 => 'l',
                0o020000 => 'c',
                0o060000 => 'b',
                0o010000 => 'p',
                _ => '?',
            };
            let hex = |s: &str| u32::from_str_radix(s, 16).unwrap_or(0);
            let is_dev = kind == 'c' || kind == 'b';
            tree.insert(
                f[0].to_string(),
                Node {
                    kind,
                    mode: raw & 0o7777,
                    uid: f[2].parse().expect("uid"),
                    gid: f[3].parse().expect("gid"),
                    size: if kind == 'f' {
                        f[4].parse().expect("size")
                    } else {
                        0
                    },
                    content: String::new(),
                    rdev: if is_dev {
                        (hex(f[6]), hex(f[7]))
                    } else {
                        (0, 0)
                    },
                    mtime: f[5].parse().expect("mtime"),
                },
            );
            nlink.insert(f[0].to_string(), f[8].parse().unwrap_or(0));
        } else if let Some(rest) = line.strip_prefix("L|") {
            let (p, t) = rest.split_once('|').expect("link line");
            if let Some(n) = tree.get_mut(p) {
                n.content = t.to_string();
            }
        } else if let Some((sum, p)) = line.split_once("  ")
            && let Some(n) = tree.get_mut(p)
        {
            n.content = sum.to_string();
        }
    }
    (tree, nlink)
}

/// Differences between the flattened image and a listing, ignoring the root and the
/// runtime's mount points (`/proc`, `/sys`, `/dev` and below), and directory mtimes
/// (overlayfs shows the topmost layer's directory, which creating entries changes).
pub fn differences(image: &BTreeMap<String, Node>, seen: &BTreeMap<String, Node>) -> Vec<String> {
    let skip = |p: &str| {
        p == "/"
            || ["/proc", "/sys", "/dev"]
                .iter()
                .any(|m| p == *m || p.starts_with(&format!("{m}/")))
    };
    let mut diffs = Vec::new();
    for (p, want) in image.iter().filter(|(p, _)| !skip(p)) {
        match seen.get(p) {
            None => diffs.push(format!("{p}: in the image, missing in the container")),
            Some(got) => {
                let mut want = want.clone();
                let mut got = got.clone();
                if want.kind == 'd' {
                    want.mtime = 0;
                    got.mtime = 0;
                }
                if want != got {
                    diffs.push(format!("{p}: image {want:?}, container {got:?}"));
                }
            }
        }
    }
    for p in seen.keys().filter(|p| !skip(p) && !image.contains_key(*p)) {
        diffs.push(format!("{p}: in the container, not in the image"));
    }
    diffs
}
