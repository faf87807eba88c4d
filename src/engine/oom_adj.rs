//! `process.oomScoreAdj` the runtime may not set, refused before anything is made.
//!
//! The kernel lets a process lower its `oom_score_adj` below the lowest value it has
//! held (`oom_score_adj_min`) only with CAP_SYS_RESOURCE (fs/proc/base.c
//! `__set_oom_adj`: EACCES); the container's processes inherit the runtime's value and
//! libcontainer 0.7 writes the spec's in the container, where the refusal surfaced as
//! a bare `io error`. runc 1.1.5's nsexec says `failed to update
//! /proc/self/oom_score_adj: Permission denied`. A pod sandbox asks for -998 (the
//! kubelet's), so on a host whose root lacks CAP_SYS_RESOURCE every pod failed with
//! that bare text (containerd's `restrict_oom_score_adj` is the remedy there).
//!
//! The check is the kernel's own rule: siloc writes the value to its own
//! `/proc/self/oom_score_adj` and, when the kernel takes it, writes its old value back
//! (raising it is always allowed). Only a value below siloc's current one is tried:
//! anything at or above it the kernel takes from anyone.

use oci_spec::runtime::Process;

const OWN: &str = "/proc/self/oom_score_adj";

/// The refusal, in runc's words, with the field and the remedy.
#[derive(Debug, thiserror::Error)]
#[error(
    "unable to start container process: failed to update /proc/self/oom_score_adj: \
     Permission denied (process.oomScoreAdj {wanted}: below the runtime's own {own}, \
     which needs CAP_SYS_RESOURCE; containerd: restrict_oom_score_adj = true)"
)]
pub struct OomAdjError {
    pub wanted: i32,
    pub own: i32,
}

/// Checks that the runtime may give `process` its `oomScoreAdj` (module doc). Reads
/// nothing when the spec sets none.
///
/// Errors: [`OomAdjError`] when the kernel refuses the value (EACCES). Other failures
/// (no procfs) let libcontainer try as before.
pub fn check(process: Option<&Process>) -> Result<(), OomAdjError> {
    let Some(wanted) = process.and_then(|p| p.oom_score_adj()) else {
        return Ok(());
    };
    let Ok(text) = std::fs::read_to_string(OWN) else {
        return Ok(());
    };
    let Ok(own) = text.trim().parse::<i32>() else {
        return Ok(());
    };
    if wanted >= own {
        return Ok(());
    }
    match std::fs::write(OWN, wanted.to_string()) {
        Ok(()) => {
            let _ = std::fs::write(OWN, own.to_string());
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => Err(OomAdjError { wanted, own }),
        Err(_) => Ok(()),
    }
}
