//! The runtime-spec features siloc reaches through libcontainer, each with a real
//! container: hooks, masked and read-only paths, devices, mounts with propagation,
//! capabilities, rlimits, seccomp, sysctl, cgroup limits, a user namespace from the
//! spec, hostname and env. Needs root; skips loudly without it.

use crate::common;

use std::path::Path;

use common::{Container, TestEnv};
use serde_json::{Value, json};

/// Runs the bundle in the foreground; returns (exit code, stdout, stderr).
use common::run;

#[test]
fn hooks_run_at_each_point_with_the_state() {
    needs_root!();
    let env = TestEnv::new();
    let log = env.dir.path().join("hooks");
    std::fs::create_dir_all(&log).unwrap();
    let mut b = env.bundle("b", &["sh", "-c", "echo process-ran > /hooklog/process"]);
    let host_hook = |name: &str| {
        // The state arrives on stdin; keep it to check the id.
        json!({"path": "/bin/sh", "args": ["sh", "-c", format!("cat > {}/{name}", log.display())]})
    };
    let ctr_hook = |name: &str| json!({"path": "/bin/sh", "args": ["sh", "-c", format!("cat > /hooklog/{name}")]});
    b.edit(|s| {
        s["root"]["readonly"] = Value::Bool(false);
        s["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/hooklog", "type": "bind",
            "source": log.display().to_string(), "options": ["rbind", "rw"]
        }));
        s["hooks"] = json!({
            "prestart": [host_hook("prestart")],
            "createRuntime": [host_hook("createRuntime")],
            "createContainer": [host_hook("createContainer")],
            "startContainer": [ctr_hook("startContainer")],
            "poststart": [host_hook("poststart")],
            "poststop": [host_hook("poststop")],
        });
    });
    let id = env.id("hooks");
    let o = env.siloc(&["run", "--bundle", b.path(), &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for h in [
        "prestart",
        "createRuntime",
        "createContainer",
        "startContainer",
        "poststart",
        "poststop",
    ] {
        let text =
            std::fs::read_to_string(log.join(h)).unwrap_or_else(|_| panic!("{h} did not run"));
        let state: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{h}: {e}: {text}"));
        assert_eq!(state["id"], id.as_str(), "{h}");
    }
    assert_eq!(
        std::fs::read_to_string(log.join("process")).unwrap(),
        "process-ran\n"
    );
}

/// A failing poststop hook does not keep a stopped container: `delete` removes its
/// state, runs the hook once, logs the hook's error and exits 0, as runc 1.1.5. The
/// state used to stay, and every `delete` (`--force` too) ran the hook and failed.
#[test]
fn a_failing_poststop_hook_is_logged_and_the_delete_completes() {
    needs_root!();
    let env = TestEnv::new();
    let ran = env.dir.path().join("poststop-ran");
    let mut b = env.bundle("b", &["true"]);
    let hook = format!("echo ran >> {}; exit 3", ran.display());
    b.edit(|s| s["hooks"] = json!({"poststop": [{"path": "/bin/sh", "args": ["sh", "-c", hook]}]}));
    let id = env.id("poststop");
    let c = Container::start(&env, &b, &id);
    assert!(c.wait_status("stopped", 10));
    let o = env.siloc(&["delete", &id]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("error running poststop hook"), "{err}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");
    assert!(!env.ok(&["list", "-q"]).contains(&id));
    drop(c);
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap(),
        "ran\n",
        "the hook ran again"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn failing_prestart_hook_fails_create_and_leaves_nothing() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| s["hooks"] = json!({"prestart": [{"path": "/bin/false"}]}));
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &env.id("badhook")]);
    assert!(!ok);
    assert!(err.contains("hook"), "{err}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A hook that succeeds, then one that fails with output on both streams: runc names
/// the second (`error running <kind> hook #1`) with its status and output. The
/// create-time kinds fail `create` (leaving nothing), poststart fails `start`.
#[test]
fn a_failing_hook_is_named_as_runc_names_it() {
    needs_root!();
    let env = TestEnv::new();
    let fail =
        |sh: &str| json!({"path": sh, "args": ["sh", "-c", "echo out; echo no >&2; exit 3"]});
    let want = |kind: &str| {
        format!(
            "error running {kind} hook #1: error running hook: exit status 3, stdout: out, stderr: no"
        )
    };
    for kind in ["prestart", "createRuntime", "createContainer"] {
        let mut b = env.bundle(kind, &["true"]);
        b.edit(|s| s["hooks"] = json!({kind: [{"path": "/bin/true"}, fail("/bin/sh")]}));
        let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &env.id(kind)]);
        assert!(!ok, "{kind}");
        assert!(err.contains(&want(kind)), "{kind}: {err}");
        assert!(env.leftovers().is_empty(), "{kind}: {:?}", env.leftovers());
    }
    let mut b = env.bundle("poststart", &["sleep", "100"]);
    b.edit(|s| s["hooks"] = json!({"poststart": [{"path": "/bin/true"}, fail("/bin/sh")]}));
    let c = Container::create(&env, &b, &env.id("poststart"));
    let err = env.fails(&["start", &c.id]);
    assert!(err.contains(&want("poststart")), "{err}");
    drop(c);
    // startContainer hooks run in the container's init after `start`: runc's init
    // prints the failure on the container's stderr and exits 255; the program never
    // runs.
    let mut b = env.bundle("startc", &["sh", "-c", "echo program-ran"]);
    b.edit(|s| s["hooks"] = json!({"startContainer": [{"path": "/bin/true"}, fail("/bin/sh")]}));
    let (code, out, err) = run(&env, &b, "startc");
    assert_eq!(code, 255, "{out} {err}");
    assert!(err.contains(&want("startContainer")), "{err}");
    assert!(!out.contains("program-ran"), "{out}");
    // one that cannot be started, as Go's os/exec words it
    let mut b = env.bundle("startc2", &["true"]);
    b.edit(|s| s["hooks"] = json!({"startContainer": [{"path": "/nonexistent"}]}));
    let (code, _, err) = run(&env, &b, "startc2");
    assert_eq!(code, 255, "{err}");
    assert!(
        err.contains(
            "error running startContainer hook #0: fork/exec /nonexistent: no such file or directory"
        ),
        "{err}"
    );
}

