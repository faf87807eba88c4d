//! Unpacking one layer blob into a directory in the form overlayfs reads as a lower
//! layer: entries created as the tar says (regular files, directories, symlinks, hard
//! links, device nodes and FIFOs, with owners, modes, xattrs and times), whiteouts
//! converted ([`super::whiteout`]), and the blob's digest and diffID computed on the
//! way (image-spec `layer.md`, `config.md` "rootfs.diff_ids").
//!
//! The target directory is private to the unpack (the store's temporary dir), so
//! entries are created by path; a tar path never leaves it: `..` is refused and no
//! parent component may be a symlink.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::sys::stat::{Mode, SFlag, UtimensatFlags, makedev, mknod, utimensat};
use nix::sys::time::TimeSpec;
use tar::EntryType;

use super::digest::HashReader;
use super::layout::Compression;
use super::whiteout::{self, Marker};

/// Errors unpacking a layer; each names the layer blob, and the entry when one is at
/// fault.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("layer {blob}: {source}")]
    Read {
        blob: PathBuf,
        source: std::io::Error,
    },
    #[error("layer {blob}: entry {entry}: {msg}")]
    Entry {
        blob: PathBuf,
        entry: String,
        msg: String,
    },
    #[error("layer {blob}: {path}: {source}")]
    Write {
        blob: PathBuf,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What unpacking one layer produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unpacked {
    /// Hex sha256 of the blob as read (the manifest's layer digest).
    pub digest: String,
    /// Hex sha256 of the uncompressed tar (the config's diffID).
    pub diff_id: String,
    /// Bytes of the blob.
    pub blob_bytes: u64,
    /// Bytes of the uncompressed tar.
    pub tar_bytes: u64,
    /// Entries applied (whiteouts included).
    pub entries: u64,
    /// Bytes of regular-file content written.
    pub content_bytes: u64,
    pub whiteouts: u64,
    pub opaque_dirs: u64,
}

/// Unpacks the layer blob at `blob` (compressed as `comp`) into the existing empty
/// directory `dest`; `progress(n)` is called as blob bytes are read. Returns the
/// digests for the caller to verify: this function trusts nothing and checks nothing
/// but the tar's own structure.
///
/// Needs root (CAP_CHOWN, CAP_MKNOD, CAP_SYS_ADMIN for `trusted.overlay.opaque`).
/// Errors: [`UnpackError`]; `dest` is then left half-filled for the caller to remove.
pub fn unpack_layer(
    blob: &Path,
    comp: Compression,
    dest: &Path,
    progress: impl FnMut(u64) + Send + 'static,
) -> Result<Unpacked, UnpackError> {
    let read_err = |source| UnpackError::Read {
        blob: blob.to_path_buf(),
        source,
    };
    let (file, _) = super::layout::open_regular(blob).map_err(read_err)?;
    // The blob's digest covers every byte of the file, read through this hasher.
    let raw = BufReader::with_capacity(1 << 20, HashReader::new(file).with_progress(progress));
    let mut ctx = Ctx::new(blob, dest);
    let raw = match comp {
        Compression::None => ctx.run(raw)?,
        Compression::Gzip => ctx
            .run(flate2::bufread::MultiGzDecoder::new(raw))?
            .into_inner(),
        Compression::Zstd => {
            let d = zstd::stream::read::Decoder::with_buffer(raw).map_err(read_err)?;
            ctx.run(d)?.finish()
        }
    };
    let mut hashed = raw.into_inner();
    hashed.drain().map_err(read_err)?;
    let (digest, blob_bytes, _) = hashed.finish();
    ctx.out.digest = digest;
    ctx.out.blob_bytes = blob_bytes;
    Ok(ctx.out)
}

/// Times to set on a directory once all its entries exist (creating entries changes
/// a directory's mtime).
struct DirTimes {
    path: PathBuf,
    atime: TimeSpec,
    mtime: TimeSpec,
}

/// The state of one unpack.
struct Ctx<'a> {
    blob: &'a Path,
    dest: &'a Path,
    out: Unpacked,
    dirs: Vec<DirTimes>,
    buf: Vec<u8>,
}

