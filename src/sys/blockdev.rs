//! Block device numbers and the first step of every sysfs device walk: from a device
//! number to its whole disk (kernel ABI `sysfs-dev`, `sysfs-block`:
//! `/sys/dev/block/MAJ:MIN` links to the device's directory; a partition's directory
//! lies inside its disk's and holds a `partition` file).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A block device number (`MAJ:MIN`, as in `/sys/dev/block` and `io.max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DevNum {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

impl DevNum {
    pub(crate) fn new(major: u32, minor: u32) -> DevNum {
        DevNum { major, minor }
    }

    /// From a raw `st_dev`/`st_rdev` (glibc's `major()`/`minor()` encoding).
    pub(crate) fn from_raw(dev: u64) -> DevNum {
        DevNum {
            major: libc::major(dev),
            minor: libc::minor(dev),
        }
    }

    /// Parses `MAJ:MIN` (surrounding whitespace allowed); `None` otherwise.
    pub(crate) fn parse(text: &str) -> Option<DevNum> {
        let (a, b) = text.trim().split_once(':')?;
        Some(DevNum {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }
}

impl fmt::Display for DevNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// `<sysfs>/dev/block/MAJ:MIN`, canonical: the device's own sysfs directory.
///
/// Errors: the link's `canonicalize` (`NotFound`: no such block device).
pub(crate) fn dev_dir(sysfs: &Path, dev: DevNum) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(sysfs.join("dev/block").join(dev.to_string()))
}

/// The whole disk of a device directory: a partition's parent, else itself.
pub(crate) fn whole_disk(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if dir.join("partition").exists() => p.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// A sysfs directory's kernel name (`vda`, `nvme0n1`).
pub(crate) fn name_of(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The device number in a sysfs device directory's `dev` file, `None` when it is
/// missing or not `MAJ:MIN`.
pub(crate) fn read_dev(dir: &Path) -> std::io::Result<Option<DevNum>> {
    Ok(DevNum::parse(&std::fs::read_to_string(dir.join("dev"))?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devnum_parse_and_show() {
        assert_eq!(DevNum::parse(" 259:3\n"), Some(DevNum::new(259, 3)));
        assert_eq!(DevNum::parse("259"), None);
        assert_eq!(DevNum::new(8, 1).to_string(), "8:1");
    }
}
