//! A container with a user namespace in a network namespace given by path that the
//! host's user namespace owns: what containerd's CRI gives a pod with
//! `io.siloc.userns=auto` and a CNI network (siloc's engine::outer_namespaces).
//! libcontainer 0.7 alone fails such a create with a bare EPERM. Needs root (and
//! iproute2's `ip netns`); skips loudly without it.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::process::Command;

use common::{Container, TestEnv};
use serde_json::{Value, json};

/// A network namespace pinned at /var/run/netns/NAME (`ip netns add`, as containerd's
/// CRI pins a pod's), deleted when dropped, also when the test fails.
struct NetNs {
    name: String,
}

impl NetNs {
    fn add(name: &str) -> NetNs {
        let st = Command::new("ip")
            .args(["netns", "add", name])
            .status()
            .expect("ip netns add");
        assert!(st.success(), "ip netns add {name}");
        NetNs {
            name: name.to_string(),
        }
    }

    fn path(&self) -> String {
        format!("/var/run/netns/{}", self.name)
    }

    /// `net:[inode]`, as readlink(/proc/PID/ns/net) shows it.
    fn link(&self) -> String {
        format!("net:[{}]", std::fs::metadata(self.path()).unwrap().ino())
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Replaces the `typ` entry of the spec's `linux.namespaces` (a new one, or `path`).
pub(crate) fn set_namespace(spec: &mut Value, typ: &str, path: Option<&str>) {
    let ns = spec["linux"]["namespaces"].as_array_mut().unwrap();
    ns.retain(|n| n["type"] != typ);
    ns.push(match path {
        Some(p) => json!({"type": typ, "path": p}),
        None => json!({"type": typ}),
    });
}

fn ns_link(pid: i64, t: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/ns/{t}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn pid_of(env: &TestEnv, id: &str) -> i64 {
    env.state(id)["pid"].as_i64().expect("pid")
}

#[test]
fn userns_auto_in_a_host_owned_netns_runs_and_execs() {
    needs_root!();
    let env = TestEnv::new();
    let netns = NetNs::add(&env.id("nsp"));
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "readlink /proc/self/ns/net; cat /proc/self/uid_map; ls /sys/class/net >/dev/null && echo sys-ok",
        ],
    );
    b.annotate("io.siloc.userns", "auto");
    b.edit(|s| set_namespace(s, "network", Some(&netns.path())));

    // `siloc run` in the foreground: the container's output and exit status.
    let id = env.id("run");
    let out = env.ok(&["run", "--bundle", b.path(), &id]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        netns.link(),
        "the container is in the netns: {out}"
    );
    let map: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(map[0], "0");
    assert_ne!(map[1], "0", "a host range, not host root: {out}");
    assert_eq!(
        lines[2], "sys-ok",
        "sysfs (a bind of the host's /sys) is there"
    );
    env.assert_no_trace(&id);

    // create, start, exec, state, delete. The prestart and createRuntime hooks run in
    // the runtime's network namespace (runtime-spec), not the container's.
    let hook_out = env.dir.path().join("hook-netns");
    let hook = json!([{"path": "/bin/sh", "args": ["sh", "-c",
        format!("readlink /proc/self/ns/net >>{}", hook_out.display())]}]);
    b.edit(|s| {
        s["process"]["args"] = json!(["sleep", "1000"]);
        s["hooks"] = json!({"prestart": hook, "createRuntime": hook});
    });
    let id = env.id("bg");
    let c = Container::start(&env, &b, &id);
    let pid = pid_of(&env, &id);
    assert_eq!(ns_link(pid, "net"), netns.link());
    assert_ne!(
        ns_link(pid, "user"),
        ns_link(std::process::id() as i64, "user")
    );
    assert_eq!(
        env.state(&id)["annotations"]["io.siloc.namespaces.inherited"],
        format!("network={}", netns.path())
    );
    let host_net = ns_link(std::process::id() as i64, "net");
    assert_ne!(host_net, netns.link());
    assert_eq!(
        std::fs::read_to_string(&hook_out).unwrap(),
        format!("{host_net}\n{host_net}\n"),
        "prestart and createRuntime hooks in the runtime's netns"
    );
    let (rc, out, err) = c.exec(&[
        "sh",
        "-c",
        "readlink /proc/self/ns/net; readlink /proc/self/ns/user; id -u; exit 3",
    ]);
    assert_eq!(rc, 3, "exec exit code: {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, [netns.link(), ns_link(pid, "user"), "0".to_string()]);
    drop(c);
    env.assert_no_trace(&id);
    // The netns is the caller's: siloc leaves it alone.
    assert!(std::path::Path::new(&netns.path()).exists());
}

/// A pod's app container, as siloc's shim makes it: it joins the sandbox's user
/// namespace (by path, with the sandbox's mappings), the sandbox's network namespace
/// (host-owned: siloc joins it before the user namespace) and its IPC namespace
/// (the sandbox's user namespace owns it: libcontainer joins it, as before).
#[test]
fn an_app_container_joins_the_sandboxs_namespaces() {
    needs_root!();
    let env = TestEnv::new();
    let netns = NetNs::add(&env.id("nsa"));
    let mut sb = env.bundle("sandbox", &["sleep", "1000"]);
    sb.annotate("io.siloc.userns", "auto");
    sb.edit(|s| set_namespace(s, "network", Some(&netns.path())));
    let sid = env.id("sandbox");
    let s = Container::start(&env, &sb, &sid);
    let spid = pid_of(&env, &sid);
    let range = env.state(&sid)["annotations"]["io.siloc.userns.range"]
        .as_str()
        .unwrap()
        .to_string();
    let uid: u64 = range
        .split(',')
        .find_map(|kv| kv.strip_prefix("uid="))
        .unwrap()
        .parse()
        .unwrap();

    let mut app = env.bundle("app", &["sleep", "1000"]);
    app.edit(|s| {
        for (t, p) in [("user", "user"), ("network", "net"), ("ipc", "ipc")] {
            set_namespace(s, t, Some(&format!("/proc/{spid}/ns/{p}")));
        }
        let m = json!([{"containerID": 0, "hostID": uid, "size": 65536}]);
        s["linux"]["uidMappings"] = m.clone();
        s["linux"]["gidMappings"] = m;
    });
    let aid = env.id("app");
    let a = Container::start(&env, &app, &aid);
    let apid = pid_of(&env, &aid);
    for t in ["user", "net", "ipc"] {
        assert_eq!(ns_link(apid, t), ns_link(spid, t), "{t} namespace shared");
    }
    assert_eq!(
        env.state(&aid)["annotations"]["io.siloc.namespaces.inherited"],
        format!("network=/proc/{spid}/ns/net"),
        "only the host-owned network namespace is joined by siloc"
    );
    let (rc, out, err) = a.exec(&["readlink", "/proc/self/ns/net"]);
    assert_eq!((rc, out.trim()), (0, netns.link().as_str()), "{err}");
    drop(a);
    drop(s);
    env.assert_no_trace(&aid);
    env.assert_no_trace(&sid);
}

/// Without a user namespace nothing changes: libcontainer joins the path as host root,
/// and siloc notes nothing.
#[test]
fn a_plain_container_in_a_netns_is_unchanged() {
    needs_root!();
    let env = TestEnv::new();
    let netns = NetNs::add(&env.id("nsn"));
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.edit(|s| set_namespace(s, "network", Some(&netns.path())));
    let id = env.id("plain");
    let c = Container::start(&env, &b, &id);
    let pid = pid_of(&env, &id);
    assert_eq!(ns_link(pid, "net"), netns.link());
    assert_eq!(
        env.state(&id)["annotations"]["io.siloc.namespaces.inherited"],
        Value::Null
    );
    let (rc, out, _) = c.exec(&["readlink", "/proc/self/ns/net"]);
    assert_eq!((rc, out.trim()), (0, netns.link().as_str()));
    drop(c);
    env.assert_no_trace(&id);
}

/// A pid namespace path that the container's new user namespace cannot own: a clear
/// error naming the path, and nothing left. (With the spec's proc mount the error is
/// runc's: see namespaces_the_user_namespace_does_not_own_get_runcs_errors.)
#[test]
fn a_host_owned_pid_namespace_path_is_refused_clearly() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["true"]);
    b.annotate("io.siloc.userns", "auto");
    b.edit(|s| {
        set_namespace(s, "pid", Some("/proc/self/ns/pid"));
        s["mounts"]
            .as_array_mut()
            .unwrap()
            .retain(|m| m["type"] != "proc");
    });
    let id = env.id("pidns");
    let err = env.fails(&["run", "--bundle", b.path(), &id]);
    assert!(
        err.contains("pid namespace path /proc/self/ns/pid belongs to a user namespace other than the container's"),
        "{err}"
    );
    env.assert_no_trace(&id);
}

