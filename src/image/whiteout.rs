//! Whiteouts: how an image layer deletes what a lower layer has, converted to the form
//! overlayfs reads.
//!
//! Image-spec `layer.md` "Whiteouts": a file `.wh.NAME` deletes `NAME` of lower
//! layers; a file `.wh..wh..opq` in a directory makes the directory opaque (lower
//! layers' children of it are hidden, its own children stay). Other `.wh..wh.` names
//! are AUFS metadata and carry nothing to apply.
//! Kernel `Documentation/filesystems/overlayfs.rst` "whiteouts and opaque
//! directories": a whiteout is a character device with device number 0/0; an opaque
//! directory carries the xattr `trusted.overlay.opaque` = `y`.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use nix::sys::stat::{Mode, SFlag, makedev, mknod};

/// Prefix of a whiteout file name in a layer tar.
pub const WHITEOUT_PREFIX: &[u8] = b".wh.";
/// Name of the opaque-directory marker in a layer tar.
pub const OPAQUE_MARKER: &[u8] = b".wh..wh..opq";
/// Prefix of AUFS metadata names (`.wh..wh.plnk`, ...), which are not whiteouts.
const META_PREFIX: &[u8] = b".wh..wh.";
/// The xattr overlayfs reads to tell an opaque directory.
pub const OPAQUE_XATTR: &str = "trusted.overlay.opaque";

/// What a tar entry's last path component means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker<'a> {
    /// A plain entry.
    None,
    /// `.wh.NAME`: delete `NAME` (the payload) of lower layers.
    Whiteout(&'a [u8]),
    /// `.wh..wh..opq`: the containing directory is opaque.
    Opaque,
    /// Other `.wh..wh.*` names: AUFS metadata, ignored.
    Meta,
    /// `.wh.` with nothing after it, or `.wh..` / `.wh...`: no valid name to delete.
    Invalid,
}

/// Classifies a file name (one path component, raw bytes).
pub fn classify(name: &[u8]) -> Marker<'_> {
    if name == OPAQUE_MARKER {
        return Marker::Opaque;
    }
    if name.starts_with(META_PREFIX) {
        return Marker::Meta;
    }
    match name.strip_prefix(WHITEOUT_PREFIX) {
        None => Marker::None,
        Some(b"" | b"." | b"..") => Marker::Invalid,
        Some(rest) if rest.contains(&b'/') => Marker::Invalid,
        Some(rest) => Marker::Whiteout(rest),
    }
}

/// Creates the overlayfs whiteout for `path`: a character device 0/0, mode 0000,
/// owned by root. Needs CAP_MKNOD. Errors: mknod's.
pub fn make_whiteout(path: &Path) -> std::io::Result<()> {
    mknod(path, SFlag::S_IFCHR, Mode::empty(), makedev(0, 0)).map_err(std::io::Error::from)
}

/// Marks directory `dir` opaque for overlayfs. Needs CAP_SYS_ADMIN (trusted.*).
pub fn make_opaque(dir: &Path) -> std::io::Result<()> {
    xattr::set(dir, OPAQUE_XATTR, b"y")
}

/// Whether `meta` (from `symlink_metadata`) is an overlayfs whiteout.
pub fn is_whiteout(meta: &std::fs::Metadata) -> bool {
    meta.file_type().is_char_device() && meta.rdev() == 0
}

/// Whether directory `dir` is marked opaque.
pub fn is_opaque(dir: &Path) -> bool {
    matches!(xattr::get(dir, OPAQUE_XATTR), Ok(Some(v)) if v == b"y")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_classified() {
        assert_eq!(classify(b"passwd"), Marker::None);
        assert_eq!(classify(b".wh.passwd"), Marker::Whiteout(b"passwd"));
        assert_eq!(classify(b".wh..hidden"), Marker::Whiteout(b".hidden"));
        assert_eq!(classify(b".wh..wh..opq"), Marker::Opaque);
        assert_eq!(classify(b".wh..wh.plnk"), Marker::Meta);
        assert_eq!(classify(b".wh..wh..opq2"), Marker::Meta);
        assert_eq!(classify(b".wh."), Marker::Invalid);
        assert_eq!(classify(b".wh.."), Marker::Invalid);
        assert_eq!(classify(b".wh"), Marker::None);
        assert_eq!(classify(b"x.wh.y"), Marker::None);
    }

    #[test]
    fn whiteout_is_a_0_0_char_device_and_opaque_is_an_xattr() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED whiteout_is_a_0_0_char_device: needs root (mknod, trusted.*)");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let w = d.path().join("gone");
        make_whiteout(&w).unwrap();
        let m = std::fs::symlink_metadata(&w).unwrap();
        assert!(is_whiteout(&m));
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (0, 0, 0));
        assert!(!is_opaque(d.path()));
        make_opaque(d.path()).unwrap();
        assert!(is_opaque(d.path()));
        let plain = d.path().join("plain");
        std::fs::write(&plain, b"").unwrap();
        assert!(!is_whiteout(&std::fs::symlink_metadata(&plain).unwrap()));
    }
}
