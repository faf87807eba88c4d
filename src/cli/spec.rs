//! `spec`: the default config.json, the same as `runc spec` writes (tools generate
//! bundles from it, so `terminal: true` stays) except for the hostname and the
//! ociVersion, which name siloc and the runtime-spec version it implements.
//! `--rootless` applies runc's rootless changes.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

#[derive(clap::Args, Debug)]
pub(crate) struct SpecArgs {
    /// Directory to write config.json into
    #[arg(short = 'b', long, default_value = ".")]
    pub(crate) bundle: PathBuf,
    /// Generate a configuration for a rootless container
    #[arg(long)]
    pub(crate) rootless: bool,
}

const CAPS: [&str; 3] = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"];

/// The default spec as JSON (runc's `spec` defaults).
pub(crate) fn default_spec() -> Value {
    json!({
        "ociVersion": oci_spec::runtime::VERSION,
        "process": {
            "terminal": true,
            "user": {"uid": 0, "gid": 0},
            "args": ["sh"],
            "env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "TERM=xterm"
            ],
            "cwd": "/",
            "capabilities": {
                "bounding": CAPS, "effective": CAPS, "permitted": CAPS, "ambient": CAPS
            },
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
            "noNewPrivileges": true
        },
        "root": {"path": "rootfs", "readonly": true},
        "hostname": "siloc",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
             "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}
        ],
        "linux": {
            "resources": {"devices": [{"allow": false, "access": "rwm"}]},
            "namespaces": [
                {"type": "pid"}, {"type": "network"}, {"type": "ipc"},
                {"type": "uts"}, {"type": "mount"}
            ],
            "maskedPaths": [
                "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
                "/proc/sched_debug", "/sys/firmware", "/proc/scsi"
            ],
            "readonlyPaths": [
                "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"
            ]
        }
    })
}

/// runc's rootless changes: no network namespace, a user namespace mapping the
/// caller's uid/gid to root, /sys bind-mounted, no devpts gid, no device rules.
fn make_rootless(spec: &mut Value, uid: u32, gid: u32) {
    let linux = &mut spec["linux"];
    if let Some(ns) = linux["namespaces"].as_array_mut() {
        ns.retain(|n| n["type"] != "network");
        ns.push(json!({"type": "user"}));
    }
    linux["uidMappings"] = json!([{"containerID": 0, "hostID": uid, "size": 1}]);
    linux["gidMappings"] = json!([{"containerID": 0, "hostID": gid, "size": 1}]);
    if let Some(l) = linux.as_object_mut() {
        l.remove("resources");
    }
    if let Some(mounts) = spec["mounts"].as_array_mut() {
        for m in mounts.iter_mut() {
            if m["destination"] == "/sys" {
                *m = json!({"destination": "/sys", "type": "none", "source": "/sys",
                            "options": ["rbind", "nosuid", "noexec", "nodev", "ro"]});
            }
            // get_mut, not m["options"]: indexing would add `"options": null` to
            // mounts that have none (runc's rootless spec leaves /proc without).
            if let Some(opts) = m.get_mut("options").and_then(Value::as_array_mut) {
                opts.retain(|o| o != "gid=5");
            }
        }
    }
}

/// Tab-indented JSON, as runc writes config.json.
pub(crate) fn to_tabbed_json(v: &Value) -> anyhow::Result<String> {
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"\t");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    serde::Serialize::serialize(v, &mut ser)?;
    Ok(String::from_utf8(buf)?)
}

/// `siloc spec`: writes `<bundle>/config.json`, refusing to overwrite one.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn spec(a: SpecArgs) -> anyhow::Result<()> {
    let path = Path::new(&a.bundle).join("config.json");
    if path.exists() {
        anyhow::bail!("File {} exists. Remove it first", path.display());
    }
    let mut v = default_spec();
    if a.rootless {
        make_rootless(
            &mut v,
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
    }
    std::fs::write(&path, to_tabbed_json(&v)?)
        .map_err(|e| anyhow::anyhow!("write {}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_spec_is_a_valid_runtime_spec() {
        let text = to_tabbed_json(&default_spec()).unwrap();
        let spec = crate::lifecycle::bundle::parse(text.as_bytes()).unwrap();
        crate::lifecycle::bundle::validate(&spec).unwrap();
        assert_eq!(spec.process().as_ref().unwrap().terminal(), Some(true));
        assert!(text.starts_with("{\n\t\"ociVersion\""));
    }

    #[test]
    fn rootless_drops_netns_and_maps_the_caller() {
        let mut v = default_spec();
        make_rootless(&mut v, 1000, 1001);
        let spec = crate::lifecycle::bundle::parse(v.to_string().as_bytes()).unwrap();
        crate::lifecycle::bundle::validate(&spec).unwrap();
        let ns: Vec<_> = v["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].clone())
            .collect();
        assert!(!ns.contains(&json!("network")) && ns.contains(&json!("user")));
        assert_eq!(v["linux"]["uidMappings"][0]["hostID"], 1000);
        assert_eq!(v["linux"]["gidMappings"][0]["hostID"], 1001);
        for m in v["mounts"].as_array().unwrap() {
            assert!(m.get("options") != Some(&Value::Null), "{m}");
        }
        assert_eq!(
            v["mounts"][0],
            json!({"destination": "/proc", "type": "proc", "source": "proc"})
        );
    }
}
