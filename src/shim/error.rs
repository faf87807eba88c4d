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
