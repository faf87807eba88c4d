//! Process setup as runc does it (issue 19, item 4): HOME, `exec --process` without
//! `user`, ambient and unknown capabilities, programs with only an owner execute bit,
//! `exec` into a created container, fds, CPU affinity and `execCPUAffinity`,
//! `linux.memoryPolicy`, the scheduler, I/O priority, time offsets, and namespaces
//! joined by path. Needs root; skips loudly without it.

use crate::common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use common::{Container, TestEnv};
use serde_json::{Value, json};

/// `siloc run` in the foreground: (exit code, stdout, stderr).
use common::run;

/// Adds a user 1000 with home /home/u to the bundle's /etc/passwd.
fn add_user(b: &common::Bundle) {
    let passwd = b.dir.join("rootfs/etc/passwd");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(passwd)
        .unwrap();
    f.write_all(b"u:x:1000:1000:u:/home/u:/bin/sh\n").unwrap();
    std::fs::create_dir_all(b.dir.join("rootfs/home/u")).unwrap();
}

/// A process.json for `exec --process` in the env's directory.
fn process_file(env: &TestEnv, name: &str, p: Value) -> String {
    let path = env.dir.path().join(name);
    std::fs::write(&path, serde_json::to_vec(&p).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// runc sets HOME from the container's /etc/passwd for `exec --user`, and to `/` for
/// a uid it does not list (libcontainer 0.7 left HOME unset then).
#[test]
fn exec_user_sets_home_from_passwd_or_root_dir() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "100"]);
    add_user(&b);
    let c = Container::start(&env, &b, &env.id("home"));
    let home = |user: &str| {
        let (code, out, err) = c.exec(&["--user", user, "sh", "-c", "echo \"HOME=$HOME\""]);
        assert_eq!(code, 0, "{err}");
        out
    };
    assert_eq!(home("1000"), "HOME=/home/u\n");
    assert_eq!(home("4242"), "HOME=/\n");
    assert_eq!(home("0"), "HOME=/root\n");
}

/// HOME is looked up in the container's /etc/passwd without glibc's NSS: an image whose
/// nsswitch.conf names a module of its own (`passwd: evil files`, with
/// /lib/x86_64-linux-gnu/libnss_evil.so.2) must not get that library loaded into
/// siloc's init or exec'd process, at create or at exec (libcontainer 0.7 called
/// getpwuid_r in the container, and the library's constructor ran). runc parses the
/// file itself. Needs a C compiler for the library; skips loudly without one.
#[test]
fn home_lookup_loads_no_library_of_the_image() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "100"]);
    add_user(&b);
    let lib = b.dir.join("rootfs/lib/x86_64-linux-gnu");
    std::fs::create_dir_all(&lib).unwrap();
    let src = env.dir.path().join("evil.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n\
         __attribute__((constructor)) static void ran(void) {\n\
           FILE *f = fopen(\"/tmp/nss-module-ran\", \"w\"); if (f) fclose(f);\n\
         }\n",
    )
    .unwrap();
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(lib.join("libnss_evil.so.2"))
        .arg(&src)
        .status();
    if !cc.is_ok_and(|s| s.success()) {
        eprintln!("SKIP: no C compiler (cc) to build the NSS module");
        return;
    }
    std::fs::write(
        b.dir.join("rootfs/etc/nsswitch.conf"),
        "passwd: evil files\ngroup: evil files\n",
    )
    .unwrap();
    // No HOME in the environment: the lookup happens (a host's glibc dlopens the
    // module from the container's /lib then).
    b.edit(|s| {
        s["process"]["env"] = json!(["PATH=/bin:/usr/bin"]);
        s["process"]["user"]["uid"] = json!(1000);
        // The module's constructor writes its marker to the rootfs.
        s["root"]["readonly"] = json!(false);
    });
    let marker = b.dir.join("rootfs/tmp/nss-module-ran");
    // The module's constructor runs as the process's user: let it write the marker.
    std::fs::set_permissions(
        b.dir.join("rootfs/tmp"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    let id = env.id("nss");
    let c = Container::start(&env, &b, &id);
    let (code, out, err) = c.exec(&["sh", "-c", "tr '\\0' '\\n' </proc/1/environ | grep ^HOME="]);
    assert_eq!(
        (code, out.as_str()),
        (0, "HOME=/home/u\n"),
        "the init's HOME: {err}"
    );
    let (code, out, err) = c.exec(&["--user", "4242", "sh", "-c", "echo \"HOME=$HOME\""]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out, "HOME=/\n",
        "uid 4242 has no entry in this image's passwd"
    );
    let (code, out, _) = c.exec(&["--user", "1000", "sh", "-c", "echo \"HOME=$HOME\""]);
    assert_eq!((code, out.as_str()), (0, "HOME=/home/u\n"));
    assert!(
        !marker.exists(),
        "the image's NSS module ran in a siloc process"
    );
    drop(c);
    env.assert_no_trace(&id);
}

/// A process.json without `user` runs as uid 0, gid 0, as in runc (oci-spec requires
/// the field; libcontainer 0.7 refused the file).
#[test]
fn exec_process_without_user_runs_as_root() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "100"]);
    let c = Container::start(&env, &b, &env.id("nouser"));
    let p = process_file(
        &env,
        "p.json",
        json!({"args": ["id"], "cwd": "/", "env": ["PATH=/bin"]}),
    );
    let (code, out, err) = c.exec(&["--process", &p]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("uid=0(root) gid=0(root)"), "{out}");
}

