//! Where libcontainer's text reached the user, siloc says what runc 1.1.5 says (issue
//! 19): each bad spec below fails with runc's words (or siloc's own, naming the field,
//! where runc's are worse), and leaves no state, mount, cgroup or process behind. The
//! texts were taken from runc 1.1.5 on the same bundles.

use serde_json::{Value, json};

use crate::common::{Container, TestEnv, traces_of};

/// One case: a name, the spec edit, the text expected in the error.
type Case = (&'static str, Box<dyn Fn(&mut Value)>, String);

/// Runs each case with `cmd` (`run` or `create`) and checks the message and that
/// nothing is left; reports every case that differs, not only the first. Errors are
/// read from siloc's log line on stderr (quotes escaped).
fn refused_in_runc_words(env: &TestEnv, cmd: &str, cases: Vec<Case>) {
    let mut wrong = Vec::new();
    for (name, edit, want) in cases {
        let mut b = env.bundle(name, &["true"]);
        b.edit(|s| edit(s));
        let id = env.id(name);
        let (ok, _, err) = env.detached(&[cmd, "--bundle", b.path(), &id]);
        let err = err.replace("\\\"", "\"");
        if ok {
            wrong.push(format!("{name}: should fail"));
            // (main's behaviour for some: a created container to remove)
            let _ = env.siloc(&["delete", "--force", &id]);
        } else if !err.contains(&want) {
            wrong.push(format!("{name}: expected {want:?} in {err:?}"));
        } else if !err.contains(&format!("siloc {cmd} failed: ")) || err.lines().count() != 1 {
            wrong.push(format!("{name}: one line with runc's prefix: {err:?}"));
        }
        assert!(env.leftovers().is_empty(), "{name}: {:?}", env.leftovers());
        assert!(traces_of(&id).is_empty(), "{name}: {:?}", traces_of(&id));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn add_mount(s: &mut Value, m: Value) {
    s["mounts"].as_array_mut().expect("mounts").push(m);
}

const INIT: &str = "unable to start container process: error during container init: ";

#[test]
fn bad_mounts_are_named_as_runc_names_them() {
    needs_root!();
    let env = TestEnv::new();
    let missing = env.dir.path().join("no-such-source");
    let m = missing.display().to_string();
    let tmp = env.dir.path().join("host-dir");
    std::fs::create_dir_all(&tmp).unwrap();
    let t = tmp.display().to_string();
    // A volume whose content points into /proc (CVE-2019-16884's class through a
    // symlink the container left in it).
    let vol = env.dir.path().join("vol");
    std::fs::create_dir_all(&vol).unwrap();
    std::os::unix::fs::symlink("/proc/self", vol.join("link")).unwrap();
    let v = vol.display().to_string();
    // The same link in an overlay's lower layer (podman's `-v SRC:DST:O`).
    let lower = env.dir.path().join("lower");
    std::fs::create_dir_all(lower.join("a")).unwrap();
    std::fs::create_dir_all(lower.join("b")).unwrap();
    std::os::unix::fs::symlink("/proc/self", lower.join("a/link")).unwrap();
    let lowerdir = format!(
        "lowerdir={}:{}",
        lower.join("a").display(),
        lower.join("b").display()
    );
    let rootfs = |name: &str| {
        env.dir
            .path()
            .join(name)
            .join("rootfs")
            .display()
            .to_string()
    };
    let cases: Vec<Case> = vec![
        (
            // was "failed to prepare rootfs"
            "bind-missing",
            Box::new({
                let m = m.clone();
                move |s| {
                    add_mount(
                        s,
                        json!({"destination": "/x", "type": "bind", "source": m, "options": ["rbind"]}),
                    )
                }
            }),
            format!(
                "{INIT}error mounting \"{m}\" to rootfs at \"/x\": stat {m}: no such file or directory"
            ),
        ),
        (
            // was: the container ran with the host's directory over /proc
            "proc-bind",
            Box::new({
                let t = t.clone();
                move |s| {
                    add_mount(
                        s,
                        json!({"destination": "/proc", "type": "bind", "source": t, "options": ["rbind"]}),
                    )
                }
            }),
            format!(
                "{INIT}error mounting \"{t}\" to rootfs at \"/proc\": \"{}/proc\" cannot be \
                 mounted because it is not of type proc",
                rootfs("proc-bind")
            ),
        ),
        (
            "proc-inside",
            Box::new({
                let t = t.clone();
                move |s| {
                    add_mount(
                        s,
                        json!({"destination": "/proc/x", "type": "bind", "source": t, "options": ["rbind"]}),
                    )
                }
            }),
            format!(
                "{INIT}error mounting \"{t}\" to rootfs at \"/proc/x\": \"{}/proc/x\" cannot be \
                 mounted because it is inside /proc",
                rootfs("proc-inside")
            ),
        ),
        (
            // was: mounted over the init's /proc/1/attr
            "proc-through-a-volume",
            Box::new({
                let (t, v) = (t.clone(), v.clone());
                move |s| {
                    add_mount(
                        s,
                        json!({"destination": "/vol", "type": "bind", "source": v, "options": ["rbind"]}),
                    );
                    add_mount(
                        s,
                        json!({"destination": "/vol/link/attr", "type": "bind", "source": t, "options": ["rbind"]}),
                    )
                }
            }),
            format!(
                "{INIT}error mounting \"{t}\" to rootfs at \"/vol/link/attr\": \"{}/proc/self/attr\" \
                 cannot be mounted because it is inside /proc",
                rootfs("proc-through-a-volume")
            ),
        ),
        (
            // was: mounted over the init's /proc/1/attr, the overlay's link unseen
            "proc-through-an-overlay",
            Box::new({
                let (t, lowerdir) = (t.clone(), lowerdir.clone());
                move |s| {
                    add_mount(
                        s,
                        json!({"destination": "/vol", "type": "overlay", "source": "overlay", "options": [lowerdir]}),
                    );
                    add_mount(
                        s,
                        json!({"destination": "/vol/link/attr", "type": "bind", "source": t, "options": ["rbind"]}),
                    )
                }
            }),
            format!(
                "{INIT}error mounting \"{t}\" to rootfs at \"/vol/link/attr\": \"{}/proc/1/attr\" \
                 cannot be mounted because it is inside /proc",
                rootfs("proc-through-an-overlay")
            ),
        ),
        (
            // libcontainer's init: "failed to prepare rootfs" (engine::init_cause)
            "sys-inside",
            Box::new({
                let t = t.clone();
                move |s| {
                    add_mount(
                        s,
                        json!({"destination": "/sys/x", "type": "bind", "source": t, "options": ["rbind"]}),
                    )
                }
            }),
            format!(
                "{INIT}error mounting \"{t}\" to rootfs at \"/sys/x\": mkdir {}/sys/x: \
                 read-only file system",
                rootfs("sys-inside")
            ),
        ),
        (
            "unknown-type",
            Box::new(|s| {
                add_mount(
                    s,
                    json!({"destination": "/x", "type": "foofs", "source": "foo"}),
                )
            }),
            format!(
                "{INIT}error mounting \"foo\" to rootfs at \"/x\": mount foo:/x: no such device"
            ),
        ),
        (
            "bad-option",
            Box::new(|s| {
                add_mount(
                    s,
                    json!({"destination": "/x", "type": "tmpfs", "source": "tmpfs", "options": ["size=abc"]}),
                )
            }),
            format!(
                "{INIT}error mounting \"tmpfs\" to rootfs at \"/x\": mount tmpfs:/x: invalid argument"
            ),
        ),
        (
            "device-path",
            Box::new(|s| {
                s["linux"]["devices"] =
                    json!([{"path": "foo", "type": "c", "major": 1, "minor": 3}])
            }),
            format!("{INIT}linux.devices: \"foo\" is not a valid device path starting with /dev"),
        ),
    ];
    refused_in_runc_words(&env, "run", cases);
    // A bind of the host's procfs over /proc and the files lxcfs emulates pass.
    let mut b = env.bundle("proc-ok", &["true"]);
    b.edit(|s| {
        add_mount(s, json!({"destination": "/proc/cpuinfo", "type": "bind", "source": "/proc/cpuinfo", "options": ["rbind"]}))
    });
    let (code, _, err) = crate::common::run(&env, &b, "proc-ok");
    assert_eq!(code, 0, "{err}");
    env.assert_no_trace(&env.id("proc-ok"));
}

#[test]
fn bad_sysctls_namespaces_and_labels_in_runc_words() {
    needs_root!();
    let env = TestEnv::new();
    let mut cases: Vec<Case> = vec![
        (
            // was "failed to set sysctl"
            "sysctl-value",
            Box::new(|s| s["linux"]["sysctl"] = json!({"net.ipv4.ip_forward": "abc"})),
            format!("{INIT}write /proc/sys/net/ipv4/ip_forward: invalid argument"),
        ),
        (
            // was "open subpath in procfs failed"
            "sysctl-key",
            Box::new(|s| s["linux"]["sysctl"] = json!({"net.ipv4.no_such_key": "1"})),
            format!("{INIT}open /proc/sys/net/ipv4/no_such_key: "),
        ),
        (
            "sysctl-host",
            Box::new(|s| s["linux"]["sysctl"] = json!({"vm.swappiness": "10"})),
            "sysctl \"vm.swappiness\" is not in a separate kernel namespace".to_string(),
        ),
        (
            // was "ENOENT: No such file or directory"
            "ns-missing",
            Box::new(|s| {
                let ns = s["linux"]["namespaces"].as_array_mut().unwrap();
                ns.retain(|n| n["type"] != "network");
                ns.push(json!({"type": "network", "path": "/nonexistent-ns"}));
            }),
            "unable to create new parent process: namespace path: lstat /nonexistent-ns: no such \
             file or directory"
                .to_string(),
        ),
        (
            // was "io error"
            "oom-score",
            Box::new(|s| s["process"]["oomScoreAdj"] = json!(5000)),
            "field process.oomScoreAdj: 5000 is outside the kernel's -1000..1000".to_string(),
        ),
    ];
    if !std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|s| s.starts_with('Y'))
    {
        cases.push((
            // was "io error: No such file or directory (os error 2)"
            "apparmor",
            Box::new(|s| s["process"]["apparmorProfile"] = json!("no-such-profile")),
            format!(
                "{INIT}unable to apply apparmor profile: apparmor failed to apply profile: \
                 write /proc/self/attr/exec: invalid argument"
            ),
        ));
    }
    if !std::path::Path::new("/sys/fs/selinux/enforce").exists() {
        cases.push((
            // was: ran unlabelled
            "selinux",
            Box::new(|s| s["process"]["selinuxLabel"] = json!("system_u:system_r:container_t:s0")),
            "selinux label is specified in config, but selinux is disabled or not supported"
                .to_string(),
        ));
    }
    refused_in_runc_words(&env, "run", cases);
}

#[test]
fn bad_cgroup_resources_and_rootfs_in_runc_words() {
    needs_root!();
    let env = TestEnv::new();
    let afile = env.dir.path().join("afile");
    std::fs::write(&afile, "").unwrap();
    let af = afile.display().to_string();
    // A symlink to a real directory: runc refuses it (its config validator).
    std::fs::create_dir(env.dir.path().join("realroot")).unwrap();
    let link = env.dir.path().join("rootlink");
    std::os::unix::fs::symlink("realroot", &link).unwrap();
    let ln = link.display().to_string();
    let mut cases: Vec<Case> = vec![
        (
            // was "intermediate process error cgroup error: io error: failed to write 99 ..."
            "cpuset",
            Box::new(|s| s["linux"]["resources"]["cpu"] = json!({"cpus": "99999"})),
            "unable to start container process: unable to apply cgroup configuration: failed to \
             write \"99999\": write "
                .to_string(),
        ),
        (
            "memory",
            Box::new(|s| s["linux"]["resources"]["memory"] = json!({"limit": 1})),
            format!(
                "{INIT}error setting cgroup config for procHooks process: unable to set memory limit to 1"
            ),
        ),
        (
            // was "mkdir /: ENOTDIR"
            "rootfs-file",
            Box::new(move |s| s["root"]["path"] = json!(af)),
            format!(
                "root.path {}: invalid rootfs: not a directory",
                afile.display()
            ),
        ),
        (
            // was: ran on the symlink's target
            "rootfs-symlink",
            Box::new(move |s| s["root"]["path"] = json!(ln)),
            format!(
                "root.path {}: invalid rootfs: not an absolute path, or a symlink",
                link.display()
            ),
        ),
        (
            "rootfs-missing",
            Box::new(|s| s["root"]["path"] = json!("nope")),
            "invalid rootfs: stat ".to_string(),
        ),
    ];
    if std::path::Path::new("/sys/fs/cgroup/hugetlb/cgroup.procs").exists() {
        cases.push((
            // was "malformed page size 3"
            "hugetlb",
            Box::new(|s| {
                s["linux"]["resources"]["hugepageLimits"] =
                    json!([{"pageSize": "3MB", "limit": 1048576}])
            }),
            format!(
                "{INIT}error setting cgroup config for procHooks process: openat2 \
                 /sys/fs/cgroup/hugetlb/"
            ),
        ));
    }
    refused_in_runc_words(&env, "create", cases);
    let mut b = env.bundle("hugetlb-field", &["true"]);
    b.edit(|s| {
        s["linux"]["resources"]["hugepageLimits"] = json!([{"pageSize": "3MB", "limit": 1}])
    });
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &env.id("hugetlb-field")]);
    let err = err.replace("\\\"", "\"");
    assert!(
        !ok && err.contains(
            "(linux.resources.hugepageLimits[0].pageSize \"3MB\": the host's huge page sizes are "
        ),
        "{err}"
    );
    env.assert_no_trace(&env.id("hugetlb-field"));
}

