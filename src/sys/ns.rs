//! Namespace file queries (ioctl_ns(2)).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A namespace's identity: the (device, inode) of its namespace file. Two namespace
/// files name the same namespace exactly when these are equal (namespaces(7),
/// ioctl_ns(2)).
pub type NsId = (u64, u64);

/// The identity of the namespace file at `path` (`/proc/PID/ns/TYPE`, or a bind mount
/// of one). Errors: stat(2)'s.
pub fn id(path: impl AsRef<Path>) -> std::io::Result<NsId> {
    std::fs::metadata(path).map(|m| (m.dev(), m.ino()))
}

/// The identity of the open namespace file `ns`. Errors: fstat(2)'s.
pub fn id_of(ns: &File) -> std::io::Result<NsId> {
    ns.metadata().map(|m| (m.dev(), m.ino()))
}

/// The user namespace that owns the namespace `ns` refers to (`NS_GET_USERNS`), as an
/// open file (compare namespaces by its device and inode). Errors: the ioctl's errno
/// (ENOTTY or EINVAL when `ns` is no namespace file, EPERM when the owner lies outside
/// the caller's user namespace).
pub(crate) fn owner_userns(ns: &File) -> Result<File, nix::Error> {
    // SAFETY: NS_GET_USERNS takes no argument and returns a new fd or -1; `ns` is an
    // open file for the whole call.
    let fd = unsafe { libc::ioctl(ns.as_raw_fd(), libc::NS_GET_USERNS) };
    if fd < 0 {
        return Err(nix::Error::last());
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// The type of the namespace `ns` refers to (`NS_GET_NSTYPE`, Linux 4.11): one
/// `CLONE_NEW*` value (`libc::CLONE_NEWNET`, ...). Errors: the ioctl's errno (ENOTTY
/// or EINVAL when `ns` is no namespace file).
pub(crate) fn ns_type(ns: &File) -> Result<libc::c_int, nix::Error> {
    // SAFETY: NS_GET_NSTYPE takes no argument and returns the type or -1; `ns` is an
    // open file for the whole call.
    let t = unsafe { libc::ioctl(ns.as_raw_fd(), libc::NS_GET_NSTYPE) };
    if t < 0 {
        return Err(nix::Error::last());
    }
    Ok(t)
}

/// The parent of the user namespace `userns` refers to (`NS_GET_PARENT`, Linux 4.9),
/// as an open file. Errors: the ioctl's errno (EPERM for the initial user namespace
/// or a parent outside the caller's user namespace, EINVAL when `userns` is no
/// user namespace file).
pub(crate) fn parent_userns(userns: &File) -> Result<File, nix::Error> {
    // SAFETY: NS_GET_PARENT takes no argument and returns a new fd or -1; `userns` is
    // an open file for the whole call.
    let fd = unsafe { libc::ioctl(userns.as_raw_fd(), libc::NS_GET_PARENT) };
    if fd < 0 {
        return Err(nix::Error::last());
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}
