//! File helpers: an I/O error that names its path, and files replaced atomically.

use std::io::Write;
use std::path::{Path, PathBuf};

/// An I/O error with the path it happened at: `<path>: <error>`. Module errors carry it
/// as a variant (`#[error(transparent)] Io(#[from] IoAt)`), so every message names the
/// file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct IoAt {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// A `map_err` adapter: `std::fs::read(p).map_err(io_at(p))?`.
pub(crate) fn io_at(path: &Path) -> impl Fn(std::io::Error) -> IoAt + '_ {
    move |source| IoAt {
        path: path.to_path_buf(),
        source,
    }
}

/// Replaces `path` with `body` atomically: written to `<path>.tmp<pid>` in the same
/// directory, then renamed over it, so a reader (or a crash) sees the old contents or
/// the new, never half of them (rename(2)).
///
/// Errors: [`IoAt`] naming the temporary file or `path`; the temporary file is removed.
pub(crate) fn write_atomic(path: &Path, body: &[u8]) -> Result<(), IoAt> {
    write_atomic_mode(path, body, 0o644)
}

/// [`write_atomic`] with the new file's permission bits `mode` (before the umask), e.g.
/// 0o600 for a bundle's config.json that only root may read.
///
/// Errors: as [`write_atomic`].
pub fn write_atomic_mode(path: &Path, body: &[u8], mode: u32) -> Result<(), IoAt> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| f.write_all(body));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_at(&tmp)(e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_at(path)(e)
    })
}

/// Reads the regular file `path` (absolute as a container sees it) of the tree rooted at
/// `root`, resolving every component with openat2(2) `RESOLVE_IN_ROOT`, so symlinks and
/// `..` in the tree stay inside it; at most `limit` bytes are read.
///
/// The caller is the host's root, outside the container's device cgroup, LSM profile
/// and user namespace, and the tree is the container's to shape. So the file is first
/// opened `O_PATH` (no driver's open runs, nothing is read) and only a regular file
/// outside procfs and sysfs is opened for reading, through that fd: a device node
/// there (`mknod` by a container with CAP_MKNOD, or in an image layer) is never opened,
/// nor a kernel file such as `/proc/kmsg` (its read consumes the kernel log).
///
/// Errors: the open or read's error (ENOENT for a missing file, ELOOP, ...), EINVAL for
/// anything but a regular file on another filesystem, EFBIG for a file past `limit`.
pub(crate) fn read_in_root(root: &Path, path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    use nix::sys::statfs::{PROC_SUPER_MAGIC, SYSFS_MAGIC, fstatfs};
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::fs::File::open(root)?;
    let rel = path.strip_prefix("/").unwrap_or(path);
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT);
    let fd = openat2(dir.as_raw_fd(), rel, how)?;
    // SAFETY: openat2 returned a new fd that nothing else owns.
    let at = unsafe { std::fs::File::from_raw_fd(fd) };
    let not_a_file = || std::io::Error::from_raw_os_error(libc::EINVAL);
    if !at.metadata()?.is_file() {
        return Err(not_a_file());
    }
    let fs = fstatfs(&at)?.filesystem_type();
    if fs == PROC_SUPER_MAGIC || fs == SYSFS_MAGIC {
        return Err(not_a_file());
    }
    // Reopened through the O_PATH fd: the same inode, whatever the tree did since.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", at.as_raw_fd()))?;
    let mut body = Vec::new();
    f.take(limit + 1).read_to_end(&mut body)?;
    if body.len() as u64 > limit {
        return Err(std::io::Error::from_raw_os_error(libc::EFBIG));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_names_the_path() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let e = write_atomic(&d.path().join("no/such/f"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/f"), "{e}");
    }

    #[test]
    fn read_in_root_reads_regular_files_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("etc")).unwrap();
        std::fs::write(d.path().join("etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
        let got = read_in_root(d.path(), Path::new("/etc/passwd"), 1 << 20).unwrap();
        assert_eq!(got, b"root:x:0:0::/root:/bin/sh\n");
        let einval = |p: &str, root: &Path| {
            let e = read_in_root(root, Path::new(p), 1 << 20).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{p}: {e}");
        };
        // a FIFO, a directory, a device node: never opened for reading
        nix::unistd::mkfifo(&d.path().join("etc/fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        einval("/etc/fifo", d.path());
        einval("/etc", d.path());
        einval("/dev/null", Path::new("/"));
        // kernel files are regular files too, but no container's passwd (a read of
        // /proc/kmsg consumes the kernel log)
        einval("/proc/self/status", Path::new("/"));
        if Path::new("/sys/kernel/uevent_seqnum").exists() {
            einval("/sys/kernel/uevent_seqnum", Path::new("/"));
        }
    }
}
