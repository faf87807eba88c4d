//! The container's seccomp filter on `exec`'d processes.
//!
//! libcontainer 0.7's tenant builder rebuilds `linux` for an exec'd process from the
//! namespaces, cgroup path, personality and time offsets only
//! (container/tenant_builder.rs, `adapt_spec_for_tenant`): `linux.seccomp` is dropped,
//! so an exec'd process (`kubectl exec`, `podman exec`) ran without the container's
//! filter. runc and crun apply it to every exec'd process (runtime-spec config-linux
//! "Seccomp": the filter applies to the container's processes).
//!
//! [`Filtered`] is the exec executor: it installs the container's filter right before
//! the program is exec'd, the point libcontainer uses for a filter under
//! `noNewPrivileges`. By then libcontainer has dropped the process's capabilities, and
//! the kernel loads a filter without no_new_privs only for a caller with
//! CAP_SYS_ADMIN (seccomp(2)); a process without it gets no_new_privs first, with a
//! warning in siloc's log.
//!
//! A profile with `SCMP_ACT_NOTIFY` gives the exec'd process a listener fd, which goes
//! to the seccomp agent at `listenerPath` as runc hands it over (runtime-spec
//! config-linux "Seccomp", the `listenerPath` state; runc's setnsProcess, procSeccomp):
//! one SCM_RIGHTS message carrying the fd, its payload the container process state
//! (`fds: ["seccompFd"]`, the exec'd process's pid, `listenerMetadata`, the container
//! state with status `running`). The agent's socket is on the host, so the runtime
//! process ([`AgentHandOver`]) connects to it before libcontainer forks (no agent:
//! runc's "failed to connect with seccomp agent", nothing started) and keeps a socket
//! pair whose other end the exec'd process inherits (libcontainer marks it
//! close-on-exec, so the program never holds it): the executor sends the fresh
//! listener fd over it, and once libcontainer returns the process's pid the runtime
//! forwards fd and state to the agent. As in runc, the few syscalls between loading
//! the filter and exec (the sendmsg and close of the hand-over) are under the filter.

use std::collections::HashMap;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use libcontainer::workload::{
    Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError,
};
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::unistd::Pid;
use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction, Spec, State};

/// How long the runtime waits for the exec'd process's listener fd once libcontainer
/// has started it (the process loads its filter right before exec).
const FD_WAIT: Duration = Duration::from_secs(10);

/// Errors of the exec seccomp path.
#[derive(Debug, thiserror::Error)]
pub enum ExecSeccompError {
    /// runc's text for an agent that cannot be reached, or a notify profile without
    /// `linux.seccomp.listenerPath`.
    #[error("unable to start container process: {0}")]
    Agent(String),
    #[error("exec: seccomp notify fd hand-over: {step}: {errno}")]
    HandOver {
        step: &'static str,
        errno: nix::Error,
    },
    #[error(
        "exec: seccomp notify fd hand-over: the exec'd process ended without sending its listener fd"
    )]
    NoFd,
    #[error("exec: seccomp state for the agent: {0}")]
    State(String),
}

/// The container's filter for an exec'd process: `None` without `linux.seccomp`.
pub fn check(container_spec: &Spec) -> Option<LinuxSeccomp> {
    container_spec
        .linux()
        .as_ref()
        .and_then(|l| l.seccomp().clone())
}

/// Whether the profile has an `SCMP_ACT_NOTIFY` action (default or in a rule).
pub fn is_notify(s: &LinuxSeccomp) -> bool {
    s.default_action() == LinuxSeccompAction::ScmpActNotify
        || s.syscalls()
            .iter()
            .flatten()
            .any(|r| r.action() == LinuxSeccompAction::ScmpActNotify)
}

/// The runtime's side of handing an exec'd process's listener fd to the seccomp
/// agent (module doc): the connection to the agent and a socket pair.
pub struct AgentHandOver {
    agent: UnixStream,
    ours: UnixStream,
    theirs: OwnedFd,
    path: PathBuf,
    metadata: String,
}