/// createContainer hooks run with the container's rootfs as working directory (runc
/// changes into it first), also in a container with its own user namespace;
/// startContainer hooks without `env` get the process's environment.
#[test]
fn hooks_run_where_and_with_what_runc_gives_them() {
    needs_root!();
    let env = TestEnv::new();
    for userns in [false, true] {
        let mut b = env.bundle(&format!("b{userns}"), &["true"]);
        if userns {
            b.annotate("io.siloc.userns", "auto");
        }
        b.edit(|s| {
            s["root"]["readonly"] = Value::Bool(false);
            s["process"]["env"] = json!(["PATH=/bin", "FOO=bar"]);
            s["hooks"] = json!({
                "createContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "pwd > cc-pwd"]}],
                "startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "env > /sc-env"]},
                    {"path": "/bin/sh", "args": ["sh", "-c", "env > /sc-env2; cat > /sc-state"],
                     "env": ["PATH=/bin", "ONLY=this"]}],
            });
        });
        let (code, _, err) = run(&env, &b, &format!("where{userns}"));
        assert_eq!(code, 0, "userns {userns}: {err}");
        let rootfs = std::fs::canonicalize(b.dir.join("rootfs")).unwrap();
        assert_eq!(
            std::fs::read_to_string(rootfs.join("cc-pwd"))
                .unwrap_or_default()
                .trim(),
            rootfs.to_str().unwrap(),
            "userns {userns}: {err}"
        );
        let e = std::fs::read_to_string(rootfs.join("sc-env")).unwrap();
        assert!(e.lines().any(|l| l == "FOO=bar"), "{e}");
        // a hook's own env replaces the process's; the state says created, pid in
        // the container's PID namespace (runc's init gives its getpid())
        let e = std::fs::read_to_string(rootfs.join("sc-env2")).unwrap();
        assert!(e.lines().any(|l| l == "ONLY=this"), "{e}");
        assert!(!e.lines().any(|l| l == "FOO=bar"), "{e}");
        let st: Value =
            serde_json::from_str(&std::fs::read_to_string(rootfs.join("sc-state")).unwrap())
                .unwrap();
        assert_eq!(st["status"], "created", "{st}");
        assert_eq!(st["pid"], 1, "{st}");
        assert_eq!(st["bundle"], b.path(), "{st}");
    }
}

