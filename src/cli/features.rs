//! `features`: the runtime-spec "Features Structure" (features.md), listing only what
//! siloc does through libcontainer on this build.

use serde_json::json;

/// The features document as JSON.
pub fn document() -> serde_json::Value {
    let mut caps: Vec<String> = caps::all().iter().map(|c| c.to_string()).collect();
    caps.sort();
    let apparmor = std::path::Path::new("/sys/kernel/security/apparmor").exists();
    json!({
        "ociVersionMin": "1.0.0",
        "ociVersionMax": oci_spec::runtime::VERSION,
        "hooks": ["prestart", "createRuntime", "createContainer", "startContainer",
                  "poststart", "poststop"],
        "mountOptions": libcontainer::syscall::linux::MountOption::known_options(),
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
                          "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"]
            },
            "apparmor": {"enabled": apparmor},
            "selinux": {"enabled": false},
            "intelRdt": {"enabled": true},
            "mountExtensions": {"idmap": {"enabled": true}}
        },
        "annotations": {
            "io.siloc.version": env!("CARGO_PKG_VERSION"),
            "io.siloc.userns": "auto|off",
            "io.siloc.userns.size": "IDs in the container's range",
            "io.siloc.rootfs.layers": "JSON array of layer directories, base first",
            "io.siloc.rootfs.upper": "persistent writable directory",
            "io.siloc.rootfs.work": "with io.siloc.rootfs.upper: its existing overlay work dir (containerd-shim-siloc-v2 sets it)",
            "io.siloc.numa": "auto|node:N|off",
            "io.siloc.io": "class, max, weight",
            "org.opencontainers.runc.checkpoint.enabled": "false"
        }
    })
}

/// `siloc features`.
pub fn features() -> anyhow::Result<()> {
    super::emit(&serde_json::to_string_pretty(&document())?)
}

#[cfg(test)]
mod tests {
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
    }
}
