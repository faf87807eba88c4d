//! The cgroup v1 `cgroup` mount siloc makes (src/engine/pidns_cgroup.rs): an ordinary
//! container's, as runc 1.1.5 shows it, and that of a container that joins another
//! container's PID namespace by path, as a pod's app containers do with
//! `shareProcessNamespace`. Needs root and v1 hierarchies; skips loudly otherwise.

use crate::common;

use std::path::Path;

use common::{Container, TestEnv};
use serde_json::json;

/// A pid number no host process has, far from the host's last allocated one (so the
/// host does not take it during the test): pid_max is small on some hosts (32768).
fn free_host_pid() -> i32 {
    let max: i32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let last: i32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (0..max)
        .map(|i| 300 + (last + max / 2 + i).rem_euclid(max - 300))
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .expect("a free pid")
}

/// Prints "<pid>" then, per /sys/fs/cgroup entry, "<dir> <mount root> <cgroup path>
/// <own pid listed> <write refused>", then whether the tmpfs takes a new file, then
/// "unified" when /sys/fs/cgroup/unified exists.
const CGROUP_SCRIPT: &str = r#"echo $$
for d in /sys/fs/cgroup/*; do
  n=${d##*/}
  root=$(grep " $d " /proc/self/mountinfo | cut -d' ' -f4)
  ctl=$n; [ "$n" = systemd ] && ctl=name=systemd
  path=$(grep ":$ctl:" /proc/self/cgroup | cut -d: -f3)
  grep -qx "$$" "$d/cgroup.procs" && own=own || own=other
  (echo 0 > "$d/notify_on_release") 2>/dev/null && w=writable || w=ro
  echo "$n $root $path $own $w"
done
touch /sys/fs/cgroup/x 2>/dev/null && echo tmpfs-writable || echo tmpfs-ro"#;

/// Checks [`CGROUP_SCRIPT`]'s output `out` of container `id`: each hierarchy it sees
/// is its own cgroup (its pid in cgroup.procs, the mount's root its /proc/self/cgroup
/// path), read-only, the named systemd hierarchy included, and the tmpfs refuses new
/// files (read-write as under runc, but at mode 0555 to a process without
/// CAP_DAC_OVERRIDE, which the default spec does not give).
fn assert_own_cgroups_read_only(out: &str, id: &str) {
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(1)
        .filter(|l| l.contains(' '))
        .map(|l| l.split(' ').collect())
        .collect();
    let names: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    for want in ["pids", "memory", "systemd"] {
        assert!(names.contains(&want), "no /sys/fs/cgroup/{want}: {out}");
    }
    // runc 1.1.5 does not show the hybrid's cgroup2 there either.
    assert!(!names.contains(&"unified"), "{out}");
    for r in &rows {
        assert_eq!(r.len(), 5, "{out}");
        // A co-mount symlink (cpu -> cpu,cpuacct) has no mount of its own.
        if !r[1].is_empty() {
            assert_eq!(
                r[1], r[2],
                "mount root is not the container's cgroup: {out}"
            );
        }
        assert!(r[2].ends_with(&format!("siloc-{id}")), "{out}");
        assert_eq!(r[3], "own", "{out}");
        assert_eq!(r[4], "ro", "{out}");
    }
    assert_eq!(out.lines().last(), Some("tmpfs-ro"), "{out}");
}

/// An ordinary container (its own PID, mount namespaces, no cgroup namespace) on a v1
/// host sees its own cgroup per hierarchy, read-only, and the tmpfs above them refuses
/// new files. Before, libcontainer made that tmpfs writable at mode 0755 (runc: 0555), and,
/// before the init was born in its named cgroups, bound the systemd hierarchy at
/// siloc's own cgroup (the host's whole systemd tree).
#[test]
fn an_ordinary_container_sees_its_own_cgroups_read_only() {
    needs_root!();
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        eprintln!("SKIP: needs cgroup v1 or the v1/v2 hybrid (hack/vm covers pure v2)");
        return;
    }
    let env = TestEnv::new();
    let app = env.bundle("app", &["sh", "-c", CGROUP_SCRIPT]);
    let (code, out, err) = common::run(&env, &app, "app");
    assert_eq!(code, 0, "{err}\n{out}");
    assert_own_cgroups_read_only(&out, &env.id("app"));
}