#[test]
fn masked_and_readonly_paths() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "echo kcore=$(cat /proc/kcore | wc -c); \
             echo 1 > /proc/sys/kernel/domainname 2>/dev/null && echo sys-writable || echo sys-ro; \
             ls /sys/firmware | wc -l",
        ],
    );
    let (code, out, err) = run(&env, &b, "mask");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "kcore=0\nsys-ro\n0\n");
}

#[test]
fn devices_from_the_spec() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "stat -c '%t:%T %a' /dev/mynull; echo x > /dev/mynull && echo wrote; \
                        head -c 4 /dev/zero | wc -c; test -e /dev/kmsg || echo no-kmsg",
        ],
    );
    b.edit(|s| {
        s["linux"]["devices"] = json!([{"path": "/dev/mynull", "type": "c", "major": 1, "minor": 3,
                                        "fileMode": 438, "uid": 0, "gid": 0}]);
        s["linux"]["resources"]["devices"]
            .as_array_mut()
            .unwrap()
            .push(json!({"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"}));
    });
    let (code, out, err) = run(&env, &b, "dev");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1:3 666\nwrote\n4\nno-kmsg\n");
}

/// A shared host mount, bind-mounted `rslave` and `rprivate`: a mount made on the host
/// after start shows up only through the slave.
#[test]
fn bind_mount_propagation() {
    needs_root!();
    let env = TestEnv::new();
    let shared = env.dir.path().join("shared");
    std::fs::create_dir_all(shared.join("sub")).unwrap();
    let sh = shared.to_str().unwrap();
    nix::mount::mount(
        Some(sh),
        sh,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
    nix::mount::mount(
        None::<&str>,
        sh,
        None::<&str>,
        nix::mount::MsFlags::MS_SHARED,
        None::<&str>,
    )
    .unwrap();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.edit(|s| {
        for (dst, prop) in [("/slave", "rslave"), ("/private", "rprivate")] {
            s["mounts"].as_array_mut().unwrap().push(json!({
                "destination": dst, "type": "bind", "source": sh,
                "options": ["rbind", prop]
            }));
        }
    });
    let c = Container::start(&env, &b, &env.id("prop"));
    let sub = shared.join("sub");
    nix::mount::mount(
        Some("tmpfs"),
        &sub,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    let (code, out, err) = c.exec(&["sh", "-c", "grep -c ' /slave/sub ' /proc/self/mountinfo; grep -c ' /private/sub ' /proc/self/mountinfo"]);
    let _ = nix::mount::umount2(&sub, nix::mount::MntFlags::MNT_DETACH);
    drop(c);
    let _ = nix::mount::umount2(&shared, nix::mount::MntFlags::MNT_DETACH);
    assert_eq!(out, "1\n0\n", "exit {code}: {err}");
}

/// runc takes the recursive forms (`rshared`, `rslave`, ...) that podman passes, as
/// well as the four names runtime-spec lists, and an empty value; each must run.
#[test]
fn rootfs_propagation_takes_runcs_names() {
    needs_root!();
    let env = TestEnv::new();
    for (i, p) in [
        "shared",
        "rshared",
        "slave",
        "rslave",
        "private",
        "rprivate",
        "unbindable",
        "runbindable",
        "", // unset, as for runc
    ]
    .into_iter()
    .enumerate()
    {
        let mut b = env.bundle(&format!("b{i}"), &["true"]);
        b.edit(|s| s["linux"]["rootfsPropagation"] = p.into());
        let (code, _, err) = run(&env, &b, &format!("p{i}"));
        assert_eq!(code, 0, "rootfsPropagation {p}: {err}");
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn capabilities_and_rlimits() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "grep CapEff /proc/self/status; ulimit -n; ulimit -Hn",
        ],
    );
    b.edit(|s| {
        let caps = json!(["CAP_CHOWN", "CAP_KILL"]);
        for set in ["bounding", "effective", "permitted", "ambient"] {
            s["process"]["capabilities"][set] = caps.clone();
        }
        s["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "soft": 512, "hard": 768}]);
    });
    let (code, out, err) = run(&env, &b, "caps");
    assert_eq!(code, 0, "{err}");
    // CAP_CHOWN is bit 0, CAP_KILL bit 5.
    assert_eq!(out, "CapEff:\t0000000000000021\n512\n768\n");
}

#[test]
fn seccomp_profile_denies_a_syscall() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "mkdir /tmp/x 2>&1; echo rc=$?; ls /tmp >/dev/null && echo ls-ok",
        ],
    );
    b.edit(|s| {
        s["root"]["readonly"] = Value::Bool(false);
        s["linux"]["seccomp"] = json!({
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]
        });
    });
    let (code, out, err) = run(&env, &b, "seccomp");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Operation not permitted"), "{out}");
    assert!(out.contains("rc=1") && out.contains("ls-ok"), "{out}");
}

