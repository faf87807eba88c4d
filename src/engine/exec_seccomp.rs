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
//! warning in siloc's log. A profile with `SCMP_ACT_NOTIFY` is refused before
//! anything starts ([`check`]): its listener fd would have to reach the agent from
//! inside the container.

use std::collections::HashMap;

use libcontainer::workload::{
    Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError,
};
use oci_spec::runtime::{LinuxSeccomp, LinuxSeccompAction, Spec};

/// Errors of [`check`].
#[derive(Debug, thiserror::Error)]
pub enum ExecSeccompError {
    #[error(
        "exec: the container's seccomp profile uses SCMP_ACT_NOTIFY, which siloc cannot apply to an exec'd process (its listener fd would have to reach the agent at listenerPath from inside the container)"
    )]
    Notify,
}

/// The container's filter for an exec'd process: `None` without `linux.seccomp`.
///
/// Errors: [`ExecSeccompError::Notify`] for a profile with a notify action.
pub fn check(container_spec: &Spec) -> Result<Option<LinuxSeccomp>, ExecSeccompError> {
    let Some(s) = container_spec
        .linux()
        .as_ref()
        .and_then(|l| l.seccomp().clone())
    else {
        return Ok(None);
    };
    let notify = s.default_action() == LinuxSeccompAction::ScmpActNotify
        || s.syscalls()
            .iter()
            .flatten()
            .any(|r| r.action() == LinuxSeccompAction::ScmpActNotify);
    if notify {
        return Err(ExecSeccompError::Notify);
    }
    Ok(Some(s))
}

/// siloc's executor ([`super::procname::Named`]) that installs `seccomp` last.
#[derive(Clone)]
pub struct Filtered {
    pub seccomp: Option<LinuxSeccomp>,
}

impl Executor for Filtered {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        if let Some(s) = &self.seccomp {
            install(s).map_err(ExecutorError::Other)?;
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

/// Loads `s` on the calling process, with no_new_privs first when the kernel needs it.
fn install(s: &LinuxSeccomp) -> Result<(), String> {
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
            unsafe { libc::close(fd) };
            Err(ExecSeccompError::Notify.to_string())
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
    fn the_filter_is_kept_and_notify_refused() {
        let plain = spec(serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_ERRNO"}]}));
        assert!(check(&plain).unwrap().is_some());
        let notify = spec(serde_json::json!({"defaultAction": "SCMP_ACT_ALLOW",
            "listenerPath": "/run/agent.sock",
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}));
        assert!(matches!(check(&notify), Err(ExecSeccompError::Notify)));
        let none: Spec = serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2",
            "root": {"path": "rootfs"}, "linux": {}}))
        .unwrap();
        assert!(check(&none).unwrap().is_none());
    }
}