/// A pod's app container created while the sandbox's init has not exec'd yet (created,
/// not started: what containerd's parallel pods hit under load, since `start` returns
/// before the init's execve is done). The app joins the sandbox's user namespace and
/// its pid, ipc and uts namespaces by path. libcontainer 0.7 opened those paths after
/// entering the user namespace, where the ptrace check on the not-yet-dumpable init
/// fails: `intermediate process error EACCES: Permission denied`. siloc opens them
/// first (engine::pinned_namespaces); the record keeps the given paths.
#[test]
fn an_app_container_joins_a_sandbox_that_has_not_exec_yet() {
    needs_root!();
    let env = TestEnv::new();
    let mut sb = env.bundle("sandbox", &["sleep", "1000"]);
    sb.annotate("io.siloc.userns", "auto");
    let sid = env.id("sandbox");
    let s = Container::create(&env, &sb, &sid);
    let spid = pid_of(&env, &sid);
    let mut app = env.bundle("app", &["sleep", "1000"]);
    app.edit(|s| {
        for t in ["user", "pid", "ipc", "uts"] {
            set_namespace(s, t, Some(&format!("/proc/{spid}/ns/{t}")));
        }
    });
    let aid = env.id("app");
    let a = Container::create(&env, &app, &aid);
    let apid = pid_of(&env, &aid);
    for t in ["user", "pid", "ipc", "uts"] {
        assert_eq!(ns_link(apid, t), ns_link(spid, t), "{t} namespace shared");
    }
    let rec = env
        .root
        .join(".siloc/containers")
        .join(&aid)
        .join("config.json");
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    let pid_path = rec["linux"]["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["type"] == "pid")
        .map(|n| n["path"].clone());
    assert_eq!(pid_path, Some(json!(format!("/proc/{spid}/ns/pid"))));
    env.ok(&["start", &sid]);
    env.ok(&["start", &aid]);
    assert!(a.wait_status("running", 5));
    drop(a);
    drop(s);
    env.assert_no_trace(&aid);
    env.assert_no_trace(&sid);
}

/// A `user` path that is not a user namespace (here a network namespace) is refused
/// in runc's nsexec words before anything is made, and nothing is left. libcontainer
/// 0.7 said `intermediate process error EINVAL` once it had made the cgroups.
#[test]
fn a_user_namespace_path_of_another_type_is_refused_in_runcs_words() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| {
        set_namespace(s, "user", Some("/proc/self/ns/net"));
        let map = json!([{"containerID": 0, "hostID": 100000, "size": 65536}]);
        s["linux"]["uidMappings"] = map.clone();
        s["linux"]["gidMappings"] = map;
    });
    let id = env.id("usernet");
    let err = env.fails(&["run", "--bundle", b.path(), &id]);
    assert!(
        err.contains(
            "failed to setns into user namespace: Invalid argument (linux.namespaces: user \
             namespace path /proc/self/ns/net is a net namespace)"
        ),
        "{err}"
    );
    env.assert_no_trace(&id);
}