#[test]
fn sysctl_hostname_env_and_cwd() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "cat /proc/sys/net/ipv4/ip_forward; hostname; echo $FOO; pwd",
        ],
    );
    b.edit(|s| {
        s["linux"]["sysctl"] = json!({"net.ipv4.ip_forward": "1"});
        s["hostname"] = json!("box1");
        s["process"]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!("FOO=bar"));
        s["process"]["cwd"] = json!("/etc");
    });
    let (code, out, err) = run(&env, &b, "sysctl");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1\nbox1\nbar\n/etc\n");
}

/// runc makes a missing process.cwd (mode 0755, as the container's root); a symlink in
/// the image resolves inside the rootfs, never on the host.
#[test]
fn a_missing_cwd_is_made_inside_the_rootfs() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sh", "-c", "pwd; stat -c '%u %a' ."]);
    std::os::unix::fs::symlink("/srv", b.dir.join("rootfs/app")).unwrap();
    b.edit(|s| s["process"]["cwd"] = json!("/app/work/dir"));
    let (code, out, err) = run(&env, &b, "cwd");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "/srv/work/dir\n0 755\n");
    assert!(b.dir.join("rootfs/srv/work/dir").is_dir());
    assert!(!Path::new("/srv/work/dir").exists(), "made on the host");
    // Under a bind mount (a volume) it is made in the mount's source, as runc does
    // after mounting; nothing is left hidden in the rootfs below the mount.
    let vol = env.dir.path().join("vol");
    std::fs::create_dir(&vol).unwrap();
    b.edit(|s| {
        s["process"]["cwd"] = json!("/data/new");
        s["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/data", "type": "bind",
            "source": vol.to_str().unwrap(), "options": ["rbind"]
        }));
    });
    let (code, out, err) = run(&env, &b, "cwd-vol");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "/data/new\n0 755\n");
    assert!(vol.join("new").is_dir());
    assert!(
        !b.dir.join("rootfs/data/new").exists(),
        "made below the mount"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn cgroup_limits_reach_the_cgroup() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("limits");
    let cg = format!("/siloc-test/{id}");
    b.edit(|s| {
        s["linux"]["cgroupsPath"] = json!(cg);
        s["linux"]["resources"]["memory"] = json!({"limit": 67108864});
        s["linux"]["resources"]["pids"] = json!({"limit": 42});
    });
    let c = Container::start(&env, &b, &id);
    let read = |p: &str| std::fs::read_to_string(Path::new(p)).unwrap_or_default();
    let v1 = Path::new("/sys/fs/cgroup/memory").is_dir();
    if v1 {
        assert_eq!(
            read(&format!("/sys/fs/cgroup/memory{cg}/memory.limit_in_bytes")),
            "67108864\n"
        );
        assert_eq!(read(&format!("/sys/fs/cgroup/pids{cg}/pids.max")), "42\n");
    } else {
        assert_eq!(
            read(&format!("/sys/fs/cgroup{cg}/memory.max")),
            "67108864\n"
        );
        assert_eq!(read(&format!("/sys/fs/cgroup{cg}/pids.max")), "42\n");
    }
    // update changes a live container's limits
    env.ok(&["update", "--pids-limit", "7", &id]);
    let pids = if v1 {
        format!("/sys/fs/cgroup/pids{cg}/pids.max")
    } else {
        format!("/sys/fs/cgroup{cg}/pids.max")
    };
    assert_eq!(read(&pids), "7\n");
    drop(c);
    // the container's cgroup is gone; remove the parent this test named
    for ctl in [
        "memory",
        "pids",
        "cpu",
        "cpuacct",
        "cpuset",
        "devices",
        "freezer",
        "blkio",
        "hugetlb",
        "net_cls",
        "perf_event",
        "systemd",
        "",
    ] {
        let p = Path::new("/sys/fs/cgroup")
            .join(ctl)
            .join(format!("siloc-test/{id}"));
        assert!(!p.exists(), "{} left behind", p.display());
        let _ = std::fs::remove_dir(p.parent().unwrap());
    }
}