/// Ambient capabilities from the spec reach a non-root process (CapAmb), and an
/// unknown capability is left out with runc's warning instead of failing the create;
/// `exec --cap` and `exec --process` take the same rule.
#[test]
fn ambient_caps_apply_and_unknown_caps_are_a_warning() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &["sh", "-c", "grep -E 'Cap(Amb|Eff)' /proc/self/status"],
    );
    b.edit(|s| {
        let caps = ["CAP_KILL", "CAP_NET_RAW", "CAP_FOO"];
        for set in [
            "bounding",
            "effective",
            "permitted",
            "inheritable",
            "ambient",
        ] {
            s["process"]["capabilities"][set] = json!(caps);
        }
        s["process"]["user"] = json!({"uid": 1000, "gid": 1000});
    });
    let (code, out, err) = run(&env, &b, "amb");
    assert_eq!(code, 0, "{err}");
    // CAP_KILL (5) and CAP_NET_RAW (13)
    assert_eq!(
        out,
        "CapEff:\t0000000000002020\nCapAmb:\t0000000000002020\n"
    );
    assert!(
        err.contains("ignoring unknown or unavailable capabilities: [CAP_FOO]"),
        "{err}"
    );

    let mut b = env.bundle("b2", &["sleep", "100"]);
    b.edit(|s| s["process"]["capabilities"]["bounding"] = json!(["CAP_KILL", "CAP_BAR"]));
    let c = Container::start(&env, &b, &env.id("unk"));
    let (code, _, err) = c.exec(&["--cap", "CAP_BAZ", "true"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("capabilities: [CAP_BAZ]"), "{err}");
    let p = process_file(
        &env,
        "p.json",
        json!({"args": ["true"], "cwd": "/", "env": ["PATH=/bin"],
               "capabilities": {"bounding": ["CAP_QUX"], "effective": ["CAP_QUX"]}}),
    );
    let (code, _, err) = c.exec(&["--process", &p]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("capabilities: [CAP_QUX]"), "{err}");
}