/// An app container whose sandbox stopped (killed, not yet deleted: its range still
/// held) between the shim's look at it and the app's create: the user namespace path
/// is gone, and the error is runc's lstat words naming it, not an overlap with the
/// sandbox's own range. Nothing of the app is left, and the sandbox keeps its range.
#[test]
fn an_app_container_of_a_stopped_sandbox_names_the_missing_namespace() {
    needs_root!();
    let env = TestEnv::new();
    let mut sb = env.bundle("sandbox", &["sleep", "1000"]);
    sb.annotate("io.siloc.userns", "auto");
    let sid = env.id("gone-sb");
    let s = Container::start(&env, &sb, &sid);
    let spid = pid_of(&env, &sid);
    let uid = range_uid(&env, &sid);
    env.siloc(&["kill", &sid, "KILL"]);
    // Reaped, not only stopped: a zombie's user namespace stays reachable (it comes
    // from the task's credentials, which live until the reap).
    let proc_dir = format!("/proc/{spid}");
    for _ in 0..250 {
        if !std::path::Path::new(&proc_dir).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !std::path::Path::new(&proc_dir).exists(),
        "{proc_dir} not reaped"
    );
    assert_eq!(env.state(&sid)["status"], "stopped");
    let mut app = env.bundle("app", &["true"]);
    app.edit(|s| {
        set_namespace(s, "user", Some(&format!("/proc/{spid}/ns/user")));
        let m = json!([{"containerID": 0, "hostID": uid, "size": 65536}]);
        s["linux"]["uidMappings"] = m.clone();
        s["linux"]["gidMappings"] = m;
    });
    let aid = env.id("gone-app");
    let err = env.fails(&["create", "--bundle", app.path(), &aid]);
    assert!(
        err.contains(&format!(
            "unable to create new parent process: namespace path: lstat /proc/{spid}/ns/user: \
             no such file or directory"
        )),
        "{err}"
    );
    nothing_of(&env, &aid);
    assert_eq!(range_uid(&env, &sid), uid, "the sandbox keeps its range");
    drop(s);
    env.assert_no_trace(&sid);
}

