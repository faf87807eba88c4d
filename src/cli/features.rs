//! `features`: the runtime-spec "Features Structure" (features.md), listing only what
//! siloc does through libcontainer on this build.

use std::path::Path;

use serde_json::json;

/// What the document reports of this host and build, each from its own probe (tests
/// make them from fixtures and fake probe answers).
pub(crate) struct Facts {
    /// The memory policy modes and flags the running kernel takes.
    pub memory_policy: crate::sys::mempolicy::Support,
    /// The namespace types the running kernel has ([`namespaces`]).
    pub namespaces: Vec<&'static str>,
    /// The capabilities a spec can give ([`capabilities`]).
    pub capabilities: Vec<String>,
    /// `linux.seccomp.architectures` the linked libseccomp can load.
    pub seccomp_archs: Vec<&'static str>,
    /// Seccomp filter flags libseccomp and the kernel take.
    pub seccomp_flags: Vec<&'static str>,
    /// The linked libseccomp's version, `major.minor.micro`.
    pub libseccomp_version: String,
}

impl Facts {
    /// The running kernel's and the linked libraries' answers.
    pub(crate) fn probe() -> Facts {
        Facts {
            memory_policy: crate::sys::mempolicy::Support::running_kernel().clone(),
            namespaces: namespaces(Path::new("/proc/self/ns")),
            capabilities: capabilities(&crate::lifecycle::spec_compat::supported_caps()),
            seccomp_archs: crate::engine::seccomp_compat::loadable_archs(),
            seccomp_flags: crate::engine::seccomp_compat::supported_flags(),
            libseccomp_version: libseccomp::ScmpVersion::current()
                .map(|v| format!("{}.{}.{}", v.major, v.minor, v.micro))
                .unwrap_or_default(),
        }
    }
}

/// runtime-spec namespace types (config-linux.md "Namespaces") and their file in
/// `/proc/PID/ns` (namespaces(7)).
const NAMESPACES: [(&str, &str); 8] = [
    ("cgroup", "cgroup"),
    ("ipc", "ipc"),
    ("mount", "mnt"),
    ("network", "net"),
    ("pid", "pid"),
    ("time", "time"),
    ("user", "user"),
    ("uts", "uts"),
];

/// The namespace types the running kernel has (libcontainer 0.7 makes and joins all
/// eight): those with a file in `ns_dir` (`/proc/self/ns`; a kernel without
/// `CONFIG_USER_NS`, or before 5.6 for `time`, has none). Every type when `ns_dir`
/// cannot be read (no procfs: the kernel was not asked).
pub(crate) fn namespaces(ns_dir: &Path) -> Vec<&'static str> {
    let readable = std::fs::read_dir(ns_dir).is_ok();
    NAMESPACES
        .iter()
        .filter(|(_, file)| !readable || ns_dir.join(file).symlink_metadata().is_ok())
        .map(|(t, _)| *t)
        .collect()
}

/// The capabilities a spec can give here, in the kernel's order: the names siloc
/// knows (the caps crate's and oci-spec's) that the running kernel has (`supported`,
/// `/proc/sys/kernel/cap_last_cap`; all known names when it cannot be read). Others
/// are left out of the container with runc's warning
/// ([`crate::lifecycle::spec_compat::cap_is_usable`]); runc 1.4 lists its library's
/// names whatever the kernel.
pub(crate) fn capabilities(supported: &Option<caps::CapsHashSet>) -> Vec<String> {
    let mut all: Vec<caps::Capability> = caps::all().into_iter().collect();
    all.sort_by_key(|c| c.index());
    all.iter()
        .map(|c| c.to_string())
        .filter(|n| crate::lifecycle::spec_compat::cap_is_usable(n, supported))
        .collect()
}

/// The features document as JSON.
pub(crate) fn document() -> serde_json::Value {
    document_with(&Facts::probe())
}

