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
//! the program is exec'd. By then libcontainer has dropped the process's capabilities,
//! and the kernel loads a filter without no_new_privs only for a caller with
//! CAP_SYS_ADMIN in its user namespace (seccomp(2)). runc loads the filter of a
//! process without `noNewPrivileges` before it drops the capabilities, so an exec'd
//! process keeps no_new_privs off (runc 1.1.5 setns_init_linux.go: `InitSeccomp`
//! before `finalizeNamespace`; `kubectl exec` into a pod with the RuntimeDefault
//! profile and no `allowPrivilegeEscalation: false`). siloc gets the same result on
//! top of libcontainer ([`admin_copy`], [`LoadCaps`]): the `--process` file
//! libcontainer reads lists CAP_SYS_ADMIN in its effective (and permitted) set when
//! the process has the filter, no `noNewPrivileges: true` and no CAP_SYS_ADMIN of its
//! own; the executor loads the filter with it and drops it again before the program
//! runs, which then holds exactly the file's capabilities, no_new_privs off. As in
//! runc, that drop (capset(2)) happens under the filter. A process that still lacks
//! CAP_SYS_ADMIN when the filter loads (none expected) gets no_new_privs first, with a
//! warning in siloc's log, rather than no filter.
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
use std::path::{Path, PathBuf};
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
    /// The `--process` file (or siloc's copy of it) for [`admin_copy`].
    #[error("--process {path}: {msg}")]
    ProcessFile { path: PathBuf, msg: String },
}

/// The capability siloc lends an exec'd process for loading its filter.
const ADMIN: &str = "CAP_SYS_ADMIN";

/// Which of an exec'd process's capability sets siloc added CAP_SYS_ADMIN to, so that
/// its filter loads without no_new_privs (module doc); [`Filtered`] drops it from
/// these sets again once the filter is loaded. All `false`: nothing was added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadCaps {
    /// Added to `capabilities.effective`.
    pub effective: bool,
    /// Added to `capabilities.permitted`.
    pub permitted: bool,
}

/// The process JSON `p` (runtime-spec config.md "process") with CAP_SYS_ADMIN added
/// where the module doc says, and what was added; `None` when nothing needs adding:
/// `noNewPrivileges: true` (libcontainer sets no_new_privs, the filter loads without
/// the capability, as runc loads it then), no `capabilities` (libcontainer drops
/// nothing, so the process keeps the runtime's), no `effective` list (libcontainer
/// keeps the permitted set effective), or CAP_SYS_ADMIN already effective.
pub fn with_admin(p: &serde_json::Value) -> Option<(serde_json::Value, LoadCaps)> {
    if p.get("noNewPrivileges") == Some(&serde_json::Value::Bool(true)) {
        return None;
    }
    let caps = p.get("capabilities")?.as_object()?;
    let lacks = |set: &str| {
        caps.get(set)
            .and_then(|v| v.as_array())
            .is_some_and(|l| !l.iter().any(|c| c.as_str() == Some(ADMIN)))
    };
    if !lacks("effective") {
        return None;
    }
    let added = LoadCaps {
        effective: true,
        permitted: lacks("permitted"),
    };
    let mut out = p.clone();
    for (set, add) in [
        ("effective", added.effective),
        ("permitted", added.permitted),
    ] {
        if let Some(l) = out["capabilities"][set].as_array_mut()
            && add
        {
            l.push(serde_json::Value::String(ADMIN.into()));
        }
    }
    Some((out, added))
}

/// A copy of process file `path` in `dir` made by [`with_admin`], and what it added;
/// `None` when the file can be used as it is. Call only for a container with a
/// filter. The caller removes the copy.
///
/// Errors: [`ExecSeccompError::ProcessFile`] when the file cannot be read or parsed,
/// or the copy cannot be written.
pub fn admin_copy(
    path: &Path,
    dir: &Path,
) -> Result<Option<(PathBuf, LoadCaps)>, ExecSeccompError> {
    let err = |msg: String| ExecSeccompError::ProcessFile {
        path: path.to_path_buf(),
        msg,
    };
    let text = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| err(e.to_string()))?;
    let Some((out, added)) = with_admin(&v) else {
        return Ok(None);
    };
    let copy = dir.join(format!("siloc-exec-seccomp-{}.json", std::process::id()));
    let body = serde_json::to_vec(&out).map_err(|e| err(e.to_string()))?;
    crate::sys::fs::write_atomic(&copy, &body).map_err(|e| err(e.to_string()))?;
    Ok(Some((copy, added)))
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