/// What the pax headers (and the ustar header) say about an entry's metadata.
struct Meta {
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: TimeSpec,
    atime: TimeSpec,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl<'a> Ctx<'a> {
    fn new(blob: &'a Path, dest: &'a Path) -> Self {
        Ctx {
            blob,
            dest,
            out: Unpacked::default(),
            dirs: Vec::new(),
            buf: vec![0; 1 << 17],
        }
    }

    fn entry_err(&self, entry: &str, msg: impl Into<String>) -> UnpackError {
        UnpackError::Entry {
            blob: self.blob.to_path_buf(),
            entry: entry.to_string(),
            msg: msg.into(),
        }
    }

    fn write_err(&self, path: &Path) -> impl Fn(std::io::Error) -> UnpackError + '_ {
        let path = path.to_path_buf();
        move |source| UnpackError::Write {
            blob: self.blob.to_path_buf(),
            path: path.clone(),
            source,
        }
    }

    /// Reads the tar from `decoded` to its end, applying each entry; returns the
    /// decoder so the caller can drain the blob behind it.
    fn run<D: Read>(&mut self, decoded: D) -> Result<D, UnpackError> {
        let read_err = |source| UnpackError::Read {
            blob: self.blob.to_path_buf(),
            source,
        };
        let mut archive = tar::Archive::new(HashReader::new(decoded));
        for entry in archive.entries().map_err(read_err)? {
            let mut entry = entry.map_err(read_err)?;
            self.apply(&mut entry)?;
            self.out.entries += 1;
        }
        for d in self.dirs.drain(..) {
            utimensat(
                None,
                &d.path,
                &d.atime,
                &d.mtime,
                UtimensatFlags::NoFollowSymlink,
            )
            .map_err(|e| UnpackError::Write {
                blob: self.blob.to_path_buf(),
                path: d.path.clone(),
                source: e.into(),
            })?;
        }
        // The diffID covers the whole tar, including the padding after the last entry.
        let mut tar = archive.into_inner();
        tar.drain().map_err(read_err)?;
        let (diff_id, tar_bytes, decoded) = tar.finish();
        self.out.diff_id = diff_id;
        self.out.tar_bytes = tar_bytes;
        Ok(decoded)
    }

