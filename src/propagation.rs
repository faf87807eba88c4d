//! Per-mount propagation options (`shared`, `rslave`, `rprivate`, `unbindable`, ...
//! in `mounts[].options`, runtime-spec config.md "Mounts" / mount(8)).
//!
//! libcontainer 0.7 builds bind mounts with open_tree/move_mount and never applies
//! these options, so a bind of a shared host mount stays a full peer: host mounts
//! reach `rprivate` binds, and container mounts would reach the host. siloc applies
//! them after libcontainer has built the container and before its process starts,
//! from a short-lived child that joins the container's mount namespace (where paths
//! are the container's own after pivot_root).

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, setns};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, fork};
use oci_spec::runtime::Spec;

/// A propagation change that failed; names the mount.
#[derive(Debug, thiserror::Error)]
pub enum PropagationError {
    #[error("mounts: cannot set propagation {option} on {destination}: {errno}")]
    Apply {
        destination: String,
        option: String,
        errno: nix::Error,
    },
    #[error("mounts: propagation: {0}")]
    Sys(nix::Error),
}

/// The propagation flag an option stands for (mount(8)), if it is one.
pub fn flag(option: &str) -> Option<MsFlags> {
    Some(match option {
        "shared" => MsFlags::MS_SHARED,
        "rshared" => MsFlags::MS_SHARED | MsFlags::MS_REC,
        "slave" => MsFlags::MS_SLAVE,
        "rslave" => MsFlags::MS_SLAVE | MsFlags::MS_REC,
        "private" => MsFlags::MS_PRIVATE,
        "rprivate" => MsFlags::MS_PRIVATE | MsFlags::MS_REC,
        "unbindable" => MsFlags::MS_UNBINDABLE,
        "runbindable" => MsFlags::MS_UNBINDABLE | MsFlags::MS_REC,
        _ => return None,
    })
}

/// (destination, option, flag) for every propagation option in the spec's mounts,
/// in mount order.
pub fn wanted(spec: &Spec) -> Vec<(String, String, MsFlags)> {
    spec.mounts()
        .iter()
        .flatten()
        .flat_map(|m| {
            let dest = m.destination().display().to_string();
            m.options()
                .iter()
                .flatten()
                .filter_map(move |o| flag(o).map(|f| (dest.clone(), o.clone(), f)))
        })
        .collect()
}

/// Applies the spec's propagation options inside the mount namespace of `pid`.
/// Does nothing (and forks nothing) when the spec has none.
///
/// Errors: the first change that fails, naming the mount.
pub fn apply(spec: &Spec, pid: Pid) -> Result<(), PropagationError> {
    let todo = wanted(spec);
    if todo.is_empty() {
        return Ok(());
    }
    let io = |e: std::io::Error| {
        PropagationError::Sys(nix::Error::from_raw(e.raw_os_error().unwrap_or(0)))
    };
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/mnt")).map_err(io)?;
    let (rd, wr) = nix::unistd::pipe().map_err(PropagationError::Sys)?;
    // SAFETY: the child only calls setns, mount, write and _exit before it ends; all
    // it reads was built before the fork. The parent reaps it.
    match unsafe { fork() }.map_err(PropagationError::Sys)? {
        ForkResult::Child => {
            drop(rd);
            // Report (index of the failed change, errno); index u32::MAX for setns.
            let report = |i: u32, e: nix::Error| {
                let mut b = [0u8; 8];
                b[..4].copy_from_slice(&i.to_ne_bytes());
                b[4..].copy_from_slice(&(e as i32).to_ne_bytes());
                let _ = nix::unistd::write(&wr, &b);
            };
            if let Err(e) = setns(&ns, CloneFlags::CLONE_NEWNS) {
                report(u32::MAX, e);
            } else {
                for (i, (dest, _, f)) in todo.iter().enumerate() {
                    if let Err(e) =
                        mount(None::<&str>, dest.as_str(), None::<&str>, *f, None::<&str>)
                    {
                        report(i as u32, e);
                        break;
                    }
                }
            }
            // SAFETY: _exit ends the child at once without running parent-owned state.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => {
            drop(wr);
            let mut b = [0u8; 8];
            let n = nix::unistd::read(std::os::fd::AsRawFd::as_raw_fd(&rd), &mut b).unwrap_or(0);
            let _ = waitpid(child, None);
            if n < 8 {
                return Ok(());
            }
            let idx = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            let errno = nix::Error::from_raw(i32::from_ne_bytes([b[4], b[5], b[6], b[7]]));
            match todo.get(idx as usize) {
                Some((destination, option, _)) => Err(PropagationError::Apply {
                    destination: destination.clone(),
                    option: option.clone(),
                    errno,
                }),
                None => Err(PropagationError::Sys(errno)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_map_to_flags() {
        assert_eq!(flag("rslave"), Some(MsFlags::MS_SLAVE | MsFlags::MS_REC));
        assert_eq!(flag("private"), Some(MsFlags::MS_PRIVATE));
        assert_eq!(flag("rbind"), None);
        let spec: Spec = serde_json::from_str(
            r#"{"ociVersion":"1.0.2","mounts":[
                {"destination":"/a","type":"bind","source":"/x","options":["rbind","rslave","ro"]},
                {"destination":"/b","type":"tmpfs","source":"tmpfs"}]}"#,
        )
        .unwrap();
        let w = wanted(&spec);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].0, "/a");
        assert_eq!(w[0].1, "rslave");
    }
}