#[test]
fn user_namespace_from_the_spec() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "id -u; cat /proc/self/uid_map; stat -c %u /bin/busybox",
        ],
    );
    b.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user"}));
        s["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 300000, "size": 65536}]);
        s["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 300000, "size": 65536}]);
    });
    let (code, out, err) = run(&env, &b, "specns");
    assert_eq!(code, 0, "{err}");
    let words: Vec<&str> = out.split_whitespace().collect();
    // The rootfs is host root's and the spec maps no host 0: files show as the
    // overflow uid, exactly as under runc.
    assert_eq!(words, ["0", "0", "300000", "65536", "65534"]);
}

/// On a cgroup v1 host the container's hierarchies are read-only, as the default
/// spec's `cgroup` mount says (`ro`): a container cannot raise its own pids.max.
/// libcontainer 0.7 mounts them read-write; siloc remounts them (runc's behaviour).
#[test]
fn cgroup_v1_hierarchies_are_read_only() {
    needs_root!();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    if !mounts.contains(" /sys/fs/cgroup/pids ") {
        eprintln!("SKIPPED: no cgroup v1 pids hierarchy on this host");
        return;
    }
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "echo 77 > /sys/fs/cgroup/pids/pids.max; cat /sys/fs/cgroup/pids/pids.max; \
             grep ' /sys/fs/cgroup/pids ' /proc/self/mountinfo | cut -d' ' -f6",
        ],
    );
    b.edit(|s| s["linux"]["resources"]["pids"] = json!({"limit": 50}));
    let (code, out, err) = run(&env, &b, "cgro");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines[0], "50", "{out}");
    let opts: Vec<_> = lines[1].split(',').collect();
    for want in ["ro", "nosuid", "nodev", "noexec"] {
        assert!(opts.contains(&want), "{out}");
    }
}

/// process.terminal in a foreground `run`: lines come back as `text\n` (runc clears
/// ONLCR), the pty belongs to the process's uid (its group stays devpts's `gid=5`, as
/// runc 1.1.5 leaves it), and process.consoleSize sizes it.
#[test]
fn terminal_without_onlcr_owned_by_the_process_and_sized() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "echo hello; stat -L -c %u:%g /proc/self/fd/0; stty size",
        ],
    );
    b.edit(|s| {
        s["process"]["terminal"] = Value::Bool(true);
        s["process"]["user"] = json!({"uid": 1000, "gid": 1001});
        s["process"]["consoleSize"] = json!({"height": 30, "width": 100});
    });
    let (code, out, err) = run(&env, &b, "tty");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "hello\n1000:5\n30 100\n", "{err}");
    // A relative --bundle (libcontainer changes the working directory during create;
    // the console's owner came out 0:0).
    let id = env.id("ttyrel");
    let o = env
        .cmd(&["run", "--bundle", "b", &id])
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "hello\n1000:5\n30 100\n",
        "{err}"
    );
}

/// Accepts one connection on a console socket and returns the pty master sent on it
/// (SCM_RIGHTS), as containerd's shim and conmon do.
pub(crate) fn receive_master(l: &std::os::unix::net::UnixListener) -> std::fs::File {
    std::fs::File::from(common::accept_fd(l, "console socket"))
}