/// A program whose only execute bit is its owner's (root) runs for uid 1000 with
/// CAP_DAC_OVERRIDE, as in runc (Go's LookPath takes any execute bit, the kernel
/// decides); libcontainer 0.7 wanted the others' bit. A file with no execute bit
/// fails with runc's `permission denied`.
#[test]
fn an_owner_only_program_runs_with_dac_override() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["/owner.sh"]);
    let rootfs = b.dir.join("rootfs");
    for (name, mode) in [("owner.sh", 0o700), ("none.sh", 0o644)] {
        let p = rootfs.join(name);
        std::fs::write(&p, "#!/bin/sh\necho ran\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    b.edit(|s| {
        for set in [
            "bounding",
            "effective",
            "permitted",
            "inheritable",
            "ambient",
        ] {
            s["process"]["capabilities"][set] = json!(["CAP_DAC_OVERRIDE"]);
        }
        s["process"]["user"] = json!({"uid": 1000, "gid": 1000});
    });
    let (code, out, err) = run(&env, &b, "owner");
    assert_eq!((code, out.as_str()), (0, "ran\n"), "{err}");
    // found through PATH too
    b.edit(|s| {
        s["process"]["args"] = json!(["owner.sh"]);
        s["process"]["env"] = json!(["PATH=/bin:/"]);
    });
    let (code, out, err) = run(&env, &b, "owner-path");
    assert_eq!((code, out.as_str()), (0, "ran\n"), "{err}");
    b.edit(|s| s["process"]["args"] = json!(["/none.sh"]));
    let (code, _, err) = run(&env, &b, "none");
    assert_ne!(code, 0);
    assert!(
        err.contains("exec: \\\"/none.sh\\\": permission denied"),
        "{err}"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// runc execs into a created container (probes do); libcontainer 0.7 said
/// "incompatible container status: `Created`". The container still starts after it,
/// and no trace of the exec is left in the state root.
#[test]
fn exec_into_a_created_container() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sh", "-c", "echo started > /tmp/started; sleep 100"]);
    b.edit(|s| s["root"]["readonly"] = Value::Bool(false));
    let c = Container::create(&env, &b, &env.id("created"));
    let (code, out, err) = c.exec(&[
        "sh",
        "-c",
        "echo in-created; cat /tmp/started 2>/dev/null || echo not-yet",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "in-created\nnot-yet\n");
    assert_eq!(env.state(&c.id)["status"], "created");
    assert!(
        !env.root.join(".siloc/exec-created").exists(),
        "the exec's view of the container is left"
    );
    env.ok(&["start", &c.id]);
    assert!(c.wait_status("running", 5));
    let (code, out, _) = c.exec(&["sh", "-c", "sleep 0.2; cat /tmp/started"]);
    assert_eq!((code, out.as_str()), (0, "started\n"));
}

/// The fds of an exec'd process: stdio and `--preserve-fds` only. A `LISTEN_FDS` in
/// the caller's environment passes nothing to `exec` (runc takes socket-activation
/// fds only for create/run, and only when `LISTEN_PID` names runc itself).
#[test]
fn no_fd_leaks_into_exec_beyond_preserved_ones() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "100"]);
    let c = Container::start(&env, &b, &env.id("fds"));
    let listing = "for f in /proc/$$/fd/*; do readlink $f; done | grep -v '^/proc' | \
                   sed 's/^/fd /'; env | grep ^LISTEN || true";
    let exec = |extra: &[&str], env_vars: &[(&str, &str)]| {
        let hostname = std::fs::File::open("/etc/hostname").unwrap();
        let mut args = vec!["exec"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[c.id.as_str(), "sh", "-c", listing]);
        let mut cmd = env.cmd(&args);
        cmd.envs(env_vars.iter().copied());
        let fd = std::os::fd::AsRawFd::as_raw_fd(&hostname);
        // SAFETY: dup2 in the child before exec, async-signal-safe.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                let r = if fd == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, 3)
                };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines()
            .filter(|l| !l.starts_with("fd /dev/null") && !l.contains("pipe:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(exec(&[], &[]), Vec::<String>::new());
    assert_eq!(
        exec(&[], &[("LISTEN_FDS", "1"), ("LISTEN_PID", "1")]),
        Vec::<String>::new()
    );
    assert_eq!(
        exec(&["--preserve-fds", "1"], &[]),
        vec!["fd /etc/hostname"]
    );
}

/// An exec'd process gets every CPU of the container's cpuset, not the caller's
/// affinity (runc 1.2+; Linux 6.2 stopped resetting it on the cgroup join), and
/// `execCPUAffinity` (runtime-spec 1.2) sets it when given: `final` after the join,
/// `initial` alone also for the rest.
#[test]
fn exec_cpu_affinity_is_reset_or_as_the_spec_says() {
    needs_root!();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("SKIPPED: needs 2 CPUs, this host has {cpus}");
        return;
    }
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "100"]);
    let c = Container::start(&env, &b, &env.id("aff"));
    let allowed = |cmd: &mut std::process::Command| {
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let all = format!("Cpus_allowed_list:\t0-{}", cpus - 1);
    let grep = ["grep", "Cpus_allowed_list", "/proc/self/status"];
    let mut args = vec!["exec", c.id.as_str()];
    args.extend_from_slice(&grep);
    // the caller is pinned to CPU 0
    let mut cmd = env.cmd(&args);
    // SAFETY: sched_setaffinity in the child before exec, async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    assert_eq!(allowed(&mut cmd), all);
    let p = |aff: Value| {
        process_file(
            &env,
            "p.json",
            json!({"args": grep, "cwd": "/", "env": ["PATH=/bin"], "execCPUAffinity": aff}),
        )
    };
    let mut cmd = env.cmd(&[
        "exec",
        "--process",
        &p(json!({"initial": "0", "final": "1"})),
        &c.id,
    ]);
    assert_eq!(allowed(&mut cmd), "Cpus_allowed_list:\t1");
    let mut cmd = env.cmd(&["exec", "--process", &p(json!({"initial": "1"})), &c.id]);
    assert_eq!(allowed(&mut cmd), "Cpus_allowed_list:\t1");
}