/// The container's mount table as runc 1.1.5 shows it (integration/spec-bundles.sh
/// compares the two): the cgroup tmpfs read-write (`rw,nosuid,nodev,noexec`, super
/// options `rw,mode=755`) with its root at sysfs's mode 0555 and owned by the
/// container's root (also in a user namespace), listed after the spec's mounts, then
/// its read-only binds, then the read-only paths (`ro,relatime`: the `/proc` mount's
/// own flags, no `nosuid`), then the masked paths. Before, siloc made the tmpfs
/// read-only at 0755 after libcontainer's read-only paths (`ro,nosuid,nodev,noexec`).
#[test]
fn the_cgroup_mount_is_listed_and_flagged_as_under_runc() {
    needs_root!();
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        eprintln!("SKIP: needs cgroup v1 or the v1/v2 hybrid (hack/vm covers pure v2)");
        return;
    }
    let env = TestEnv::new();
    let script = "cut -d' ' -f5- /proc/self/mountinfo; stat -c 'owner %a %u %g' /sys/fs/cgroup";
    for userns in [false, true] {
        let mut b = env.bundle(&format!("b{userns}"), &["sh", "-c", script]);
        if userns {
            b.annotate("io.siloc.userns", "auto");
        }
        let (code, out, err) = common::run(&env, &b, &format!("order{userns}"));
        assert_eq!(code, 0, "userns {userns}: {err}\n{out}");
        // (mount point, mount options, filesystem type, super options) in table order
        let rows: Vec<(&str, &str, &str, &str)> = out
            .lines()
            .filter(|l| !l.starts_with("owner "))
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                let dash = f.iter().position(|x| *x == "-").expect(l);
                (f[0], f[1], f[dash + 1], f[dash + 3])
            })
            .collect();
        let at = |p: &str| {
            rows.iter()
                .position(|r| r.0 == p)
                .unwrap_or_else(|| panic!("no {p}: {out}"))
        };
        let tmpfs = at("/sys/fs/cgroup");
        assert_eq!(
            rows[tmpfs],
            (
                "/sys/fs/cgroup",
                "rw,nosuid,nodev,noexec,relatime",
                "tmpfs",
                "rw,mode=755"
            ),
            "{out}"
        );
        assert!(at("/sys") < tmpfs && at("/dev/mqueue") < tmpfs, "{out}");
        let binds: Vec<usize> = (0..rows.len())
            .filter(|&i| rows[i].0.starts_with("/sys/fs/cgroup/"))
            .collect();
        assert!(binds.len() >= 3, "{out}");
        for &i in &binds {
            assert_eq!(rows[i].1, "ro,nosuid,nodev,noexec,relatime", "{out}");
            assert_eq!(rows[i].2, "cgroup", "{out}");
        }
        let last_bind = *binds.last().unwrap();
        assert_eq!(binds, (tmpfs + 1..=last_bind).collect::<Vec<_>>(), "{out}");
        for ro in ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys"] {
            assert!(at(ro) > last_bind, "{ro} before the cgroup binds: {out}");
            assert_eq!(rows[at(ro)].1, "ro,relatime", "{ro}: {out}");
            assert!(at(ro) < at("/proc/acpi"), "{out}");
        }
        assert!(at("/proc/acpi") < at("/sys/firmware"), "{out}");
        assert_eq!(
            out.lines().last(),
            Some("owner 555 0 0"),
            "userns {userns}: {out}"
        );
    }
}

/// A container with a cgroup namespace keeps libcontainer's fresh per-hierarchy
/// mounts (runc mounts them afresh there too), each read-only (mount_fixups): the
/// namespace's root at each mount's root, writes refused.
#[test]
fn a_cgroup_namespace_container_sees_fresh_read_only_hierarchies() {
    needs_root!();
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        eprintln!("SKIP: needs cgroup v1 or the v1/v2 hybrid (hack/vm covers pure v2)");
        return;
    }
    let env = TestEnv::new();
    let script = r#"for d in /sys/fs/cgroup/pids /sys/fs/cgroup/memory; do
  root=$(grep " $d " /proc/self/mountinfo | cut -d' ' -f4)
  (echo 0 > "$d/notify_on_release") 2>/dev/null && w=writable || w=ro
  echo "${d##*/} $root $w"
done"#;
    let mut app = env.bundle("app", &["sh", "-c", script]);
    app.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "cgroup"}));
    });
    let (code, out, err) = common::run(&env, &app, "app");
    assert_eq!(code, 0, "{err}\n{out}");
    assert_eq!(out.trim(), "pids / ro\nmemory / ro", "{out}");
}

/// Makes the next pid allocated in the PID namespace of host process `pid` be `next`
/// (/proc/sys/kernel/ns_last_pid acts on the writer's own PID namespace: nsenter's
/// child is in the target's).
fn set_next_pid(pid: i64, next: i32) {
    let st = std::process::Command::new("nsenter")
        .args(["--target", &pid.to_string(), "--pid", "--", "sh", "-c"])
        .arg(format!("echo {} > /proc/sys/kernel/ns_last_pid", next - 1))
        .status()
        .expect("nsenter");
    assert!(
        st.success(),
        "set ns_last_pid in the sandbox's PID namespace"
    );
}

/// An app container joining the sandbox's PID namespace gets, as its init's pid in
/// that namespace, a number no host process has. Before the fix libcontainer read
/// `/proc/<that number>/cgroup` on the host and create failed ("failed to prepare
/// rootfs", at random in pods: whenever the number was free on the host). Now it runs,
/// and each /sys/fs/cgroup/<hierarchy> it sees is its own cgroup (its pid in
/// cgroup.procs, the mount's root its /proc/self/cgroup path), read-only, the named
/// systemd hierarchy included.
#[test]
fn joined_pid_namespace_sees_its_own_cgroups_read_only() {
    needs_root!();
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        eprintln!("SKIP: needs cgroup v1 or the v1/v2 hybrid (hack/vm covers pure v2)");
        return;
    }
    let env = TestEnv::new();
    let sb = env.bundle("sb", &["sleep", "1000"]);
    let sb_id = env.id("sandbox");
    let _sandbox = Container::start(&env, &sb, &sb_id);
    let sb_pid = env.state(&sb_id)["pid"].as_i64().expect("sandbox pid");
    let mut app = env.bundle("app", &["sh", "-c", CGROUP_SCRIPT]);
    let ns_path = format!("/proc/{sb_pid}/ns/pid");
    app.edit(|s| {
        for n in s["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "pid" {
                n["path"] = json!(ns_path);
            }
        }
    });
    let want_pid = free_host_pid();
    set_next_pid(sb_pid, want_pid);
    let (code, out, err) = common::run(&env, &app, "app");
    assert_eq!(code, 0, "app in the sandbox's PID namespace: {err}\n{out}");
    assert_eq!(
        out.lines().next(),
        Some(want_pid.to_string().as_str()),
        "{out}"
    );
    assert_own_cgroups_read_only(&out, &env.id("app"));
}