impl AgentHandOver {
    /// Connects to `s`'s agent when `s` notifies; `None` for a profile without
    /// `SCMP_ACT_NOTIFY`. Call before libcontainer forks, as host root.
    ///
    /// Errors: [`ExecSeccompError::Agent`] in runc's words (no `listenerPath`, or
    /// connect(2) failed); [`ExecSeccompError::HandOver`] for the socket pair.
    pub fn connect(s: &LinuxSeccomp) -> Result<Option<AgentHandOver>, ExecSeccompError> {
        if !is_notify(s) {
            return Ok(None);
        }
        let Some(path) = s.listener_path().clone() else {
            return Err(ExecSeccompError::Agent(
                "seccomp listenerPath is not set".into(),
            ));
        };
        let agent = UnixStream::connect(&path)
            .map_err(|e| ExecSeccompError::Agent(super::seccomp_compat::agent_error(&path, &e)))?;
        let (ours, theirs) = nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::Stream,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|errno| ExecSeccompError::HandOver {
            step: "socketpair",
            errno,
        })?;
        Ok(Some(AgentHandOver {
            agent,
            ours: UnixStream::from(ours),
            theirs,
            path,
            metadata: s.listener_metadata().clone().unwrap_or_default(),
        }))
    }

    /// The fd number the exec'd process sends its listener fd on (inherited through
    /// libcontainer's clones).
    pub fn child_fd(&self) -> RawFd {
        self.theirs.as_raw_fd()
    }

    /// Takes the listener fd the exec'd process `pid` sent and hands it to the agent
    /// with the container process state (`container` is the container's state, status
    /// `running`).
    ///
    /// Errors: [`ExecSeccompError::NoFd`] when the process ended (or took longer than
    /// 10 s) without sending one; [`ExecSeccompError::HandOver`] naming the failed
    /// recvmsg/sendmsg; [`ExecSeccompError::State`] when the state cannot be built.
    pub fn finish(self, pid: Pid, container: State) -> Result<(), ExecSeccompError> {
        let AgentHandOver {
            agent,
            ours,
            theirs,
            path,
            metadata,
        } = self;
        drop(theirs);
        let step = |step| move |errno| ExecSeccompError::HandOver { step, errno };
        ours.set_read_timeout(Some(FD_WAIT))
            .map_err(|e| step("SO_RCVTIMEO")(io_errno(&e)))?;
        let mut buf = [0u8; 64];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        let msg = recvmsg::<()>(
            ours.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::empty(),
        )
        .map_err(|e| match e {
            nix::Error::EAGAIN => ExecSeccompError::NoFd,
            e => step("recvmsg")(e),
        })?;
        let mut fds = Vec::new();
        for c in msg.cmsgs().map_err(step("recvmsg"))? {
            if let ControlMessageOwned::ScmRights(f) = c {
                // SAFETY: SCM_RIGHTS just installed these fds in this process.
                fds.extend(f.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        let Some(listener) = fds.into_iter().next() else {
            return Err(ExecSeccompError::NoFd);
        };
        let state = oci_spec::runtime::ContainerProcessStateBuilder::default()
            .version(oci_spec::runtime::VERSION)
            .fds(vec![oci_spec::runtime::SECCOMP_FD_NAME.to_string()])
            .pid(pid.as_raw())
            .metadata(metadata)
            .state(container)
            .build()
            .map_err(|e| ExecSeccompError::State(e.to_string()))?;
        let body = serde_json::to_vec(&state)
            .map_err(|e| ExecSeccompError::State(format!("{}: {e}", path.display())))?;
        let fd = [listener.as_raw_fd()];
        sendmsg::<()>(
            agent.as_raw_fd(),
            &[IoSlice::new(&body)],
            &[ControlMessage::ScmRights(&fd)],
            MsgFlags::empty(),
            None,
        )
        .map_err(step("sendmsg to the seccomp agent"))?;
        Ok(())
    }
}

fn io_errno(e: &std::io::Error) -> nix::Error {
    nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO))
}