/// Nothing of container `id` is left (its state, record, ID range, processes,
/// cgroups), while other containers of `env` may run.
fn nothing_of(env: &TestEnv, id: &str) {
    let left: Vec<String> = env
        .leftovers()
        .into_iter()
        .filter(|l| l.contains(id))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        common::traces_of(id).is_empty(),
        "{:?}",
        common::traces_of(id)
    );
}

/// The uid range of siloc container `id` (its `io.siloc.userns.range` report).
fn range_uid(env: &TestEnv, id: &str) -> u64 {
    let range = env.state(id)["annotations"]["io.siloc.userns.range"]
        .as_str()
        .expect("a range")
        .to_string();
    range
        .split(',')
        .find_map(|kv| kv.strip_prefix("uid="))
        .expect("uid=")
        .parse()
        .expect("a number")
}

/// Namespaces a container's user namespace does not own, as runc 1.1.5 meets them
/// (engine::ns_owner), each refused before anything is made, in runc's words: a new
/// user namespace in another container's PID namespace cannot mount proc; a joined
/// user namespace cannot setns into a PID namespace the host owns; a joined user
/// namespace in a host-owned IPC namespace (siloc joins it before the user namespace)
/// cannot mount the default spec's /dev/mqueue, nor can a new one in the host's. The
/// main binary said siloc's own text for the first two and only `failed to prepare
/// rootfs` for the others.
#[test]
fn namespaces_the_user_namespace_does_not_own_get_runcs_errors() {
    needs_root!();
    let env = TestEnv::new();
    // X: its own user namespace, PID and IPC namespaces (owned by it).
    let mut xb = env.bundle("x", &["sleep", "1000"]);
    xb.annotate("io.siloc.userns", "auto");
    let xid = env.id("x");
    let x = Container::start(&env, &xb, &xid);
    let xpid = pid_of(&env, &xid);
    let xuid = range_uid(&env, &xid);
    // H: no user namespace; its PID and IPC namespaces are the host's user namespace's.
    let hb = env.bundle("h", &["sleep", "1000"]);
    let hid = env.id("h");
    let h = Container::start(&env, &hb, &hid);
    let hpid = pid_of(&env, &hid);

    let join_x_user = |s: &mut Value| {
        set_namespace(s, "user", Some(&format!("/proc/{xpid}/ns/user")));
        let m = json!([{"containerID": 0, "hostID": xuid, "size": 65536}]);
        s["linux"]["uidMappings"] = m.clone();
        s["linux"]["gidMappings"] = m;
    };
    let refused = |name: &str, edit: &dyn Fn(&mut Value), want: &str| {
        let mut b = env.bundle(name, &["true"]);
        b.edit(|s| edit(s));
        if name.starts_with("auto") {
            b.annotate("io.siloc.userns", "auto");
        }
        let id = env.id(name);
        // The log line quotes the message: `\"proc\"`.
        let err = env
            .fails(&["run", "--bundle", b.path(), &id])
            .replace("\\\"", "\"");
        assert!(err.contains(want), "{name}: {err}");
        nothing_of(&env, &id);
    };
    refused(
        "auto-pid",
        &|s| set_namespace(s, "pid", Some(&format!("/proc/{xpid}/ns/pid"))),
        &format!(
            "unable to start container process: error during container init: error mounting \
             \"proc\" to rootfs at \"/proc\": mount proc:/proc: operation not permitted (the \
             container's pid namespace, path /proc/{xpid}/ns/pid, is not owned by its user \
             namespace)"
        ),
    );
    refused(
        "joined-pid",
        &|s| {
            join_x_user(s);
            set_namespace(s, "pid", Some(&format!("/proc/{hpid}/ns/pid")));
        },
        &format!(
            "failed to setns into pid namespace: Operation not permitted (linux.namespaces: pid \
             namespace path /proc/{hpid}/ns/pid is not owned by the user namespace \
             /proc/{xpid}/ns/user joins)"
        ),
    );
    let mqueue = "unable to start container process: error during container init: error \
                  mounting \"mqueue\" to rootfs at \"/dev/mqueue\": mount mqueue:/dev/mqueue, \
                  flags: 0xe: operation not permitted (the container's ipc namespace, ";
    refused(
        "joined-ipc",
        &|s| {
            join_x_user(s);
            set_namespace(s, "ipc", Some(&format!("/proc/{hpid}/ns/ipc")));
        },
        &format!("{mqueue}path /proc/{hpid}/ns/ipc, is not owned by its user namespace)"),
    );
    refused(
        "auto-no-ipc",
        &|s| {
            s["linux"]["namespaces"]
                .as_array_mut()
                .unwrap()
                .retain(|n| n["type"] != "ipc");
        },
        &format!("{mqueue}the runtime's, as linux.namespaces has no ipc"),
    );
    // What the user namespace owns still runs: X's user, pid and ipc namespaces.
    let mut ok = env.bundle("ok", &["sh", "-c", "readlink /proc/self/ns/pid"]);
    ok.edit(|s| {
        join_x_user(s);
        for t in ["pid", "ipc"] {
            set_namespace(s, t, Some(&format!("/proc/{xpid}/ns/{t}")));
        }
    });
    let id = env.id("ok");
    let out = env.ok(&["run", "--bundle", ok.path(), &id]);
    assert_eq!(out.trim(), ns_link(xpid, "pid"));
    drop(h);
    drop(x);
    env.assert_no_trace(&xid);
}