    fn apply<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), UnpackError> {
        let raw = entry.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw).into_owned();
        let kind = entry.header().entry_type();
        if matches!(kind, EntryType::XGlobalHeader) {
            return Ok(());
        }
        let rel = normalize(&raw).map_err(|m| self.entry_err(&shown, m))?;
        let meta = self.meta(entry, &shown)?;
        let name = rel.last().copied().unwrap_or(b".");
        match whiteout::classify(name) {
            Marker::Opaque => {
                let dir = self.ensure_parents(&rel, &shown)?;
                whiteout::make_opaque(&dir).map_err(self.write_err(&dir))?;
                self.out.opaque_dirs += 1;
                return Ok(());
            }
            Marker::Whiteout(target) => {
                // A whiteout applies to lower layers only (layer.md): what this layer
                // itself put at the path stays, a directory turning opaque instead.
                let parent = self.ensure_parents(&rel, &shown)?;
                let path = parent.join(OsStr::from_bytes(target));
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => {
                        whiteout::make_opaque(&path).map_err(self.write_err(&path))?;
                    }
                    Ok(_) => {}
                    Err(_) => {
                        whiteout::make_whiteout(&path).map_err(self.write_err(&path))?;
                    }
                }
                self.out.whiteouts += 1;
                return Ok(());
            }
            Marker::Meta => {
                tracing::debug!(entry = shown, "AUFS metadata entry skipped");
                return Ok(());
            }
            Marker::Invalid => {
                return Err(self.entry_err(&shown, "a whiteout must name a file (.wh.NAME)"));
            }
            Marker::None => {}
        }
        if rel.is_empty() {
            // The layer's root directory ("./"): only its metadata applies.
            if !kind.is_dir() {
                return Err(self.entry_err(&shown, "the layer root must be a directory"));
            }
            let root = self.dest.to_path_buf();
            return self.finish_dir(&root, &meta);
        }
        let parent = self.ensure_parents(&rel, &shown)?;
        let path = parent.join(OsStr::from_bytes(name));
        match kind {
            EntryType::Directory => {
                match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => {}
                    Ok(m) if whiteout::is_whiteout(&m) => self.dir_over_whiteout(&path)?,
                    Ok(_) => {
                        self.remove_existing(&path)?;
                        self.mkdir(&path)?;
                    }
                    Err(_) => self.mkdir(&path)?,
                }
                self.finish_dir(&path, &meta)
            }
            EntryType::Regular | EntryType::Continuous | EntryType::GNUSparse => {
                self.remove_existing(&path)?;
                let mut f = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(&path)
                    .map_err(self.write_err(&path))?;
                let n = self.copy(entry, &mut f, &path)?;
                self.out.content_bytes += n;
                std::os::unix::fs::fchown(&f, Some(id(meta.uid)), Some(id(meta.gid)))
                    .map_err(self.write_err(&path))?;
                // After chown, which clears set-user-ID and set-group-ID bits.
                f.set_permissions(std::fs::Permissions::from_mode(meta.mode))
                    .map_err(self.write_err(&path))?;
                self.set_xattrs(&path, &meta, &shown)?;
                nix::sys::stat::futimens(
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    &meta.atime,
                    &meta.mtime,
                )
                .map_err(|e| self.write_err(&path)(e.into()))
            }
            EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| self.entry_err(&shown, "symlink without a target"))?
                    .into_owned();
                self.remove_existing(&path)?;
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), &path)
                    .map_err(self.write_err(&path))?;
                std::os::unix::fs::lchown(&path, Some(id(meta.uid)), Some(id(meta.gid)))
                    .map_err(self.write_err(&path))?;
                self.set_xattrs(&path, &meta, &shown)?;
                self.set_times(&path, &meta)
            }
            EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| self.entry_err(&shown, "hard link without a target"))?
                    .into_owned();
                let trel = normalize(&target).map_err(|m| self.entry_err(&shown, m))?;
                let tpath = self.dest.join(join(&trel));
                self.check_no_symlink_parents(&trel, &shown)?;
                match std::fs::symlink_metadata(&tpath) {
                    Ok(m) if !m.is_dir() => {}
                    _ => {
                        return Err(self.entry_err(
                            &shown,
                            format!(
                                "hard link to {} which is not a file earlier in this layer",
                                String::from_utf8_lossy(&target)
                            ),
                        ));
                    }
                }
                if tpath == path {
                    return Ok(());
                }
                self.remove_existing(&path)?;
                std::fs::hard_link(&tpath, &path).map_err(self.write_err(&path))
            }
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                let h = entry.header();
                let dev = |v: std::io::Result<Option<u32>>| v.ok().flatten().unwrap_or(0);
                let (major, minor) = (dev(h.device_major()), dev(h.device_minor()));
                let sflag = match kind {
                    EntryType::Char => SFlag::S_IFCHR,
                    EntryType::Block => SFlag::S_IFBLK,
                    _ => SFlag::S_IFIFO,
                };
                self.remove_existing(&path)?;
                mknod(
                    &path,
                    sflag,
                    Mode::from_bits_truncate(meta.mode),
                    makedev(major.into(), minor.into()),
                )
                .map_err(|e| self.write_err(&path)(e.into()))?;
                std::os::unix::fs::lchown(&path, Some(id(meta.uid)), Some(id(meta.gid)))
                    .map_err(self.write_err(&path))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(meta.mode))
                    .map_err(self.write_err(&path))?;
                self.set_xattrs(&path, &meta, &shown)?;
                self.set_times(&path, &meta)
            }
            other => Err(self.entry_err(&shown, format!("unsupported tar entry type {other:?}"))),
        }
    }

    /// The entry's metadata: ustar fields, overridden by pax records (`uid`, `gid`,
    /// `mtime`, `atime` with sub-second parts) and pax `SCHILY.xattr.*` records.
    fn meta<R: Read>(
        &self,
        entry: &mut tar::Entry<'_, R>,
        shown: &str,
    ) -> Result<Meta, UnpackError> {
        let h = entry.header();
        let bad = |f: &str, e: std::io::Error| self.entry_err(shown, format!("{f}: {e}"));
        let mode = h.mode().map_err(|e| bad("mode", e))? & 0o7777;
        let mut uid = h.uid().map_err(|e| bad("uid", e))?;
        let mut gid = h.gid().map_err(|e| bad("gid", e))?;
        let secs = h.mtime().map_err(|e| bad("mtime", e))?;
        let mut mtime = TimeSpec::new(i64::try_from(secs).unwrap_or(i64::MAX), 0);
        let mut atime = None;
        let mut xattrs = Vec::new();
        if let Some(pax) = entry.pax_extensions().map_err(|e| bad("pax header", e))? {
            for ext in pax {
                let ext = ext.map_err(|e| bad("pax header", e))?;
                let Ok(key) = ext.key() else { continue };
                let value = ext.value_bytes();
                let num = || {
                    std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse::<u64>().ok())
                };
                match key {
                    "uid" => uid = num().unwrap_or(uid),
                    "gid" => gid = num().unwrap_or(gid),
                    "mtime" => mtime = parse_pax_time(value).unwrap_or(mtime),
                    "atime" => atime = parse_pax_time(value),
                    _ => {
                        if let Some(name) = key.strip_prefix("SCHILY.xattr.") {
                            xattrs.push((name.as_bytes().to_vec(), value.to_vec()));
                        }
                    }
                }
            }
        }
        Ok(Meta {
            mode,
            uid,
            gid,
            mtime,
            atime: atime.unwrap_or(mtime),
            xattrs,
        })
    }

    /// Makes sure the parents of `rel` exist as real directories (created 0755 and
    /// owned by root when the tar did not list them, as containerd does) and returns
    /// the direct parent. Errors: a parent is a symlink or not a directory.
    fn ensure_parents(&mut self, rel: &[&[u8]], shown: &str) -> Result<PathBuf, UnpackError> {
        let mut p = self.dest.to_path_buf();
        for c in &rel[..rel.len().saturating_sub(1)] {
            p.push(OsStr::from_bytes(c));
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => {}
                Ok(m) if whiteout::is_whiteout(&m) => {
                    self.dir_over_whiteout(&p)?;
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                        .map_err(self.write_err(&p))?;
                }
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(
                        self.entry_err(shown, format!("parent {} is a symlink", p.display()))
                    );
                }
                Ok(_) => {
                    return Err(
                        self.entry_err(shown, format!("parent {} is not a directory", p.display()))
                    );
                }
                Err(_) => {
                    self.mkdir(&p)?;
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                        .map_err(self.write_err(&p))?;
                }
            }
        }
        Ok(p)
    }

    fn check_no_symlink_parents(&self, rel: &[&[u8]], shown: &str) -> Result<(), UnpackError> {
        let mut p = self.dest.to_path_buf();
        for c in &rel[..rel.len().saturating_sub(1)] {
            p.push(OsStr::from_bytes(c));
            if std::fs::symlink_metadata(&p).is_ok_and(|m| !m.is_dir()) {
                return Err(
                    self.entry_err(shown, format!("link target passes through {}", p.display()))
                );
            }
        }
        Ok(())
    }

    /// This layer deleted the lower layers' `path` and now puts a directory there:
    /// overlayfs cannot hold a whiteout and a directory under one name, so the
    /// directory becomes opaque, which hides the same lower entries.
    fn dir_over_whiteout(&self, path: &Path) -> Result<(), UnpackError> {
        std::fs::remove_file(path).map_err(self.write_err(path))?;
        self.mkdir(path)?;
        whiteout::make_opaque(path).map_err(self.write_err(path))
    }

    fn mkdir(&self, path: &Path) -> Result<(), UnpackError> {
        std::fs::create_dir(path).map_err(self.write_err(path))
    }

    /// An entry replaces whatever an earlier entry of the same layer put at `path`.
    /// A removed directory's deferred times go with it: set later, they would follow
    /// whatever the next entry puts at `path` (a symlink out of the layer).
    fn remove_existing(&mut self, path: &Path) -> Result<(), UnpackError> {
        match std::fs::symlink_metadata(path) {
            Err(_) => Ok(()),
            Ok(m) if m.is_dir() => {
                std::fs::remove_dir_all(path).map_err(self.write_err(path))?;
                self.dirs.retain(|d| !d.path.starts_with(path));
                Ok(())
            }
            Ok(_) => std::fs::remove_file(path).map_err(self.write_err(path)),
        }
    }

    fn finish_dir(&mut self, path: &Path, meta: &Meta) -> Result<(), UnpackError> {
        std::os::unix::fs::lchown(path, Some(id(meta.uid)), Some(id(meta.gid)))
            .map_err(self.write_err(path))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(meta.mode))
            .map_err(self.write_err(path))?;
        self.set_xattrs(path, meta, "")?;
        self.dirs.push(DirTimes {
            path: path.to_path_buf(),
            atime: meta.atime,
            mtime: meta.mtime,
        });
        Ok(())
    }

    /// Sets the entry's xattrs. `trusted.overlay.*` from a layer is dropped: it would
    /// steer overlayfs (redirects, metacopy) in ways only siloc may decide.
    fn set_xattrs(&self, path: &Path, meta: &Meta, shown: &str) -> Result<(), UnpackError> {
        for (name, value) in &meta.xattrs {
            if name.starts_with(b"trusted.overlay.") {
                tracing::debug!(entry = shown, "overlayfs xattr from the layer dropped");
                continue;
            }
            xattr::set(path, OsStr::from_bytes(name), value).map_err(self.write_err(path))?;
        }
        Ok(())
    }

    fn set_times(&self, path: &Path, meta: &Meta) -> Result<(), UnpackError> {
        utimensat(
            None,
            path,
            &meta.atime,
            &meta.mtime,
            UtimensatFlags::NoFollowSymlink,
        )
        .map_err(|e| self.write_err(path)(e.into()))
    }

    fn copy(
        &mut self,
        from: &mut impl Read,
        to: &mut File,
        path: &Path,
    ) -> Result<u64, UnpackError> {
        let mut n = 0u64;
        loop {
            let k = from
                .read(&mut self.buf)
                .map_err(|source| UnpackError::Read {
                    blob: self.blob.to_path_buf(),
                    source,
                })?;
            if k == 0 {
                return Ok(n);
            }
            to.write_all(&self.buf[..k]).map_err(self.write_err(path))?;
            n += k as u64;
        }
    }
}