/// The state [`AgentHandOver::finish`] sends: container `id` running, its init `pid`.
pub fn running_state(
    id: &str,
    pid: i32,
    bundle: &std::path::Path,
    annotations: HashMap<String, String>,
) -> Result<State, ExecSeccompError> {
    oci_spec::runtime::StateBuilder::default()
        .version(oci_spec::runtime::VERSION)
        .id(id)
        .status(oci_spec::runtime::ContainerState::Running)
        .pid(pid)
        .bundle(bundle.to_path_buf())
        .annotations(annotations)
        .build()
        .map_err(|e| ExecSeccompError::State(e.to_string()))
}

/// siloc's executor ([`super::procname::Named`]) that installs `seccomp` last and
/// sends a notify profile's listener fd on `agent_fd` ([`AgentHandOver::child_fd`]).
#[derive(Clone)]
pub struct Filtered {
    pub seccomp: Option<LinuxSeccomp>,
    pub agent_fd: Option<RawFd>,
}

impl Executor for Filtered {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        if let Some(s) = &self.seccomp {
            install(s, self.agent_fd).map_err(ExecutorError::Other)?;
        }
        super::procname::Named.exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        super::procname::Named.validate(spec)
    }

    fn setup_envs(&self, envs: HashMap<String, String>) -> Result<(), ExecutorSetEnvsError> {
        super::procname::Named.setup_envs(envs)
    }
}

/// Loads `s` on the calling process, with no_new_privs first when the kernel needs it;
/// a listener fd goes out on `agent_fd`.
fn install(s: &LinuxSeccomp, agent_fd: Option<RawFd>) -> Result<(), String> {
    let admin = caps::has_cap(
        None,
        caps::CapSet::Effective,
        caps::Capability::CAP_SYS_ADMIN,
    )
    .unwrap_or(false);
    // SAFETY: prctl(PR_GET_NO_NEW_PRIVS) takes no pointers.
    let nnp = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } == 1;
    if !admin && !nnp {
        tracing::warn!(
            "exec: no_new_privs set on the exec'd process: its seccomp filter cannot be loaded without CAP_SYS_ADMIN otherwise"
        );
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS, 1) takes no pointers.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(format!(
                "exec: set no_new_privs for the seccomp filter: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    match libcontainer::seccomp::initialize_seccomp(s) {
        Ok(None) => Ok(()),
        Ok(Some(fd)) => {
            // SAFETY: the notify fd initialize_seccomp returned is ours to close.
            let listener = unsafe { OwnedFd::from_raw_fd(fd) };
            let Some(sock) = agent_fd else {
                return Err("exec: a seccomp listener fd but no agent to hand it to".into());
            };
            let fds = [listener.as_raw_fd()];
            let sent = sendmsg::<()>(
                sock,
                &[IoSlice::new(oci_spec::runtime::SECCOMP_FD_NAME.as_bytes())],
                &[ControlMessage::ScmRights(&fds)],
                MsgFlags::empty(),
                None,
            );
            // The runtime holds it now (in flight or received); ours closes on drop.
            // SAFETY: agent_fd was inherited for this one message.
            unsafe { libc::close(sock) };
            sent.map(|_| ())
                .map_err(|e| format!("exec: send the seccomp listener fd to siloc: {e}"))
        }
        Err(e) => Err(format!("exec: load the container's seccomp filter: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seccomp: serde_json::Value) -> Spec {
        serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2",
            "root": {"path": "rootfs"}, "linux": {"seccomp": seccomp}}))
        .unwrap()
    }

    #[test]
    fn the_filter_is_kept_and_notify_found() {
        let plain = spec(serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}]}));
        let f = check(&plain).unwrap();
        assert!(!is_notify(&f));
        assert!(AgentHandOver::connect(&f).unwrap().is_none());
        let notify = spec(serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
            "listenerPath": "/nonexistent/agent.sock",
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}));
        let f = check(&notify).unwrap();
        assert!(is_notify(&f));
        let e = AgentHandOver::connect(&f).err().unwrap().to_string();
        assert_eq!(
            e,
            "unable to start container process: failed to connect with seccomp agent \
             specified in the seccomp profile: dial unix /nonexistent/agent.sock: connect: \
             no such file or directory"
        );
        let none: Spec = serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2",
            "root": {"path": "rootfs"}, "linux": {}}))
        .unwrap();
        assert!(check(&none).is_none());
    }
}
