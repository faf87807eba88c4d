//! `features`: the runtime-spec "Features Structure" (features.md), listing only what
//! siloc does through libcontainer on this build.

use serde_json::json;

/// The features document as JSON.
pub(crate) fn document() -> serde_json::Value {
    let mut caps: Vec<String> = caps::all().iter().map(|c| c.to_string()).collect();
    caps.sort();
    let apparmor = std::path::Path::new("/sys/kernel/security/apparmor").exists();
    json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": oci_spec::runtime::VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "startContainer",
                  "poststart", "poststop"],
        "mountOptions": mount_options(),
        "linux": {
            "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "time", "user", "uts"],
            "capabilities": caps,
            "cgroup": {"v1": true, "v2": true, "systemd": true, "systemdUser": false,
                       "rdma": false},
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                            "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
                            "SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE",
                              "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": ["SCMP_ARCH_X86", "SCMP_ARCH_X86_64", "SCMP_ARCH_X32",
                          "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
                "knownFlags": crate::engine::seccomp_compat::KNOWN_FLAGS,
                "supportedFlags": crate::engine::seccomp_compat::supported_flags()
            },
            "apparmor": {"enabled": apparmor},
            "selinux": {"enabled": false},
            "intelRdt": {"enabled": true},
            "memoryPolicy": {
                "modes": crate::lifecycle::spec_compat::MEMORY_POLICY_MODES,
                "flags": crate::lifecycle::spec_compat::MEMORY_POLICY_FLAGS
            },
            "mountExtensions": {"idmap": {"enabled": true}}
        },
        "org.siloc.io": io_offers(),
        "annotations": {
            "io.siloc.version": env!("CARGO_PKG_VERSION"),
            "io.siloc.userns": "auto|off",
            "io.siloc.userns.size": "IDs in the container's range",
            "io.siloc.rootfs.layers": "JSON array of layer directories, base first",
            "io.siloc.rootfs.upper": "persistent writable directory",
            "io.siloc.rootfs.work": "with io.siloc.rootfs.upper: its existing overlay work dir (containerd-shim-siloc-v2 sets it)",
            "io.siloc.numa": "auto|node:N|off",
            "io.siloc.io": "class, max, weight, latency",
            "io.siloc.io.latency": "cgroup v2 io.latency target: 2ms, 500us or µs",
            "org.opencontainers.runc.checkpoint.enabled": "false",
            "io.siloc.runc.compat": RUNC_COMPAT.join(","),
            "io.siloc.host.cgroup.favordynmods": favordynmods(
                &crate::sys::mountinfo::read(None).unwrap_or_default()
            )
        }
    })
}