/// A process in its own UTS namespace (a copy of the host's), killed when dropped.
struct UtsHolder(std::process::Child);

impl Drop for UtsHolder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `linux.sysctl` `kernel.domainname` in a container with its own user namespace:
/// no user namespace's root may write it (the UTS sysctls have no per-namespace
/// owner), so runc 1.1.5 fails in its init with `open /proc/sys/kernel/domainname:
/// permission denied`, for a new UTS namespace and for one given by path (measured
/// side by side here). siloc says the same before anything is made. Before: a new UTS
/// namespace failed with libcontainer's bare "open subpath in procfs failed", and one
/// given by path that the user namespace does not own got the value written by siloc
/// as the host's root. Without a user namespace it is set, as by runc.
#[test]
fn kernel_domainname_in_a_user_namespace_fails_in_runcs_words() {
    needs_root!();
    let env = TestEnv::new();
    let holder = UtsHolder(
        Command::new("unshare")
            .args(["--uts", "sleep", "300"])
            .spawn()
            .expect("unshare --uts"),
    );
    let uts_path = format!("/proc/{}/ns/uts", holder.0.id());
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while ns_link(holder.0.id() as i64, "uts") == ns_link(std::process::id() as i64, "uts") {
        assert!(
            std::time::Instant::now() < end,
            "unshare --uts did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let domain = |path: &str| {
        let o = Command::new("nsenter")
            .args([
                "--uts=".to_string() + path,
                "cat".into(),
                "/proc/sys/kernel/domainname".into(),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let before = domain(&uts_path);
    for (i, path) in [None, Some(uts_path.as_str())].into_iter().enumerate() {
        let mut b = env.bundle(&format!("b{i}"), &["cat", "/proc/sys/kernel/domainname"]);
        b.annotate("io.siloc.userns", "auto");
        b.edit(|s| {
            s["linux"]["sysctl"] = json!({"kernel.domainname": "siloc-test.example"});
            if path.is_some() {
                s.as_object_mut().unwrap().remove("hostname");
            }
            set_namespace(s, "uts", path);
        });
        let id = env.id(&format!("dn{i}"));
        let err = env.fails(&["run", "--bundle", b.path(), &id]);
        assert!(
            err.contains(
                "unable to start container process: error during container init: open \
                 /proc/sys/kernel/domainname: permission denied"
            ),
            "uts {path:?}: {err}"
        );
        env.assert_no_trace(&id);
        assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    }
    assert_eq!(
        domain(&uts_path),
        before,
        "the joined UTS namespace was changed"
    );
    let mut b = env.bundle("plain", &["cat", "/proc/sys/kernel/domainname"]);
    b.edit(|s| s["linux"]["sysctl"] = json!({"kernel.domainname": "siloc-test.example"}));
    let (code, out, err) = common::run(&env, &b, "dnplain");
    assert_eq!((code, out.as_str()), (0, "siloc-test.example\n"), "{err}");
}

/// A process in its own IPC namespace (host-owned), killed when dropped.
struct IpcHolder(std::process::Child);

impl IpcHolder {
    fn start() -> IpcHolder {
        let h = IpcHolder(
            Command::new("unshare")
                .args(["--ipc", "sleep", "300"])
                .spawn()
                .expect("unshare --ipc"),
        );
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while ns_link(h.pid(), "ipc") == ns_link(std::process::id() as i64, "ipc") {
            assert!(
                std::time::Instant::now() < end,
                "unshare --ipc did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        h
    }

    fn pid(&self) -> i64 {
        i64::from(self.0.id())
    }

    /// `/proc/sys/<key>` as seen in the holder's IPC namespace.
    fn sysctl(&self, key: &str) -> String {
        let o = Command::new("nsenter")
            .arg(format!("--ipc=/proc/{}/ns/ipc", self.pid()))
            .args(["cat", &format!("/proc/sys/{key}")])
            .output()
            .expect("nsenter");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }
}

impl Drop for IpcHolder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// IPC sysctls in an IPC namespace given by path whose owning user namespace's root is
/// not the container's (a host-owned one, a container root of host uid 100000+):
/// runc 1.1.5 writes them from its init as the container's root and fails with `open
/// /proc/sys/kernel/msgmax: permission denied` (the kernel's ipc_permissions; measured
/// here side by side). siloc says the same before anything is made, and the
/// namespace keeps its values. The main binary wrote them as the host's root.
/// (No mqueue mount: it would fail first, engine::ns_owner case 3.)
#[test]
fn ipc_sysctls_in_an_ipc_namespace_of_another_root_fail_in_runcs_words() {
    needs_root!();
    let env = TestEnv::new();
    let holder = IpcHolder::start();
    let before = (
        holder.sysctl("kernel/msgmax"),
        holder.sysctl("fs/mqueue/msg_max"),
    );
    for (i, (key, value, path)) in [
        ("kernel.msgmax", "12345", "kernel/msgmax"),
        ("fs.mqueue.msg_max", "77", "fs/mqueue/msg_max"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut b = env.bundle(&format!("ipc{i}"), &["cat", &format!("/proc/sys/{path}")]);
        b.annotate("io.siloc.userns", "auto");
        b.edit(|s| {
            s["linux"]["sysctl"] = json!({key: value});
            s["mounts"]
                .as_array_mut()
                .unwrap()
                .retain(|m| m["type"] != "mqueue");
            set_namespace(s, "ipc", Some(&format!("/proc/{}/ns/ipc", holder.pid())));
        });
        let id = env.id(&format!("ipcs{i}"));
        let err = env.fails(&["run", "--bundle", b.path(), &id]);
        assert!(
            err.contains(&format!(
                "unable to start container process: error during container init: open \
                 /proc/sys/{path}: permission denied"
            )),
            "{key}: {err}"
        );
        nothing_of(&env, &id);
        assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    }
    assert_eq!(
        (
            holder.sysctl("kernel/msgmax"),
            holder.sysctl("fs/mqueue/msg_max")
        ),
        before,
        "the joined IPC namespace was changed"
    );
}

/// A pod's app container joining the sandbox's user and IPC namespaces (the sandbox's
/// user namespace owns the IPC namespace): its IPC sysctls are written, as under
/// runc 1.1.5, and land in the sandbox's IPC namespace.
#[test]
fn ipc_sysctls_in_the_sandboxs_ipc_namespace_are_written() {
    needs_root!();
    let env = TestEnv::new();
    let mut sb = env.bundle("sandbox", &["sleep", "1000"]);
    sb.annotate("io.siloc.userns", "auto");
    let sid = env.id("ipcsb");
    let s = Container::start(&env, &sb, &sid);
    let spid = pid_of(&env, &sid);
    let uid = range_uid(&env, &sid);
    let mut app = env.bundle(
        "app",
        &[
            "cat",
            "/proc/sys/kernel/msgmax",
            "/proc/sys/fs/mqueue/msg_max",
        ],
    );
    app.edit(|s| {
        for t in ["user", "ipc"] {
            set_namespace(s, t, Some(&format!("/proc/{spid}/ns/{t}")));
        }
        let m = json!([{"containerID": 0, "hostID": uid, "size": 65536}]);
        s["linux"]["uidMappings"] = m.clone();
        s["linux"]["gidMappings"] = m;
        s["linux"]["sysctl"] = json!({"kernel.msgmax": "12345", "fs.mqueue.msg_max": "77"});
    });
    let aid = env.id("ipcapp");
    let (code, out, err) = common::run(&env, &app, "ipcapp");
    assert_eq!((code, out.as_str()), (0, "12345\n77\n"), "{err}");
    let (code, out, err) = s.exec(&["cat", "/proc/sys/kernel/msgmax"]);
    assert_eq!((code, out.as_str()), (0, "12345\n"), "{err}");
    drop(s);
    env.assert_no_trace(&aid);
    env.assert_no_trace(&sid);
}