/// Tar IDs beyond 32 bits cannot exist on Linux; they saturate (and chown fails).
fn id(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// A tar path as components under the layer root: leading `/` and `./`, `.` and
/// empty components dropped. Errors: a `..` component.
fn normalize(raw: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    for c in raw.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err("path contains '..'".into()),
            c => out.push(c),
        }
    }
    Ok(out)
}

fn join(rel: &[&[u8]]) -> PathBuf {
    rel.iter().map(|c| OsStr::from_bytes(c)).collect()
}

/// A pax time (`1700000000.123456789`, seconds since the epoch, optional fraction).
fn parse_pax_time(v: &[u8]) -> Option<TimeSpec> {
    let s = std::str::from_utf8(v).ok()?;
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    let secs: i64 = secs.parse().ok()?;
    let digits: String = frac.chars().take(9).collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let nanos: i64 = if digits.is_empty() {
        0
    } else {
        format!("{digits:0<9}").parse().ok()?
    };
    // A negative time with a fraction counts the fraction back from the second.
    Some(if secs < 0 && nanos > 0 {
        TimeSpec::new(secs - 1, 1_000_000_000 - nanos)
    } else {
        TimeSpec::new(secs, nanos)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::testkit::{Comp, Entry, Tar};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    fn root() -> bool {
        let r = nix::unistd::geteuid().is_root();
        if !r {
            eprintln!("SKIPPED unpack test: needs root (chown, mknod, trusted.* xattrs)");
        }
        r
    }

    /// Unpacks `tar` compressed as `comp` into a fresh dir; returns (dir, result).
    fn unpack(tar: &[u8], comp: Comp) -> (tempfile::TempDir, Result<Unpacked, UnpackError>) {
        let d = tempfile::tempdir().unwrap();
        let blob = d.path().join("blob");
        std::fs::write(&blob, comp.compress(tar)).unwrap();
        let dest = d.path().join("fs");
        std::fs::create_dir(&dest).unwrap();
        let c = match comp {
            Comp::None => Compression::None,
            Comp::Gzip => Compression::Gzip,
            Comp::Zstd => Compression::Zstd,
        };
        let r = unpack_layer(&blob, c, &dest, |_| {});
        (d, r)
    }

    #[test]
    fn every_entry_kind_with_owner_mode_time_and_xattrs() {
        if !root() {
            return;
        }
        let mut t = Tar::new();
        t.add([
            Entry::dir("./").mode(0o755),
            Entry::dir("./srv")
                .mode(0o750)
                .owner(1000, 1001)
                .mtime(1_500_000_000),
            Entry::file("./srv/app", b"#!/bin/sh\n")
                .mode(0o4755)
                .owner(0, 42)
                .mtime(1_400_000_000),
            Entry::file("./srv/data", b"payload")
                .mode(0o600)
                .owner(1000, 1001)
                .xattr("user.siloc", b"yes"),
            Entry::link("./srv/data-link", "./srv/data"),
            Entry::symlink("./srv/current", "app").mtime(1_300_000_000),
            Entry::symlink("./srv/dangling", "/nonexistent/x"),
            Entry::char_dev("./srv/null", 1, 3).mode(0o666),
            Entry::block_dev("./srv/loop0", 7, 0),
            Entry::fifo("./srv/pipe").mode(0o620),
            Entry::dir("./tmp").mode(0o1777),
            Entry::file("./implicit/parent/file", b"x"),
        ]);
        let tar = t.bytes();
        let (d, r) = unpack(&tar, Comp::Zstd);
        let u = r.unwrap();
        let fs = d.path().join("fs");
        let m = |p: &str| std::fs::symlink_metadata(fs.join(p)).unwrap();
        assert_eq!(
            (m("srv").mode() & 0o7777, m("srv").uid(), m("srv").gid()),
            (0o750, 1000, 1001)
        );
        assert_eq!(
            m("srv").mtime(),
            1_500_000_000,
            "directory times are set last"
        );
        assert_eq!(
            (m("srv/app").mode() & 0o7777, m("srv/app").gid()),
            (0o4755, 42),
            "setuid kept after chown"
        );
        assert_eq!(m("srv/app").mtime(), 1_400_000_000);
        assert_eq!(std::fs::read(fs.join("srv/data")).unwrap(), b"payload");
        assert_eq!(
            xattr::get(fs.join("srv/data"), "user.siloc")
                .unwrap()
                .as_deref(),
            Some(&b"yes"[..])
        );
        assert_eq!(m("srv/data-link").ino(), m("srv/data").ino(), "hard link");
        assert_eq!(m("srv/data").nlink(), 2);
        assert_eq!(
            std::fs::read_link(fs.join("srv/current")).unwrap(),
            Path::new("app")
        );
        assert_eq!(
            m("srv/current").mtime(),
            1_300_000_000,
            "symlink time, not its target's"
        );
        assert!(m("srv/dangling").file_type().is_symlink());
        assert!(m("srv/null").file_type().is_char_device());
        assert_eq!(m("srv/null").rdev(), nix::sys::stat::makedev(1, 3));
        assert!(m("srv/loop0").file_type().is_block_device());
        assert!(m("srv/pipe").file_type().is_fifo());
        assert_eq!(m("srv/pipe").mode() & 0o7777, 0o620);
        assert_eq!(m("tmp").mode() & 0o7777, 0o1777);
        assert_eq!(m("implicit/parent").mode() & 0o7777, 0o755);
        assert_eq!(u.diff_id, crate::image::digest::sha256_of(&tar));
        assert_eq!(u.tar_bytes, tar.len() as u64);
        assert_eq!(
            u.digest,
            crate::image::digest::sha256_of(&Comp::Zstd.compress(&tar))
        );
    }

    /// A layer deleting a file and a directory below it, and making a dir opaque.
    fn whiteout_layer() -> Vec<u8> {
        let mut t = Tar::new();
        t.add([
            Entry::dir("etc"),
            Entry::whiteout("etc/motd"),
            Entry::whiteout("usr/share/info"),
            Entry::dir("usr/share/locale").mode(0o755),
            Entry::opaque("usr/share/locale"),
            Entry::file("usr/share/locale/README", b"new"),
            Entry::file("etc/.wh..wh.plnk", b""),
        ]);
        t.bytes()
    }

    #[test]
    fn whiteouts_and_opaque_dirs_become_overlayfs_form() {
        if !root() {
            return;
        }
        for comp in [Comp::None, Comp::Gzip, Comp::Zstd] {
            let (d, r) = unpack(&whiteout_layer(), comp);
            let u = r.unwrap();
            let fs = d.path().join("fs");
            let m = |p: &str| std::fs::symlink_metadata(fs.join(p)).unwrap();
            for w in ["etc/motd", "usr/share/info"] {
                assert!(crate::image::whiteout::is_whiteout(&m(w)), "{w} ({comp:?})");
                assert_eq!(m(w).mode() & 0o7777, 0);
            }
            assert!(!fs.join("etc/.wh.motd").exists() && !fs.join("etc/.wh..wh.plnk").exists());
            assert!(crate::image::whiteout::is_opaque(
                &fs.join("usr/share/locale")
            ));
            assert!(!fs.join("usr/share/locale/.wh..wh..opq").exists());
            assert_eq!(
                std::fs::read(fs.join("usr/share/locale/README")).unwrap(),
                b"new"
            );
            assert!(!crate::image::whiteout::is_opaque(&fs.join("usr/share")));
            assert_eq!((u.whiteouts, u.opaque_dirs), (2, 1));
        }
    }

    #[test]
    fn a_whiteout_and_a_new_entry_of_one_layer_keep_the_new_entry() {
        if !root() {
            return;
        }
        let mut t = Tar::new();
        t.add([
            // whiteout first, then a directory and a file under the same names
            Entry::whiteout("srv/data"),
            Entry::dir("srv/data").mode(0o700),
            Entry::file("srv/data/new", b"n"),
            Entry::whiteout("srv/conf"),
            Entry::file("srv/conf", b"c"),
            // an entry first, then its whiteout
            Entry::dir("opt/app"),
            Entry::file("opt/app/bin", b"b"),
            Entry::whiteout("opt/app"),
            Entry::file("etc/kept", b"k"),
            Entry::whiteout("etc/kept"),
            // a whiteout then a path through it
            Entry::whiteout("var/lib"),
            Entry::file("var/lib/state", b"s"),
        ]);
        let (d, r) = unpack(&t.bytes(), Comp::None);
        r.unwrap();
        let fs = d.path().join("fs");
        let opaque = |p: &str| crate::image::whiteout::is_opaque(&fs.join(p));
        assert!(fs.join("srv/data").is_dir() && opaque("srv/data"));
        assert_eq!(
            std::fs::symlink_metadata(fs.join("srv/data"))
                .unwrap()
                .mode()
                & 0o7777,
            0o700
        );
        assert_eq!(std::fs::read(fs.join("srv/conf")).unwrap(), b"c");
        assert!(opaque("opt/app") && fs.join("opt/app/bin").is_file());
        assert_eq!(std::fs::read(fs.join("etc/kept")).unwrap(), b"k");
        assert!(opaque("var/lib") && fs.join("var/lib/state").is_file());
    }

    #[test]
    fn hostile_paths_are_refused() {
        if !root() {
            return;
        }
        let cases: Vec<(Vec<Entry>, &str)> = vec![
            (
                vec![
                    Entry::symlink("etc", "/etc"),
                    Entry::file("etc/owned", b"x"),
                ],
                "symlink",
            ),
            (
                vec![Entry::link("x", "/etc/passwd")],
                "not a file earlier in this layer",
            ),
            (
                vec![Entry::file("dir/.wh.", b"")],
                "whiteout must name a file",
            ),
        ];
        for (entries, want) in cases {
            let mut t = Tar::new();
            t.add(entries);
            let (d, r) = unpack(&t.bytes(), Comp::None);
            let e = r.unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(!Path::new("/etc/owned").exists());
            drop(d);
        }
        // tar's own writer refuses "..", so write the header by hand
        let mut h = tar::Header::new_gnu();
        h.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"../escaped-x\0");
        h.set_size(0);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        let mut raw = h.as_bytes().to_vec();
        raw.extend([0u8; 1024]);
        let (_d, r) = unpack(&raw, Comp::None);
        assert!(r.unwrap_err().to_string().contains(".."));
    }

    #[test]
    fn directory_times_never_follow_a_later_symlink_out_of_the_layer() {
        if !root() {
            return;
        }
        // Directory times are set after the last entry; a directory replaced by a
        // symlink in between must not carry the deferred time of a path below it to
        // wherever the symlink points.
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("b");
        std::fs::write(&victim, b"v").unwrap();
        let t0 = TimeSpec::new(1_600_000_000, 0);
        utimensat(None, &victim, &t0, &t0, UtimensatFlags::NoFollowSymlink).unwrap();
        let mut t = Tar::new();
        t.add([
            Entry::dir("a"),
            Entry::dir("a/b").mtime(1_000),
            Entry::symlink("a", outside.path().to_str().unwrap()),
        ]);
        let (d, r) = unpack(&t.bytes(), Comp::None);
        r.unwrap();
        assert_eq!(
            std::fs::metadata(&victim).unwrap().mtime(),
            1_600_000_000,
            "a file outside the layer got the time of entry a/b"
        );
        assert!(
            std::fs::symlink_metadata(d.path().join("fs/a"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn a_corrupt_stream_is_an_error_naming_the_blob() {
        let mut t = Tar::new();
        t.add([Entry::file("a", &[7u8; 5000])]);
        let mut gz = Comp::Gzip.compress(&t.bytes());
        let n = gz.len();
        gz.truncate(n / 2);
        let d = tempfile::tempdir().unwrap();
        let blob = d.path().join("blob");
        std::fs::write(&blob, gz).unwrap();
        let dest = d.path().join("fs");
        std::fs::create_dir(&dest).unwrap();
        let e = unpack_layer(&blob, Compression::Gzip, &dest, |_| {}).unwrap_err();
        assert!(e.to_string().contains(&blob.display().to_string()), "{e}");
    }

    #[test]
    fn paths_are_normalized_and_dotdot_refused() {
        assert_eq!(normalize(b"./usr/bin/").unwrap(), vec![&b"usr"[..], b"bin"]);
        assert_eq!(
            normalize(b"/etc//passwd").unwrap(),
            vec![&b"etc"[..], b"passwd"]
        );
        assert!(normalize(b"./").unwrap().is_empty());
        assert!(normalize(b"a/../../etc").is_err());
    }

    #[test]
    fn pax_times() {
        assert_eq!(
            parse_pax_time(b"1700000000"),
            Some(TimeSpec::new(1_700_000_000, 0))
        );
        assert_eq!(
            parse_pax_time(b"1700000000.5"),
            Some(TimeSpec::new(1_700_000_000, 500_000_000))
        );
        assert_eq!(
            parse_pax_time(b"1.123456789123"),
            Some(TimeSpec::new(1, 123_456_789))
        );
        assert_eq!(
            parse_pax_time(b"-1.25"),
            Some(TimeSpec::new(-2, 750_000_000))
        );
        assert_eq!(parse_pax_time(b"x"), None);
    }
}