/// `linux.memoryPolicy` applies to the init and to exec'd processes (numa_maps shows
/// the policy), and bad modes, flags and node lists fail with runc's texts, leaving
/// nothing behind.
#[test]
fn memory_policy_applies_and_bad_ones_say_what_runc_says() {
    needs_root!();
    let env = TestEnv::new();
    let show =
        "grep -o -m1 -E '^[0-9a-f]+ [a-z]+[=:]?[a-z:0-9]*' /proc/self/numa_maps | cut -d' ' -f2";
    let mut b = env.bundle("b", &["sh", "-c", &format!("{show}; sleep 100")]);
    b.edit(|s| {
        s["linux"]["memoryPolicy"] =
            json!({"mode": "MPOL_BIND", "nodes": "0", "flags": ["MPOL_F_STATIC_NODES"]})
    });
    let c = Container::start(&env, &b, &env.id("mpol"));
    let (code, out, err) = c.exec(&["sh", "-c", show]);
    assert_eq!((code, out.trim()), (0, "bind=static:0"), "{err}");
    drop(c);
    for (i, (mp, want)) in [
        (
            json!({"mode": "MPOL_FOO", "nodes": "0"}),
            "invalid memory policy mode \\\"MPOL_FOO\\\"",
        ),
        (
            json!({"mode": "MPOL_BIND", "nodes": "0", "flags": ["MPOL_F_FOO"]}),
            "invalid memory policy flag \\\"MPOL_F_FOO\\\"",
        ),
        (
            json!({"mode": "MPOL_BIND"}),
            "memory policy mode requires at least one node but got 0",
        ),
        (
            json!({"mode": "MPOL_LOCAL", "nodes": "0"}),
            "memory policy mode requires 0 nodes but got 1",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut b = env.bundle(&format!("bad{i}"), &["true"]);
        b.edit(|s| s["linux"]["memoryPolicy"] = mp.clone());
        let (code, _, err) = run(&env, &b, "badmpol");
        assert_ne!(code, 0, "{mp}");
        assert!(err.contains(want), "{mp}: {err}");
        assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    }
}

/// `process.scheduler` with the spec's `SCHED_FLAG_RESET_ON_FORK` (oci-spec 0.10
/// knew only `SCHED_RESET_ON_FORK` and refused the file), `process.ioPriority`, and
/// `linux.timeOffsets` in a time namespace.
#[test]
fn scheduler_io_priority_and_time_offsets() {
    needs_root!();
    let env = TestEnv::new();
    // nice -5 for the shell (static prio 115); reset on fork, its children get 0 (120)
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "grep ^prio /proc/$$/sched; grep ^prio /proc/self/sched; ionice -p $$",
        ],
    );
    b.edit(|s| {
        s["process"]["scheduler"] =
            json!({"policy": "SCHED_OTHER", "nice": -5, "flags": ["SCHED_FLAG_RESET_ON_FORK"]});
        s["process"]["ioPriority"] = json!({"class": "IOPRIO_CLASS_BE", "priority": 6});
    });
    let (code, out, err) = run(&env, &b, "sched");
    assert_eq!(code, 0, "{err}");
    let prios: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("prio"))
        .map(|l| l.rsplit(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(prios, ["115", "120"], "{out}");
    assert!(out.contains("best-effort: prio 6"), "{out}");

    let mut b = env.bundle("t", &["cat", "/proc/self/timens_offsets"]);
    b.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "time"}));
        s["linux"]["timeOffsets"] = json!({"monotonic": {"secs": 86400, "nanosecs": 0},
                                          "boottime": {"secs": 172800, "nanosecs": 0}});
    });
    let (code, out, err) = run(&env, &b, "time");
    assert_eq!(code, 0, "{err}");
    let offsets: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        offsets,
        [
            vec!["monotonic", "86400", "0"],
            vec!["boottime", "172800", "0"]
        ]
    );
}