/// Everything the pty master gives until the slave side is gone (EIO).
pub(crate) fn read_master(mut m: std::fs::File) -> String {
    use std::io::Read;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = m.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A caller's `--console-socket` (containerd, podman) gets the pty as runc hands it
/// over: ONLCR cleared, the slave owned by the process's uid (devpts's group),
/// consoleSize applied, for `create` and for `exec -d --console-socket`; the exec'd
/// program sees its owner from its first instruction.
#[test]
fn a_callers_console_socket_gets_the_fixed_terminal() {
    needs_root!();
    let env = TestEnv::new();
    let b = console_socket_bundle(&env, "b");
    console_socket_case(&env, &b, "plain");
}

/// The script of [`console_socket_case`]: the pty's owner, its size, a line.
const CONSOLE_SCRIPT: &str = "stat -L -c %u:%g /proc/self/fd/0; stty size; echo hello";

/// A bundle for [`console_socket_case`]: a terminal, user 1000:1001, 30x100.
pub(crate) fn console_socket_bundle(env: &TestEnv, name: &str) -> common::Bundle {
    let mut b = env.bundle(
        name,
        &["sh", "-c", &format!("{CONSOLE_SCRIPT}; sleep 1000")],
    );
    b.edit(|s| {
        s["process"]["terminal"] = Value::Bool(true);
        s["process"]["user"] = json!({"uid": 1000, "gid": 1001});
        s["process"]["consoleSize"] = json!({"height": 30, "width": 100});
    });
    b
}

/// `create --console-socket` of `b` (from [`console_socket_bundle`]), then `exec -d
/// --process --console-socket` as 1002:1003 at 20x60: both ptys arrive on the socket
/// owned by the process's uid with devpts's group 5 (runc 1.1.5), sized, with ONLCR
/// cleared (`\n`, not `\r\n`). `tag` names the case in failures and files.
pub(crate) fn console_socket_case(env: &TestEnv, b: &common::Bundle, tag: &str) {
    let sock = env.dir.path().join(format!("console-{tag}.sock"));
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let id = env.id(&format!("cs{tag}"));
    let (ok, _, err) = env.detached(&[
        "create",
        "--bundle",
        b.path(),
        "--console-socket",
        sock.to_str().unwrap(),
        &id,
    ]);
    assert!(ok, "{tag}: {err}");
    let c = Container { env, id };
    let master = receive_master(&l);
    env.ok(&["start", &c.id]);
    let reader = std::thread::spawn(move || read_master(master));
    let proc_json = env.dir.path().join(format!("p-{tag}.json"));
    let mut p = b.spec["process"].clone();
    p["args"] = json!(["sh", "-c", CONSOLE_SCRIPT]);
    p["user"] = json!({"uid": 1002, "gid": 1003});
    p["consoleSize"] = json!({"height": 20, "width": 60});
    std::fs::write(&proc_json, serde_json::to_vec(&p).unwrap()).unwrap();
    let (ok, _, err) = env.detached(&[
        "exec",
        "-d",
        "--process",
        proc_json.to_str().unwrap(),
        "--console-socket",
        sock.to_str().unwrap(),
        &c.id,
    ]);
    assert!(ok, "{tag}: {err}");
    assert_eq!(
        read_master(receive_master(&l)),
        "1002:5\n20 60\nhello\n",
        "{tag}"
    );
    env.ok(&["kill", &c.id, "KILL"]);
    assert_eq!(reader.join().unwrap(), "1000:5\n30 100\nhello\n", "{tag}");
}

/// A foreground `exec -t` from a terminal: the program sees the caller's window size
/// from its first instruction (siloc gives it as the process's consoleSize). The
/// size used to be copied once the relay started, after the program ran: `stty
/// size` saw 0x0 ("stty: standard input"); runc 1.1.5 races the same way.
#[test]
fn exec_tty_takes_the_callers_window_size_before_the_program_runs() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let c = Container::start(&env, &b, &env.id("execsize"));
    let pty = nix::pty::openpty(
        Some(&nix::pty::Winsize {
            ws_row: 21,
            ws_col: 77,
            ws_xpixel: 0,
            ws_ypixel: 0,
        }),
        None,
    )
    .unwrap();
    for _ in 0..3 {
        let o = env
            .cmd(&["exec", "-t", &c.id, "stty", "size"])
            .stdin(std::fs::File::from(pty.slave.try_clone().unwrap()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "21 77\n", "{err}");
    }
    drop(pty);
}

/// `exec -t` relayed by siloc: even the first line arrives as `text\n` (the pty is
/// fixed inside the container before the process runs, not by siloc racing it).
#[test]
fn exec_tty_output_has_no_carriage_returns_from_the_first_line() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let c = Container::start(&env, &b, &env.id("exectty"));
    for _ in 0..10 {
        let (code, out, err) = c.exec(&["-t", "echo", "first"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "first\n", "{err}");
    }
}
