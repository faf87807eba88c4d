//! A throwaway user namespace carrying a container's ID mapping, needed only as the
//! `userns_fd` of `mount_setattr(MOUNT_ATTR_IDMAP)` (kernel doc: "idmappings").
//!
//! A child process unshares a user namespace and waits; the parent writes its
//! uid_map/gid_map, opens `/proc/<child>/ns/user`, and kills the child. The open fd
//! keeps the namespace alive for as long as the caller holds it.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, fork, pipe, read};

/// One line of a uid_map/gid_map: container start, host start, length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdMap {
    pub container_id: u32,
    pub host_id: u32,
    pub size: u32,
}

/// Errors while making the namespace; each says which step failed.
#[derive(Debug, thiserror::Error)]
pub enum UsernsFdError {
    #[error("create throwaway user namespace: {0}")]
    Fork(nix::Error),
    #[error("the throwaway user namespace process failed to unshare CLONE_NEWUSER")]
    Unshare,
    #[error("write {file} of throwaway user namespace: {source}")]
    WriteMap {
        file: String,
        source: std::io::Error,
    },
    #[error("open throwaway user namespace: {0}")]
    Open(std::io::Error),
}

fn map_text(maps: &[IdMap]) -> String {
    maps.iter()
        .map(|m| format!("{} {} {}\n", m.container_id, m.host_id, m.size))
        .collect()
}

/// Makes a user namespace with the given uid and gid mappings and returns an fd to it.
///
/// Errors: [`UsernsFdError`]. The helper process is always reaped.
pub fn userns_with_mapping(uid: &[IdMap], gid: &[IdMap]) -> Result<OwnedFd, UsernsFdError> {
    let (ready_r, ready_w) = pipe().map_err(UsernsFdError::Fork)?;
    let (go_r, go_w) = pipe().map_err(UsernsFdError::Fork)?;
    // SAFETY: the child only calls async-signal-safe functions (unshare, write, read,
    // _exit) before it exits; siloc is single-threaded when it prepares a rootfs.
    let child = match unsafe { fork() }.map_err(UsernsFdError::Fork)? {
        ForkResult::Child => {
            drop(ready_r);
            drop(go_w);
            // SAFETY: plain syscalls on fds this process owns.
            unsafe {
                let ok: u8 = if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                    1
                } else {
                    0
                };
                libc::write(ready_w.as_raw_fd(), &ok as *const u8 as *const _, 1);
                let mut b = 0u8;
                libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut _, 1);
                libc::_exit(0);
            }
        }
        ForkResult::Parent { child } => child,
    };
    drop(ready_w);
    drop(go_r);
    let result = finish(child, &ready_r, uid, gid);
    // Waking the child by closing its pipe, and killing it, both end it; reap it always.
    drop(go_w);
    let _ = kill(child, Signal::SIGKILL);
    let _ = waitpid(child, None);
    result
}

fn finish(
    child: Pid,
    ready: &OwnedFd,
    uid: &[IdMap],
    gid: &[IdMap],
) -> Result<OwnedFd, UsernsFdError> {
    let mut ok = [0u8; 1];
    match read(ready.as_raw_fd(), &mut ok) {
        Ok(1) if ok[0] == 1 => {}
        _ => return Err(UsernsFdError::Unshare),
    }
    for (file, maps) in [("uid_map", uid), ("gid_map", gid)] {
        let path = format!("/proc/{child}/{file}");
        File::options()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(map_text(maps).as_bytes()))
            .map_err(|source| UsernsFdError::WriteMap {
                file: file.to_string(),
                source,
            })?;
    }
    let ns = File::open(format!("/proc/{child}/ns/user")).map_err(UsernsFdError::Open)?;
    Ok(OwnedFd::from(ns))
}