/// runc behaviours siloc gives on top of libcontainer 0.7, for callers that probe
/// (README "runc compatibility"): named hook failures and createContainer hooks in
/// the rootfs (engine::hooks), the pty fixed also for a caller's console socket
/// and in a user namespace (console_fixup, console_proxy, console_owner), `--pidfd-socket`, `update --cpu-burst`, v1
/// sub-cgroups removed on delete, a frozen cgroup refused instead of a hang; runc's
/// mount semantics (mount_compat; masked-path symlinks resolved as the init resolves
/// them); a namespace path of another type refused in runc's words
/// (engine::outer_namespaces), and namespaces the user namespace does not own
/// refused with runc 1.1.5's errors (engine::ns_owner; IPC sysctls there too); rlimits raising a hard limit
/// in a user namespace set as runc sets them (engine::rlimit_check); `update` leaving device rules alone as runc's does
/// (lifecycle::update); seccomp
/// (engine::seccomp_compat): errno profiles without no_new_privs, runc's agent
/// errors, ENOSYS for newer syscalls, TSYNC ignored; cgroups (engine::cgroup_compat,
/// engine::exec_cgroup, lifecycle::update_order): unified refused on v1, per-device
/// BFQ weights, pids.limit 0 as 1, a non-empty cgroup refused, the named and hybrid
/// unified hierarchies joined by init and exec, `exec --cgroup`, v1 cpu writes in an
/// order the kernel accepts; process setup (issue 19 item 4): HOME `/` for a uid
/// without a passwd entry (engine::workload), `exec --process` without `user`,
/// unknown capabilities warned about and left out, and the spec's
/// `SCHED_FLAG_RESET_ON_FORK` name (lifecycle::spec_compat), Go LookPath's
/// any-execute-bit rule (engine::workload), `exec` into a created container
/// (engine::exec_view), runc's `LISTEN_FDS` rule (cli::listen_fds), the CPU
/// affinity reset of init and exec and `linux.memoryPolicy` for exec
/// (engine::workload), runc 1.4's `linux.memoryPolicy` checks and texts
/// (lifecycle::spec_compat).
pub(crate) const RUNC_COMPAT: &[&str] = &[
    "hooks.named-errors",
    "hooks.createContainer-cwd-rootfs",
    "console.onlcr-owner-size",
    "console.userns-owner",
    "pidfd-socket",
    "update.cpu-burst",
    "delete.v1-sub-cgroups",
    "create.frozen-cgroup-refused",
    "mounts.bind-cleared-flags",
    "mounts.dev-read-only",
    "mounts.tmpfs-mode-of-covered-dir",
    "mounts.tmpcopyup",
    "mounts.destination-symlinks-in-rootfs",
    "mounts.proc-not-on-symlink",
    "mounts.masked-paths-once-shared-tmpfs",
    "mounts.masked-path-symlinks-as-init",
    "namespaces.path-type-checked",
    "namespaces.not-owned-runc-errors",
    "sysctl.ipc-not-owned-runc-error",
    "rlimits.userns-raise",
    "update.devices-unchanged",
    "seccomp.errno-without-nnp",
    "seccomp.notify-agent-errors",
    "seccomp.enosys-newer-syscalls",
    "seccomp.flags-tsync-ignored",
    "cgroup.v1-unified-refused",
    "cgroup.v1-bfq-weight-device",
    "cgroup.pids-limit-zero-is-one",
    "cgroup.non-empty-refused",
    "cgroup.v1-extra-hierarchies",
    "exec.cgroup",
    "update.v1-cpu-order",
    "exec.seccomp",
    "process.home-default",
    "exec.process-without-user",
    "capabilities.unknown-warning",
    "process.lookpath-any-exec-bit",
    "exec.created-container",
    "fds.listen-fds-runc-rule",
    "process.cpu-affinity-reset",
    "linux.memory-policy-runc-checks",
    "scheduler.flag-reset-on-fork",
];

/// Whether a cgroup hierarchy of this host is mounted with `favordynmods` (Linux 6.0+,
/// cgroup v2 and v1; kernel Documentation/admin-guide/cgroup-v2.rst): "on", else
/// "off: ..." with the remedy. Without it the first cgroup.procs write of every
/// create waits for an RCU grace period (the per-CPU cgroup_threadgroup_rwsem's
/// writer side, shared by all hierarchies), in every runtime.
pub(crate) fn favordynmods(mounts: &[crate::sys::mountinfo::Mount]) -> String {
    let on = mounts.iter().any(|m| {
        matches!(m.fs_type.as_str(), "cgroup" | "cgroup2")
            && m.super_options.iter().any(|o| o == "favordynmods")
    });
    if on {
        "on".into()
    } else {
        "off: cgroup moves wait for an RCU grace period; see README \"Host configuration\"".into()
    }
}

/// What this host offers for I/O classes (`siloc check` in detail): the cgroup
/// version and, per whole disk, the mechanisms missing (a siloc extension key; the
/// runtime-spec lets runtimes add their own).
fn io_offers() -> serde_json::Value {
    let (cgroup, disks) = crate::iopolicy::host::check(
        std::path::Path::new("/sys"),
        std::path::Path::new("/sys/fs/cgroup"),
    );
    let per: serde_json::Map<String, serde_json::Value> = disks
        .iter()
        .map(|d| {
            let ok: Vec<&str> = d
                .offers
                .iter()
                .filter(|o| o.available)
                .map(|o| o.mechanism)
                .collect();
            let missing: Vec<String> = d.offers.iter().filter_map(|o| o.missing.clone()).collect();
            (d.disk.clone(), json!({"available": ok, "missing": missing}))
        })
        .collect();
    json!({"cgroup": cgroup.word(), "disks": per})
}

