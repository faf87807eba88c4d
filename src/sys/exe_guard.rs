//! Protection against overwriting the siloc binary from inside a container (the
//! CVE-2019-5736 class). libcontainer's init and exec processes are clones of siloc
//! that enter the container before they exec the container's program, so a process
//! in the container can reach the siloc binary through `/proc/<pid>/exe`.
//!
//! Before `create`, `run` or `exec` does anything, siloc re-executes itself from a
//! detached, read-only bind mount of its own binary (`open_tree(OPEN_TREE_CLONE)` +
//! `mount_setattr(MOUNT_ATTR_RDONLY)` + `execveat(AT_EMPTY_PATH)`). Every clone then
//! has that read-only mount as its `/proc/<pid>/exe`, and opening it for writing fails
//! with EROFS. The mount is never attached to any mount table; it goes away with the
//! last process that runs from it. Cost: one extra execve (about a millisecond),
//! much less than copying the binary into a sealed memfd.
//!
//! A siloc that already runs from a read-only mount (installed on a read-only
//! filesystem, or bind-mounted read-only onto itself:
//! `mount --bind -o ro /usr/local/bin/siloc /usr/local/bin/siloc`) has that
//! protection without the re-exec: opening its `/proc/<pid>/exe` for writing fails
//! with EROFS all the same, so [`seal`] skips it (one `statfs(2)`).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys::mountapi;

/// Set in the environment of the re-executed siloc; removed again at once.
const MARK: &str = "_SILOC_EXE_SEALED";
/// Test hook (cargo feature `test-hooks` only): `SILOC_UNSAFE_NO_EXE_GUARD=1` skips the
/// protection, so a test can show that its attack works without it.
#[cfg(feature = "test-hooks")]
const DISABLE: &str = "SILOC_UNSAFE_NO_EXE_GUARD";

/// Re-executes siloc from a read-only detached mount of its binary, unless this
/// process already runs from one. Returns only when no re-exec happens: after the
/// re-exec, or when the kernel refuses (then siloc goes on unprotected and says so).
pub(crate) fn seal() {
    if std::env::var_os(MARK).is_some() {
        // SAFETY: called first thing in main, before any thread exists.
        unsafe { std::env::remove_var(MARK) };
        return;
    }
    #[cfg(feature = "test-hooks")]
    if std::env::var_os(DISABLE).is_some_and(|v| v == "1") {
        return;
    }
    if runs_read_only() {
        return;
    }
    if let Err(e) = reexec() {
        tracing::warn!("cannot re-execute from a read-only copy of the siloc binary: {e}");
    }
}

/// Whether this process's executable is on a read-only mount: statfs(2) of
/// `/proc/self/exe` reports the mount's flags (`ST_RDONLY` for a read-only mount or
/// superblock). Errors count as "no".
fn runs_read_only() -> bool {
    nix::sys::statvfs::statvfs("/proc/self/exe")
        .is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
}

fn reexec() -> Result<(), nix::Error> {
    let tree = mountapi::clone_tree(Path::new("/proc/self/exe"), false)?;
    mountapi::set_attr(tree.as_fd(), mountapi::MOUNT_ATTR_RDONLY, None, false)?;
    let args: Vec<CString> = std::env::args_os()
        .filter_map(|a| CString::new(a.as_bytes()).ok())
        .collect();
    let mut env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    env.push(CString::new(format!("{MARK}=1")).map_err(|_| nix::Error::EINVAL)?);
    let argv: Vec<*const libc::c_char> = args
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = env
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    // SAFETY: argv and envp are NULL-terminated arrays of pointers to NUL-terminated
    // strings that outlive the call; on success the call does not return.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            tree.as_raw_fd(),
            c"".as_ptr(),
            argv.as_ptr(),
            envp.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }
    Err(nix::Error::last())
}
