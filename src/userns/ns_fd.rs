//! A throwaway user namespace carrying a container's ID mapping, needed only as the
//! `userns_fd` of `mount_setattr(MOUNT_ATTR_IDMAP)` (kernel doc: "idmappings").
//!
//! A child process unshares a user namespace and waits; the parent writes its
//! uid_map/gid_map, opens `/proc/<child>/ns/user`, and kills the child. The open fd
//! keeps the namespace alive for as long as the caller holds it.

use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;

use crate::sys::fork;

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
    // The helper unshares, says whether it could, and waits until the parent has
    // written its maps and opened the namespace (the Helper's drop ends and reaps it).
    let helper = fork::spawn(|sock| {
        let outcome = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)
            .map(|()| None)
            .map_err(|e| (0, e));
        if fork::report(sock, outcome).is_ok() {
            fork::wait_for_parent(sock);
        }
        0
    })
    .map_err(UsernsFdError::Fork)?;
    match fork::receive(helper.sock()) {
        Ok(Ok(_)) => {}
        _ => return Err(UsernsFdError::Unshare),
    }
    for (file, maps) in [("uid_map", uid), ("gid_map", gid)] {
        let path = format!("/proc/{}/{file}", helper.pid());
        File::options()
            .write(true)
            .open(&path)
            .and_then(|mut f| f.write_all(map_text(maps).as_bytes()))
            .map_err(|source| UsernsFdError::WriteMap {
                file: file.to_string(),
                source,
            })?;
    }
    let ns = File::open(format!("/proc/{}/ns/user", helper.pid())).map_err(UsernsFdError::Open)?;
    Ok(OwnedFd::from(ns))
}