/// runc's recursive mount options (runtime-spec config.md "mount options": `rro`,
/// `rnosuid`, ..., applied with mount_setattr(2) `AT_RECURSIVE`); those libcontainer
/// parses are listed by [`mount_options`].
const RECURSIVE_OPTIONS: &[&str] = &[
    "rro",
    "rrw",
    "rnosuid",
    "rsuid",
    "rnodev",
    "rdev",
    "rnoexec",
    "rexec",
    "rnodiratime",
    "rdiratime",
    "rrelatime",
    "rnorelatime",
    "rnoatime",
    "ratime",
    "rstrictatime",
    "rnostrictatime",
    "rnosymfollow",
    "rsymfollow",
];

/// libcontainer's mount options, the recursive ones its parser takes (it applies them
/// with mount_setattr(2) to bind and other mounts; its `known_options` leaves them
/// out), plus the ones siloc makes itself (`idmap`, `ridmap`:
/// src/engine/idmapped_mounts.rs; `tmpcopyup`).
fn mount_options() -> Vec<String> {
    use std::str::FromStr;
    let mut v = libcontainer::syscall::linux::MountOption::known_options();
    v.extend(
        RECURSIVE_OPTIONS
            .iter()
            .filter(|o| libcontainer::syscall::linux::MountRecursive::from_str(o).is_ok())
            .map(|o| o.to_string()),
    );
    v.extend([
        crate::engine::idmapped_mounts::IDMAP.to_string(),
        crate::engine::idmapped_mounts::RIDMAP.to_string(),
        // runc's extension, done by engine::mount_compat
        "tmpcopyup".to_string(),
    ]);
    v
}

/// `siloc features`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn features() -> anyhow::Result<()> {
    super::emit(&serde_json::to_string_pretty(&document())?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn favordynmods_read_from_cgroup_super_options() {
        let off = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n";
        assert!(super::favordynmods(&crate::sys::mountinfo::parse(off)).starts_with("off"));
        let v2 = "36 31 0:33 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw,favordynmods\n";
        assert_eq!(super::favordynmods(&crate::sys::mountinfo::parse(v2)), "on");
        // the word elsewhere (a mount point) does not count
        let other = "40 31 0:40 / /favordynmods rw - tmpfs tmpfs rw\n";
        assert!(super::favordynmods(&crate::sys::mountinfo::parse(other)).starts_with("off"));
    }

    #[test]
    fn parses_as_the_runtime_spec_features_type() {
        let v = super::document();
        let f: oci_spec::runtime::Features = serde_json::from_value(v).unwrap();
        assert_eq!(f.oci_version_min(), "1.0.0");
        assert!(
            f.hooks()
                .as_ref()
                .unwrap()
                .contains(&"poststop".to_string())
        );
        assert!(f.annotations().as_ref().unwrap()["io.siloc.runc.compat"].contains("pidfd-socket"));
        let opts = f.mount_options().as_ref().unwrap();
        assert!(opts.contains(&"idmap".to_string()) && opts.contains(&"ridmap".to_string()));
        // libcontainer 0.7 applies every recursive option runc 1.1.5 lists
        for o in super::RECURSIVE_OPTIONS {
            assert!(opts.contains(&o.to_string()), "{o}");
        }
        let mp = f.linux().as_ref().unwrap().memory_policy().clone().unwrap();
        assert!(
            mp.modes()
                .as_ref()
                .unwrap()
                .contains(&"MPOL_BIND".to_string())
        );
        assert!(
            mp.flags()
                .as_ref()
                .unwrap()
                .contains(&"MPOL_F_STATIC_NODES".to_string())
        );
    }
}
