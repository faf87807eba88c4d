//! What a `create` killed inside libcontainer leaves alive.
//!
//! libcontainer 0.7 saves the container's state as `creating` without a pid before it
//! clones the intermediate process, and saves the pid only once the init reported
//! ready. A SIGKILL of siloc's create (or of the runc shim running it) in between
//! leaves that state and an init nobody knows: pid 1 of its PID namespace, reparented
//! to the host's init, waiting for `start` on a socket whose state dir `delete
//! --force` then removes. Nothing has a pid to kill it by, and it kept running with
//! the container's cgroups and user-namespace ID range (which delete released, for
//! the next container to get). runc 1.1.5's children ended with runc in the same
//! window (9 SIGKILLs under containerd left no process); here `delete` finds them in
//! the container's cgroups.

use std::path::{Path, PathBuf};

/// The comms of libcontainer's clones before they exec the container's program:
/// its intermediate process, its init, and the init once engine::procname renamed it.
const CLONE_COMMS: [&str; 3] = ["youki:[1:INTER]", "youki:[2:INIT]", "siloc:[2:INIT]"];

/// How long each left process may take to die.
const DEATH: std::time::Duration = std::time::Duration::from_secs(2);

/// The host pids in cgroup dirs `dirs` (each listing its processes in `cgroup.procs`)
/// that are container `id`'s own unexec'd clones: a comm of [`CLONE_COMMS`] and `id`
/// among the arguments of their command line (the create that cloned them). Another
/// container's processes at the same cgroupsPath are neither.
pub fn find(dirs: &[PathBuf], id: &str) -> Vec<i32> {
    let mut pids: Vec<i32> = dirs
        .iter()
        .flat_map(|d| super::foreign_procs::procs_of(d))
        .filter(|pid| is_clone_of(Path::new(&format!("/proc/{pid}")), id))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// SIGKILLs (pidfd_send_signal, never a reused pid) what [`find`] lists and waits for
/// each to die. Errors: the pids still alive after [`DEATH`] each.
pub fn kill(dirs: &[PathBuf], id: &str) -> Result<(), Vec<i32>> {
    let left: Vec<i32> = find(dirs, id)
        .into_iter()
        .filter(|pid| !crate::sys::pidfd::kill_and_wait(nix::unistd::Pid::from_raw(*pid), DEATH))
        .collect();
    if left.is_empty() { Ok(()) } else { Err(left) }
}

/// Whether the process at `proc_dir` (a /proc/PID) is a clone of container `id`'s create.
fn is_clone_of(proc_dir: &Path, id: &str) -> bool {
    let comm = std::fs::read_to_string(proc_dir.join("comm")).unwrap_or_default();
    if !CLONE_COMMS.contains(&comm.trim_end_matches('\n')) {
        return false;
    }
    let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
    cmdline.split(|b| *b == 0).any(|a| a == id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(dir: &Path, comm: &str, args: &[&str]) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(dir.join("cmdline"), args.join("\0") + "\0").unwrap();
        dir.to_path_buf()
    }

    #[test]
    fn only_an_unexeced_clone_of_this_containers_create_counts() {
        let t = tempfile::tempdir().unwrap();
        let args = [
            "siloc",
            "--root",
            "/run/siloc",
            "create",
            "--bundle",
            "b",
            "ctr1",
        ];
        let init = fake(&t.path().join("1"), "siloc:[2:INIT]", &args);
        assert!(is_clone_of(&init, "ctr1"));
        assert!(!is_clone_of(&init, "ctr"), "a prefix of the id");
        assert!(!is_clone_of(&init, "other"));
        let inter = fake(&t.path().join("2"), "youki:[1:INTER]", &args);
        assert!(is_clone_of(&inter, "ctr1"));
        // exec'd the container's program: another container's running one
        let sleeper = fake(&t.path().join("3"), "sleep", &["sleep", "ctr1"]);
        assert!(!is_clone_of(&sleeper, "ctr1"));
        assert!(!is_clone_of(&t.path().join("gone"), "ctr1"));
    }
}
