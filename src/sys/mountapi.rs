//! The new mount API calls that neither nix nor libcontainer wraps: `open_tree`,
//! `mount_setattr`, `fsopen`, `fsconfig`, `fsmount`, `move_mount` (Linux 5.2+;
//! `mount_setattr` and idmapped mounts 5.12+; overlayfs `lowerdir+` by fd 6.8+).
//!
//! Constants are those of `<linux/mount.h>` and `<linux/fcntl.h>`. Every function
//! returns an owned fd or an `Errno`; nothing here attaches a mount except
//! [`move_mount_to`].

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const AT_EMPTY_PATH: libc::c_uint = libc::AT_EMPTY_PATH as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const FSOPEN_CLOEXEC: libc::c_uint = 1;
const FSMOUNT_CLOEXEC: libc::c_uint = 1;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_SET_FD: libc::c_uint = 5;
const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
const MS_PRIVATE: u64 = 1 << 18;

/// `MOUNT_ATTR_RDONLY`: the mount is read-only.
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_IDMAP`: the mount carries the ID mapping of `userns_fd`.
pub const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` (MOUNT_ATTR_SIZE_VER0, 32 bytes).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn cpath(path: &Path) -> Result<CString, Errno> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)
}

/// Turns a syscall's return value into an owned fd.
fn fd_result(ret: libc::c_long) -> Result<OwnedFd, Errno> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        // SAFETY: the kernel just returned this fd to us and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(ret as i32) })
    }
}

fn unit_result(ret: libc::c_long) -> Result<(), Errno> {
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// `open_tree(AT_FDCWD, path, OPEN_TREE_CLONE|OPEN_TREE_CLOEXEC[|AT_RECURSIVE])`: a
/// detached copy of the mount at `path`, never attached anywhere.
pub fn clone_tree(path: &Path, recursive: bool) -> Result<OwnedFd, Errno> {
    let p = cpath(path)?;
    let mut flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: `p` is a valid NUL-terminated string that outlives the call; the
    // syscall only reads it.
    fd_result(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, p.as_ptr(), flags) })
}

/// `mount_setattr(tree, "", AT_EMPTY_PATH[|AT_RECURSIVE], {attr_set, userns_fd})` on a
/// detached tree. With [`MOUNT_ATTR_IDMAP`], `userns` gives the mapping.
pub fn set_attr(
    tree: BorrowedFd<'_>,
    attr_set: u64,
    userns: Option<BorrowedFd<'_>>,
    recursive: bool,
) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.map(|f| f.as_raw_fd() as u64).unwrap_or(0),
    };
    let mut flags = AT_EMPTY_PATH;
    if recursive {
        flags |= AT_RECURSIVE;
    }
    // SAFETY: the empty path and `attr` are valid for the duration of the call, and the
    // size passed is exactly that of `attr`.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// `mount_setattr(AT_FDCWD, path, 0, {attr_set, attr_clr})` on the mount at `path`
/// (the top one), not recursively: sets and clears `MOUNT_ATTR_*` flags of an
/// attached mount (mount_setattr(2)).
pub(crate) fn set_attr_at(path: &Path, attr_set: u64, attr_clr: u64) -> Result<(), Errno> {
    let p = cpath(path)?;
    let attr = MountAttr {
        attr_set,
        attr_clr,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `p` and `attr` outlive the call; the size is exactly that of `attr`.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            p.as_ptr(),
            0,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// `mount_setattr(tree, "", AT_EMPTY_PATH|AT_RECURSIVE, {propagation: MS_PRIVATE})`:
/// every mount of a detached tree leaves its peer group. An `open_tree` clone of a
/// shared mount is a peer of it (mount_setattr(2), "propagation"), so a mount made on
/// top of the clone would otherwise appear at the original as well.
pub(crate) fn make_private(tree: BorrowedFd<'_>) -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: 0,
        attr_clr: 0,
        propagation: MS_PRIVATE,
        userns_fd: 0,
    };
    // SAFETY: as in `set_attr`: the empty path and `attr` outlive the call, and the
    // size is exactly that of `attr`.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            AT_EMPTY_PATH | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// `fsopen(fstype, FSOPEN_CLOEXEC)`: a filesystem context to configure.
pub(crate) fn fs_open(fstype: &str) -> Result<OwnedFd, Errno> {
    let t = CString::new(fstype).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `t` is a valid NUL-terminated string for the call.
    fd_result(unsafe { libc::syscall(libc::SYS_fsopen, t.as_ptr(), FSOPEN_CLOEXEC) })
}

/// `fsconfig(ctx, FSCONFIG_SET_STRING, key, value, 0)`.
pub(crate) fn fs_set_string(ctx: BorrowedFd<'_>, key: &str, value: &str) -> Result<(), Errno> {
    let k = CString::new(key).map_err(|_| Errno::EINVAL)?;
    let v = CString::new(value).map_err(|_| Errno::EINVAL)?;
    // SAFETY: both strings are valid and NUL-terminated for the call.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            FSCONFIG_SET_STRING,
            k.as_ptr(),
            v.as_ptr(),
            0,
        )
    })
}

/// `fsconfig(ctx, FSCONFIG_SET_FD, key, NULL, fd)`: e.g. overlayfs `lowerdir+`.
pub(crate) fn fs_set_fd(ctx: BorrowedFd<'_>, key: &str, fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let k = CString::new(key).map_err(|_| Errno::EINVAL)?;
    // SAFETY: `k` is valid for the call; the value pointer is NULL as the ABI requires
    // for FSCONFIG_SET_FD, and `fd` is a live descriptor.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            FSCONFIG_SET_FD,
            k.as_ptr(),
            std::ptr::null::<libc::c_char>(),
            fd.as_raw_fd(),
        )
    })
}

/// `fsconfig(ctx, FSCONFIG_CMD_CREATE)` then `fsmount(ctx, FSMOUNT_CLOEXEC, attrs)`:
/// a detached mount of the configured filesystem.
pub(crate) fn fs_create_mount(ctx: BorrowedFd<'_>, attrs: u64) -> Result<OwnedFd, Errno> {
    // SAFETY: FSCONFIG_CMD_CREATE takes no pointers.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            ctx.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            0,
        )
    })?;
    // SAFETY: fsmount takes only integers.
    fd_result(unsafe { libc::syscall(libc::SYS_fsmount, ctx.as_raw_fd(), FSMOUNT_CLOEXEC, attrs) })
}

/// `move_mount(mnt, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH)`: attaches a detached
/// mount at `target`. This is the only call here that changes the mount table.
pub fn move_mount_to(mnt: BorrowedFd<'_>, target: &Path) -> Result<(), Errno> {
    let t = cpath(target)?;
    // SAFETY: both path pointers are valid NUL-terminated strings for the call.
    unit_result(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            mnt.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
}