/// A cgroupsPath with `..` stays below its base, as runc's CleanPath keeps it (it named
/// /sys/fs/cgroup/NAME and failed).
#[test]
fn a_cgroups_path_never_climbs_out_of_its_hierarchy() {
    needs_root!();
    let env = TestEnv::new();
    let name = env.id("escape");
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| s["linux"]["cgroupsPath"] = json!(format!("../../{name}")));
    let (code, _, err) = crate::common::run(&env, &b, "cg");
    assert_eq!(code, 0, "{err}");
    assert!(!std::path::Path::new("/sys/fs/cgroup").join(&name).exists());
    assert!(!std::path::Path::new("/sys/fs").join(&name).exists());
    env.assert_no_trace(&env.id("cg"));
}

#[test]
fn exec_into_a_stopped_container_says_so() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let c = Container::start(&env, &b, &env.id("c1"));
    env.ok(&["kill", &c.id, "KILL"]);
    assert!(c.wait_status("stopped", 10));
    let (code, _, err) = c.exec(&["true"]);
    assert_eq!(code, 255, "{err}");
    // was "failed operation due to incompatible container status: `Stopped`"
    assert!(
        err.contains("exec failed: cannot exec in a stopped container"),
        "{err}"
    );
}

/// A pod sandbox's `oomScoreAdj` of -998 from a runtime without CAP_SYS_RESOURCE
/// (containerd without `restrict_oom_score_adj` on such a host): refused before anything
/// is made, in runc's words with the field, where libcontainer said a bare "io error";
/// with the capability the container runs with it. siloc runs here under `setpriv`
/// with CAP_SYS_RESOURCE dropped from its bounding set, and as it is.
#[test]
fn an_oom_score_adj_the_runtime_may_not_set_is_refused_in_runc_words() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("oom", &["cat", "/proc/self/oom_score_adj"]);
    b.edit(|s| s["process"]["oomScoreAdj"] = json!(-998));
    let id = env.id("oom");
    let out = std::process::Command::new("setpriv")
        .args(["--bounding-set", "-sys_resource", "--"])
        .arg(crate::common::siloc_bin())
        .arg("--root")
        .arg(&env.root)
        .arg("--config")
        .arg(&env.config)
        .args(["run", "--bundle", b.path(), &id])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("setpriv");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "ran without CAP_SYS_RESOURCE: {err}");
    assert!(
        err.contains(
            "siloc run failed: unable to start container process: failed to update \
             /proc/self/oom_score_adj: Permission denied (process.oomScoreAdj -998: "
        ),
        "{err}"
    );
    env.assert_no_trace(&id);
    // With the capability (when the host's root has it) the value is set.
    let has = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|c| c & (1 << 24) != 0); // CAP_SYS_RESOURCE
    if has {
        let o = env.siloc(&["run", "--bundle", b.path(), &id]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "-998\n");
        env.assert_no_trace(&id);
    }
}