/// A container joins another's network, IPC and UTS namespaces by path.
#[test]
fn namespaces_joined_by_path() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("a", &["sleep", "100"]);
    let a = Container::start(&env, &b, &env.id("nsa"));
    let pid = env.state(&a.id)["pid"].as_i64().unwrap();
    let ns = |p: &str, n: &str| std::fs::read_link(format!("/proc/{p}/ns/{n}")).unwrap();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "for n in net ipc uts; do readlink /proc/self/ns/$n; done",
        ],
    );
    b.edit(|s| {
        for n in s["linux"]["namespaces"].as_array_mut().unwrap() {
            let file = match n["type"].as_str().unwrap() {
                "network" => "net",
                t @ ("ipc" | "uts") => t,
                _ => continue,
            };
            n["path"] = Value::from(format!("/proc/{pid}/ns/{file}"));
        }
    });
    let (code, out, err) = run(&env, &b, "nsb");
    assert_eq!(code, 0, "{err}");
    let want: Vec<String> = ["net", "ipc", "uts"]
        .iter()
        .map(|n| ns(&pid.to_string(), n).display().to_string())
        .collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
}

/// Whether this process has CAP_SYS_RESOURCE (bit 24 of CapEff).
fn has_sys_resource() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|c| c & (1 << 24) != 0)
}