/// The features document for `facts`. Fields the runtime-spec defines as "compiled
/// in" (features.md: `seccomp`, `apparmor`, `selinux`, `intelRdt`, `cgroup`,
/// `mountExtensions`, "unrelated to whether the host supports it") say what this
/// build does through libcontainer 0.7: it applies `process.apparmorProfile` and
/// `linux.intelRdt`, not SELinux labels, and no `rdma` limits (libcgroups 0.7 has no
/// rdma controller); its systemd driver is the system instance's.
pub(crate) fn document_with(facts: &Facts) -> serde_json::Value {
    json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": oci_spec::runtime::VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "startContainer",
                  "poststart", "poststop"],
        "mountOptions": mount_options(),
        "linux": {
            "namespaces": facts.namespaces,
            "capabilities": facts.capabilities,
            "cgroup": {"v1": true, "v2": true, "systemd": true, "systemdUser": false,
                       "rdma": false},
            "seccomp": {
                "enabled": true,
                "actions": ["SCMP_ACT_ALLOW", "SCMP_ACT_ERRNO", "SCMP_ACT_KILL",
                            "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",
                            "SCMP_ACT_NOTIFY", "SCMP_ACT_TRACE", "SCMP_ACT_TRAP"],
                "operators": ["SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT", "SCMP_CMP_LE",
                              "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ", "SCMP_CMP_NE"],
                "archs": facts.seccomp_archs,
                "knownFlags": crate::engine::seccomp_compat::KNOWN_FLAGS,
                "supportedFlags": facts.seccomp_flags
            },
            "apparmor": {"enabled": true},
            "selinux": {"enabled": false},
            "intelRdt": {"enabled": true},
            "memoryPolicy": {
                "modes": facts.memory_policy.modes,
                "flags": facts.memory_policy.flags
            },
            "mountExtensions": {"idmap": {"enabled": true}}
        },
        // runtime-spec 1.2: siloc's own annotations change what siloc does to the
        // host (ID ranges, rootfs directories, cpusets, I/O limits), as runc lists its
        // own ("org.systemd.property.": libcontainer 0.7 reads no such annotation)
        "potentiallyUnsafeConfigAnnotations": [crate::annotations::PREFIX],
        "org.siloc.io": io_offers(),
        "annotations": {
            "io.siloc.version": env!("CARGO_PKG_VERSION"),
            "io.github.seccomp.libseccomp.version": facts.libseccomp_version,
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
/// them; `nosymfollow`); a namespace path of another type refused in runc's words
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
/// (lifecycle::spec_compat); and, as the README's "runc compatibility" text lists them,
/// `exec` in the container's user namespace (engine::join_user_namespace), namespaces
/// the user namespace does not own joined from outside it (engine::outer_namespaces),
/// per-mount propagation (engine::mount_fixups), the v1 `cgroup` mount in runc's
/// order and flags (engine::pidns_cgroup), a missing `process.cwd` made
/// (engine::cwd), `rootfsPropagation`'s `r` forms (lifecycle::final_spec), a
/// container frozen behind its state read as paused (engine::frozen_cgroup) and
/// `delete` right after `kill KILL` waiting for the dying init (lifecycle).
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
    "mounts.nosymfollow",
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
    "exec.user-namespace-joined",
    "namespaces.joined-outside-user-namespace",
    "mounts.propagation",
    "mounts.cgroup-v1-runc-order-flags",
    "process.cwd-created",
    "rootfs.propagation-recursive-names",
    "state.frozen-cgroup-paused",
    "delete.after-kill-waits",
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
/// src/engine/idmapped_mounts.rs; `tmpcopyup`, `nosymfollow`, `symfollow`:
/// src/engine/mount_compat.rs).
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
        // MS_NOSYMFOLLOW, set (or, on a bind, cleared) by engine::mount_compat
        "nosymfollow".to_string(),
        "symfollow".to_string(),
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
    use super::*;
    use crate::sys::mempolicy::{Answer, Support, linux_6_1};

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

    /// Facts of a fake host: Linux 6.1's memory policy answers, the given namespaces.
    fn facts_6_1() -> Facts {
        Facts {
            memory_policy: Support::from_answers(linux_6_1),
            namespaces: vec!["mount", "pid"],
            capabilities: vec!["CAP_KILL".into()],
            seccomp_archs: vec!["SCMP_ARCH_X86_64"],
            seccomp_flags: crate::engine::seccomp_compat::flags_at_api(2),
            libseccomp_version: "2.5.4".into(),
        }
    }

    #[test]
    fn the_document_reports_the_probed_facts() {
        let v = document_with(&facts_6_1());
        let f: oci_spec::runtime::Features = serde_json::from_value(v.clone()).unwrap();
        let linux = f.linux().as_ref().unwrap();
        let mp = linux.memory_policy().clone().unwrap();
        let modes = mp.modes().clone().unwrap();
        assert!(!modes.contains(&"MPOL_WEIGHTED_INTERLEAVE".to_string()));
        assert!(modes.contains(&"MPOL_PREFERRED_MANY".to_string()));
        assert_eq!(v["linux"]["namespaces"], json!(["mount", "pid"]));
        assert_eq!(linux.capabilities().clone().unwrap(), ["CAP_KILL"]);
        let sc = linux.seccomp().clone().unwrap();
        assert_eq!(v["linux"]["seccomp"]["archs"], json!(["SCMP_ARCH_X86_64"]));
        // API level 2: neither LOG nor SPEC_ALLOW can be set
        assert_eq!(
            sc.supported_flags().clone().unwrap(),
            ["SECCOMP_FILTER_FLAG_TSYNC"]
        );
        assert_eq!(
            v["annotations"]["io.github.seccomp.libseccomp.version"],
            "2.5.4"
        );
        assert_eq!(
            f.potentially_unsafe_config_annotations().clone().unwrap(),
            ["io.siloc."]
        );
        // compiled-in support, whatever the host (features.md)
        assert_eq!(v["linux"]["apparmor"]["enabled"], true);
        assert_eq!(v["linux"]["selinux"]["enabled"], false);
        let none = Facts {
            memory_policy: Support::from_answers(|_| Answer::NoNuma),
            ..facts_6_1()
        };
        assert_eq!(
            document_with(&none)["linux"]["memoryPolicy"]["modes"],
            json!([])
        );
    }

    #[test]
    fn namespaces_are_those_with_a_proc_file() {
        let d = tempfile::tempdir().unwrap();
        for f in ["mnt", "net", "user", "pid_for_children"] {
            std::fs::write(d.path().join(f), "").unwrap();
        }
        assert_eq!(namespaces(d.path()), ["mount", "network", "user"]);
        // no procfs: every type (the kernel was not asked)
        assert_eq!(namespaces(&d.path().join("missing")).len(), 8);
        // this kernel: at least the five every container runtime needs
        let here = namespaces(Path::new("/proc/self/ns"));
        for t in ["ipc", "mount", "network", "pid", "uts"] {
            assert!(here.contains(&t), "{here:?}");
        }
    }

    #[test]
    fn capabilities_are_those_the_kernel_has() {
        let some: caps::CapsHashSet = [caps::Capability::CAP_KILL, caps::Capability::CAP_CHOWN]
            .into_iter()
            .collect();
        // the kernel's order, as runc prints them
        assert_eq!(capabilities(&Some(some)), ["CAP_CHOWN", "CAP_KILL"]);
        let all = capabilities(&None);
        assert!(all.contains(&"CAP_CHECKPOINT_RESTORE".to_string()));
        assert_eq!(all[0], "CAP_CHOWN");
    }

    #[test]
    fn seccomp_archs_are_those_libseccomp_loads() {
        use libseccomp::ScmpArch;
        let x86 = crate::engine::seccomp_compat::archs_where(|a| {
            matches!(a, ScmpArch::X86 | ScmpArch::X8664 | ScmpArch::X32)
        });
        assert_eq!(x86, ["SCMP_ARCH_X32", "SCMP_ARCH_X86", "SCMP_ARCH_X86_64"]);
        // the linked libseccomp, on this (little-endian) host: the native arch and
        // its companions, no big-endian one
        let here = crate::engine::seccomp_compat::loadable_archs();
        #[cfg(target_arch = "x86_64")]
        for a in ["SCMP_ARCH_X86", "SCMP_ARCH_X86_64", "SCMP_ARCH_X32"] {
            assert!(here.contains(&a), "{here:?}");
        }
        #[cfg(target_endian = "little")]
        for a in ["SCMP_ARCH_S390X", "SCMP_ARCH_PPC64", "SCMP_ARCH_MIPS"] {
            assert!(!here.contains(&a), "{here:?}");
        }
    }

    #[test]
    fn seccomp_flags_follow_the_api_level() {
        use crate::engine::seccomp_compat::flags_at_api;
        assert_eq!(flags_at_api(3).len(), 2);
        assert_eq!(flags_at_api(6).len(), 3);
        assert_eq!(flags_at_api(7), crate::engine::seccomp_compat::KNOWN_FLAGS);
    }

    #[test]
    fn the_compat_list_has_no_duplicates() {
        let mut seen = std::collections::HashSet::new();
        for e in RUNC_COMPAT {
            assert!(seen.insert(e), "{e}");
        }
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
        assert!(
            opts.contains(&"nosymfollow".to_string()) && opts.contains(&"symfollow".to_string())
        );
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
