//! The shim's errors: each names the file, annotation, mount or command involved, and
//! becomes a ttrpc error whose text containerd logs and returns to its client.

use std::path::PathBuf;

/// Anything a task request can fail on.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    /// siloc exited non-zero; `msg` is its last JSON log line's message (or stderr).
    #[error("siloc {cmd} failed (exit status {status}): {msg}")]
    Siloc {
        cmd: String,
        status: i32,
        msg: String,
    },
    /// The siloc binary could not be started (missing, not executable).
    #[error(
        "cannot run siloc binary {path}: {source} (set BinaryName in the runtime options, or put siloc on containerd's PATH)"
    )]
    SilocMissing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Bundle { path: PathBuf, msg: String },
    /// A rootfs mount from CreateTaskRequest the shim cannot hand over or mount.
    #[error("rootfs mount {index} (type {fstype:?}, source {source_path:?}): {msg}")]
    Mount {
        index: usize,
        fstype: String,
        source_path: String,
        msg: String,
    },
    /// The pod's sandbox container, whose user namespace an app container joins.
    #[error("sandbox {sandbox} (annotation io.kubernetes.cri.sandbox-id): {msg}")]
    Sandbox { sandbox: String, msg: String },
    #[error("process {0:?} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Precondition(String),
    /// A second create of a container id the shim already serves.
    #[error("{0} already exists")]
    AlreadyExists(String),
}

/// The error of a failed `siloc kill` as containerd's runc shim words it
/// (`checkKillError`, containerd pkg/process/utils.go): a container that no longer
/// exists, or whose processes are gone ("does not exist", "container not running",
/// "no such process", "process already finished"), is [`ShimError::NotFound`], which
/// containerd takes as "already stopped" and goes on to delete the task. Any other
/// error is kept. Without this, a pod whose container's state went away behind the
/// shim (a `siloc delete` that removed the state and then failed) never stops:
/// containerd retries the kill forever.
pub fn kill_error(e: ShimError) -> ShimError {
    match &e {
        ShimError::Siloc { msg, .. } => {
            let m = msg.to_ascii_lowercase();
            if m.contains("does not exist") {
                ShimError::NotFound(format!("no such container: {msg}"))
            } else if m.contains("container not running")
                || m.contains("no such process")
                || m.contains("process already finished")
            {
                ShimError::NotFound(format!("process already finished: {msg}"))
            } else {
                e
            }
        }
        _ => e,
    }
}

/// `path`-naming io error constructor.
pub fn io_at(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ShimError {
    let path = path.into();
    move |source| ShimError::Io { path, source }
}

impl From<ShimError> for containerd_shim::protos::ttrpc::Error {
    fn from(e: ShimError) -> Self {
        use containerd_shim::protos::ttrpc::{Code, Error, get_status};
        let code = match &e {
            ShimError::NotFound(_) => Code::NOT_FOUND,
            ShimError::Invalid(_) | ShimError::Mount { .. } | ShimError::Bundle { .. } => {
                Code::INVALID_ARGUMENT
            }
            ShimError::Precondition(_) => Code::FAILED_PRECONDITION,
            ShimError::AlreadyExists(_) => Code::ALREADY_EXISTS,
            _ => Code::UNKNOWN,
        };
        Error::RpcStatus(get_status(code, e.to_string()))
    }
}

impl From<ShimError> for containerd_shim::Error {
    fn from(e: ShimError) -> Self {
        containerd_shim::Error::Other(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, ShimError>;

#[cfg(test)]
mod tests {
    use super::*;

    fn siloc_err(msg: &str) -> ShimError {
        ShimError::Siloc {
            cmd: "kill".into(),
            status: 1,
            msg: msg.into(),
        }
    }

    #[test]
    fn kill_of_a_gone_container_is_not_found_as_for_runc() {
        for msg in [
            "container does not exist",
            "container not running",
            "ESRCH: No such process",
        ] {
            assert!(
                matches!(kill_error(siloc_err(msg)), ShimError::NotFound(m) if m.contains(msg)),
                "{msg}"
            );
        }
    }

    #[test]
    fn other_kill_errors_are_kept() {
        let e = kill_error(siloc_err("invalid signal: 99"));
        assert!(matches!(e, ShimError::Siloc { ref msg, .. } if msg == "invalid signal: 99"));
        let e = kill_error(ShimError::Invalid("x".into()));
        assert!(matches!(e, ShimError::Invalid(_)));
    }
}