/// siloc's executor ([`super::procname::Named`]) that installs `seccomp` last, sends
/// a notify profile's listener fd on `agent_fd` ([`AgentHandOver::child_fd`]), then
/// drops the CAP_SYS_ADMIN [`admin_copy`] lent it (`lent`).
#[derive(Clone)]
pub struct Filtered {
    pub seccomp: Option<LinuxSeccomp>,
    pub agent_fd: Option<RawFd>,
    pub lent: LoadCaps,
}

impl Executor for Filtered {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        // The pty owned by the process before it runs, as runc hands it over; before
        // the filter, which might refuse the calls (console_fixup).
        super::console_fixup::wait_for_owner(spec);
        if let Some(s) = &self.seccomp {
            install(s, self.agent_fd).map_err(ExecutorError::Other)?;
        }
        give_back(self.lent).map_err(ExecutorError::Other)?;
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

/// Drops CAP_SYS_ADMIN from the sets `lent` names (effective first: capset(2) wants
/// the effective set inside the permitted one).
///
/// Errors: capset(2) refused, naming the set; the exec then fails rather than run the
/// program with a capability its process file does not give.
fn give_back(lent: LoadCaps) -> Result<(), String> {
    for (set, name, on) in [
        (caps::CapSet::Effective, "effective", lent.effective),
        (caps::CapSet::Permitted, "permitted", lent.permitted),
    ] {
        if on {
            caps::drop(None, set, caps::Capability::CAP_SYS_ADMIN).map_err(|e| {
                format!("exec: drop CAP_SYS_ADMIN (lent for the seccomp filter) from the {name} set: {e}")
            })?;
        }
    }
    Ok(())
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

    #[test]
    fn sys_admin_is_lent_only_where_missing() {
        let p = |v: serde_json::Value| {
            let mut base = serde_json::json!({"args": ["sh"], "cwd": "/"});
            base.as_object_mut()
                .unwrap()
                .extend(v.as_object().unwrap().clone());
            base
        };
        let three = serde_json::json!(["CAP_KILL", "CAP_AUDIT_WRITE", "CAP_NET_BIND_SERVICE"]);
        let caps = serde_json::json!({"bounding": three, "effective": three, "permitted": three});
        for nnp in [serde_json::json!(false), serde_json::Value::Null] {
            let mut v = p(serde_json::json!({"capabilities": caps}));
            if !nnp.is_null() {
                v["noNewPrivileges"] = nnp;
            }
            let (out, lent) = with_admin(&v).unwrap();
            assert_eq!(
                lent,
                LoadCaps {
                    effective: true,
                    permitted: true
                }
            );
            for set in ["effective", "permitted"] {
                assert_eq!(out["capabilities"][set].as_array().unwrap().len(), 4);
                assert_eq!(out["capabilities"][set][3], ADMIN);
            }
            // bounding is left as it is: the kernel does not check it for capset(2).
            assert_eq!(out["capabilities"]["bounding"], three);
        }
        // no_new_privs requested, no capabilities, no effective list, already there.
        let mut nnp = p(serde_json::json!({"capabilities": caps}));
        nnp["noNewPrivileges"] = serde_json::json!(true);
        assert!(with_admin(&nnp).is_none());
        assert!(with_admin(&p(serde_json::json!({}))).is_none());
        assert!(
            with_admin(&p(
                serde_json::json!({"capabilities": {"permitted": three}})
            ))
            .is_none()
        );
        let admin = serde_json::json!(["CAP_SYS_ADMIN"]);
        let has = p(serde_json::json!({"capabilities": {"effective": admin, "permitted": admin}}));
        assert!(with_admin(&has).is_none());
        // only effective lacks it: only effective gets it.
        let half = p(serde_json::json!({"capabilities": {"effective": three, "permitted": admin}}));
        let (out, lent) = with_admin(&half).unwrap();
        assert_eq!(
            lent,
            LoadCaps {
                effective: true,
                permitted: false
            }
        );
        assert_eq!(out["capabilities"]["permitted"], admin);
    }
}