/// An rlimit the runtime cannot set fails `create` and `exec` with runc's text
/// (`error setting rlimit type 7: operation not permitted`) before anything starts:
/// RLIMIT_NOFILE above `fs.nr_open` (refused to everyone), and, on a host where the
/// runtime lacks CAP_SYS_RESOURCE, podman's default of 1048576 above the runtime's
/// own hard limit. Before: "intermediate process error EPERM".
#[test]
fn an_rlimit_the_runtime_cannot_set_fails_in_runcs_words() {
    needs_root!();
    let env = TestEnv::new();
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut hards = vec![nr_open + 1];
    if !has_sys_resource() {
        let mut own = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit fills one struct we own.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own) }, 0);
        hards.push(own.rlim_max + 1);
    } else {
        eprintln!("note: CAP_SYS_RESOURCE held: only the fs.nr_open case is checked");
    }
    let want = "error setting rlimits for ready process: error setting rlimit type 7: \
                operation not permitted";
    for (i, hard) in hards.iter().enumerate() {
        let rl = json!([{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": hard}]);
        let mut b = env.bundle(&format!("rl{i}"), &["true"]);
        b.edit(|s| s["process"]["rlimits"] = rl.clone());
        let id = env.id(&format!("rl{i}"));
        let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
        assert!(!ok, "{hard}");
        assert!(
            err.contains(&format!(
                "unable to start container process: error during container init: {want}"
            )),
            "{hard}: {err}"
        );
        env.assert_no_trace(&id);
        assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    }
    // exec --process with the same limit: refused, nothing started
    let b = env.bundle("ok", &["sleep", "100"]);
    let c = Container::start(&env, &b, &env.id("rlexec"));
    let p = process_file(
        &env,
        "rl.json",
        json!({"args": ["sh", "-c", "touch /tmp/ran"], "cwd": "/", "env": ["PATH=/bin"],
               "rlimits": [{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": nr_open + 1}]}),
    );
    let (code, _, err) = c.exec(&["--process", &p]);
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("unable to start container process: {want}")),
        "{err}"
    );
    let ps = env.ok(&["ps", "--format", "json", &c.id]);
    let pids: Vec<i64> = serde_json::from_str(&ps).unwrap();
    assert_eq!(pids.len(), 1, "{ps}");
}

/// process.rlimits in containers with a user namespace, new and joined by path: the
/// create succeeds exactly when the kernel lets the runtime set the limit.
/// libcontainer sets it from inside the user namespace, so siloc raises its own hard
/// limit first where it may (engine::rlimit_check::RaisedHard; a host with
/// CAP_SYS_RESOURCE is checked in integration/vm/t/10-rlimit-userns.sh). A lowered
/// limit applies; a raised one applies with CAP_SYS_RESOURCE and is refused in runc's
/// words without it, leaving nothing.
#[test]
fn rlimits_under_a_user_namespace_as_the_kernel_allows() {
    needs_root!();
    let env = TestEnv::new();
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills one struct we own.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own) }, 0);
    let nr_open: u64 = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let raised = own.rlim_max + 1;
    assert!(
        raised <= nr_open,
        "own hard limit {} at fs.nr_open",
        own.rlim_max
    );
    let mut x = env.bundle("x", &["sleep", "1000"]);
    x.annotate("io.siloc.userns", "auto");
    let xid = env.id("x");
    let c = Container::start(&env, &x, &xid);
    let xpid = env.state(&xid)["pid"].as_i64().unwrap();
    let range = env.state(&xid)["annotations"]["io.siloc.userns.range"]
        .as_str()
        .unwrap()
        .to_string();
    let xuid: u64 = range
        .split(',')
        .find_map(|kv| kv.strip_prefix("uid="))
        .unwrap()
        .parse()
        .unwrap();
    for joined in [false, true] {
        for hard in [512, raised] {
            let name = format!("{}{hard}", if joined { "j" } else { "n" });
            let mut b = env.bundle(&name, &["sh", "-c", "ulimit -Hn"]);
            b.edit(|s| {
                s["process"]["rlimits"] =
                    json!([{"type": "RLIMIT_NOFILE", "soft": 256, "hard": hard}]);
                if joined {
                    let ns = s["linux"]["namespaces"].as_array_mut().unwrap();
                    ns.retain(|n| n["type"] != "user");
                    ns.push(json!({"type": "user", "path": format!("/proc/{xpid}/ns/user")}));
                    let m = json!([{"containerID": 0, "hostID": xuid, "size": 65536}]);
                    s["linux"]["uidMappings"] = m.clone();
                    s["linux"]["gidMappings"] = m;
                }
            });
            if !joined {
                b.annotate("io.siloc.userns", "auto");
            }
            let id = env.id(&name);
            let o = env.siloc(&["run", "--bundle", b.path(), &id]);
            let (out, err) = (
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr),
            );
            if hard == 512 || has_sys_resource() {
                assert!(o.status.success(), "{name}: {err}");
                assert_eq!(out.trim(), hard.to_string(), "{name}: {err}");
            } else {
                assert!(!o.status.success(), "{name}: {out}");
                assert!(
                    err.contains(
                        "unable to start container process: error during container init: error \
                         setting rlimits for ready process: error setting rlimit type 7: \
                         operation not permitted"
                    ),
                    "{name}: {err}"
                );
            }
            // X still runs: nothing of this one is left.
            let left: Vec<String> = env
                .leftovers()
                .into_iter()
                .filter(|l| l.contains(&id))
                .collect();
            assert!(left.is_empty(), "{name}: {left:?}");
            assert!(common::traces_of(&id).is_empty(), "{name}");
        }
    }
    drop(c);
    env.assert_no_trace(&xid);
}
