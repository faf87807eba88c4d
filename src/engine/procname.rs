//! siloc's name on the container processes libcontainer clones from it.
//!
//! libcontainer 0.7 names its clones with `prctl(PR_SET_NAME)` at the top of their
//! clone callbacks, `youki:[1:INTER]` for the intermediate process and
//! `youki:[2:INIT]` for the init (and for an `exec`'d process before it execs), with
//! no option to change it. What siloc can reach is the workload executor: the init
//! calls its `validate` once namespaces, cgroups and the rootfs are set up, before it
//! waits for `start` (libcontainer's process/init/process.rs). [`Named`] renames the
//! init there to [`INIT_NAME`], so a created container's init shows as siloc's in
//! `ps -e`, `top` and `perf` until it execs the container's program (which then names
//! it). The intermediate process (it lives a few milliseconds, until the init is
//! cloned) and the init's own setup before `validate` keep libcontainer's names.
//!
//! libcontainer installs the spec's seccomp filter before `validate`, so the rename
//! happens only when no action the filter could take on `prctl` kills, traps, traces
//! or notifies (see [`rename_is_safe`]); otherwise the init keeps `youki:[2:INIT]`.

use std::collections::HashMap;

use libcontainer::workload::default::DefaultExecutor;
use libcontainer::workload::{
    Executor, ExecutorError, ExecutorSetEnvsError, ExecutorValidationError,
};
use oci_spec::runtime::{LinuxSeccompAction, Spec};

/// The comm (at most 15 bytes, TASK_COMM_LEN in the kernel) of a container's init
/// while siloc runs in it: libcontainer's `[2:INIT]` stage tag, siloc's name.
pub const INIT_NAME: &std::ffi::CStr = c"siloc:[2:INIT]";

/// libcontainer's default executor (execvp of process.args), renaming the process to
/// [`INIT_NAME`] first.
#[derive(Clone, Default)]
pub struct Named;

impl Executor for Named {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        DefaultExecutor {}.exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        if rename_is_safe(spec) {
            // SAFETY: prctl(PR_SET_NAME) with a NUL-terminated string of at most 15
            // bytes. A failure (SCMP_ACT_ERRNO) only leaves the old name.
            unsafe { libc::prctl(libc::PR_SET_NAME, INIT_NAME.as_ptr(), 0, 0, 0) };
        }
        // The console as runc hands it over, before the program runs (console_fixup).
        super::console_fixup::in_container(spec);
        super::workload::reset_cpu_affinity(spec);
        // runc's program lookup, not libcontainer's (engine::workload).
        super::workload::find_spec_program(spec)
            .map(|_| ())
            .map_err(ExecutorValidationError::ArgValidationError)
    }

    fn setup_envs(&self, mut envs: HashMap<String, String>) -> Result<(), ExecutorSetEnvsError> {
        super::workload::default_home(&mut envs);
        DefaultExecutor {}.setup_envs(envs)
    }
}

/// Whether calling `prctl` is harmless under the spec's seccomp filter (already
/// installed when the executor runs): every action that could apply to `prctl` (the
/// default action and the action of each rule naming it) is SCMP_ACT_ALLOW, _LOG or
/// _ERRNO. A kill, trap, trace or notify action would turn the rename into a dead or
/// stopped container.
pub fn rename_is_safe(spec: &Spec) -> bool {
    call_is_safe(spec, "prctl")
}

/// Whether calling syscall `name` is harmless under the spec's seccomp filter: the
/// rule of [`rename_is_safe`] for any syscall.
pub fn call_is_safe(spec: &Spec, name: &str) -> bool {
    let Some(seccomp) = spec.linux().as_ref().and_then(|l| l.seccomp().as_ref()) else {
        return true;
    };
    let harmless = |a: LinuxSeccompAction| {
        matches!(
            a,
            LinuxSeccompAction::ScmpActAllow
                | LinuxSeccompAction::ScmpActLog
                | LinuxSeccompAction::ScmpActErrno
        )
    };
    harmless(seccomp.default_action())
        && seccomp
            .syscalls()
            .iter()
            .flatten()
            .all(|rule| !rule.names().iter().any(|n| n == name) || harmless(rule.action()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seccomp: serde_json::Value) -> Spec {
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "linux": { "seccomp": seccomp }
        }))
        .unwrap()
    }

    #[test]
    fn rename_only_when_prctl_cannot_kill() {
        let none: Spec =
            serde_json::from_value(serde_json::json!({"ociVersion": "1.0.2"})).unwrap();
        assert!(rename_is_safe(&none));
        // docker's shape: deny by errno, prctl allowed
        assert!(rename_is_safe(&spec(serde_json::json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "syscalls": [{"names": ["read", "prctl"], "action": "SCMP_ACT_ALLOW"}]
        }))));
        assert!(!rename_is_safe(&spec(serde_json::json!({
            "defaultAction": "SCMP_ACT_KILL",
            "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]
        }))));
        assert!(!rename_is_safe(&spec(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["prctl"], "action": "SCMP_ACT_KILL_PROCESS"}]
        }))));
        assert!(!rename_is_safe(&spec(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["prctl"], "action": "SCMP_ACT_NOTIFY"}]
        }))));
        // a kill rule for another syscall does not matter
        assert!(rename_is_safe(&spec(serde_json::json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": ["ptrace"], "action": "SCMP_ACT_KILL"}]
        }))));
    }
}
