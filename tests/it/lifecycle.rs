//! The runc lifecycle with real containers: create, start, state, exec, kill, pause,
//! resume, delete, run. Needs root; skips loudly without it.

use crate::common;

use std::process::Command;

use common::{Container, TestEnv};

#[test]
fn run_returns_output_and_exit_code() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sh", "-c", "echo hello; exit 3"]);
    let o = env.siloc(&["run", "--bundle", b.path(), &env.id("r1")]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\n");
    assert_eq!(o.status.code(), Some(3));
    // run without --keep deletes the container
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn create_start_state_kill_delete() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("c1");
    let c = Container::create(&env, &b, &id);
    let s = env.state(&id);
    assert_eq!(s["status"], "created");
    assert_eq!(s["bundle"], b.path());
    assert!(s["pid"].as_i64().unwrap() > 0);
    for key in ["ociVersion", "id", "rootfs", "created", "owner"] {
        assert!(s.get(key).is_some(), "state lacks {key}: {s}");
    }
    env.ok(&["start", &id]);
    assert_eq!(env.state(&id)["status"], "running");
    let (code, out, _) = c.exec(&["sh", "-c", "echo in; exit 4"]);
    assert_eq!((code, out.as_str()), (4, "in\n"));
    env.ok(&["pause", &id]);
    assert_eq!(env.state(&id)["status"], "paused");
    env.ok(&["resume", &id]);
    let err = env.fails(&["delete", &id]);
    assert!(err.contains("not stopped"), "{err}");
    env.ok(&["kill", &id, "KILL"]);
    assert!(c.wait_status("stopped", 5));
    env.ok(&["delete", &id]);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn unknown_container_and_bad_signal() {
    needs_root!();
    let env = TestEnv::new();
    for args in [
        &["state", "nope"][..],
        &["start", "nope"],
        &["kill", "nope", "KILL"],
        &["delete", "nope"],
        &["exec", "nope", "true"],
    ] {
        let err = env.fails(args);
        assert!(err.contains("container does not exist"), "{args:?}: {err}");
    }
    // runc: `delete --force` of an unknown id succeeds and prints nothing (podman
    // calls it after a failed create).
    let o = env.siloc(&["delete", "--force", "nope"]);
    assert!(o.status.success(), "{o:?}");
    assert!(o.stdout.is_empty() && o.stderr.is_empty(), "{o:?}");
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("c1");
    let _c = Container::start(&env, &b, &id);
    let err = env.fails(&["kill", &id, "SIGNOPE"]);
    assert!(err.contains("unknown signal"), "{err}");
    assert_eq!(env.state(&id)["status"], "running");
}

/// libcontainer re-opens a /dev/null stdio read-only; siloc keeps writes working.
#[test]
fn stdout_on_dev_null_stays_writable() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sh", "-c", "echo x && echo stdout-ok >&2"]);
    let err = tempfile::NamedTempFile::new().unwrap();
    let st = env
        .cmd(&["run", "--bundle", b.path(), &env.id("null")])
        .stdout(std::process::Stdio::null())
        .stderr(err.reopen().unwrap())
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(err.path()).unwrap();
    assert!(
        text.contains("stdout-ok"),
        "writing to a /dev/null stdout failed: {text}"
    );
    // and stderr on /dev/null: the process must still exit 0 after writing to it
    let b2 = env.bundle("b2", &["sh", "-c", "echo y >&2 || exit 9"]);
    let st = env
        .cmd(&["run", "--bundle", b2.path(), &env.id("null2")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
}

/// A command that cannot be executed fails in runc's words, which podman maps to its
/// exit codes (127 not found, 126 permission denied); `exec` errors exit 255 as runc's.
#[test]
fn unexecutable_commands_fail_in_runc_words() {
    needs_root!();
    let env = TestEnv::new();
    for (i, (args, want)) in [
        (
            &["/no/such"][..],
            r#"exec: "/no/such": stat /no/such: no such file or directory"#,
        ),
        (
            &["nope"],
            r#"exec: "nope": executable file not found in $PATH"#,
        ),
        (
            &["/etc/passwd"],
            r#"exec: "/etc/passwd": permission denied"#,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let b = env.bundle(&format!("b{i}"), args);
        let id = env.id(&format!("bad-cmd{i}"));
        let (ok, _, err) = env.detached(&["run", "--bundle", b.path(), &id]);
        assert!(!ok, "{args:?}");
        let err = err.replace("\\\"", "\""); // the text log line quotes the message
        assert!(
            err.contains(&format!("unable to start container process: {want}")),
            "{args:?}: {err}"
        );
        assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    }
    let b = env.bundle("sleeper", &["sleep", "1000"]);
    let c = Container::start(&env, &b, &env.id("c1"));
    let (code, _, err) = c.exec(&["/etc/passwd"]);
    assert_eq!(code, 255, "{err}");
    let err = err.replace("\\\"", "\"");
    assert!(
        err.contains(r#"exec failed: unable to start container process: exec: "/etc/passwd": permission denied"#),
        "{err}"
    );
    // /proc/self is the exec'd process's own dir, whatever it looks like from outside.
    let o = env.siloc(&["exec", "--cwd", "/proc/self", &c.id, "pwd"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.starts_with("/proc/"),
        "{out} {o:?}"
    );
    // Another failure with that cwd is not blamed on the cwd.
    let o = env.siloc(&["exec", "--cwd", "/proc/self", &c.id, "/nonexistent-binary"]);
    let err = String::from_utf8_lossy(&o.stderr).replace("\\\"", "\"");
    assert!(err.contains(r#"exec: "/nonexistent-binary""#), "{err}");
    let o = env.siloc(&["exec", "--cwd", "/nonexistent", &c.id, "true"]);
    let err = String::from_utf8_lossy(&o.stderr).replace("\\\"", "\"");
    assert_eq!(o.status.code(), Some(255), "{err}");
    assert!(
        err.contains(r#"exec failed: unable to start container process: chdir to cwd ("/nonexistent") set in config.json failed: no such file or directory"#),
        "{err}"
    );
    let (code, _, err) = c.exec(&["sh", "-c", "exit 7"]);
    assert_eq!(code, 7, "the process's own status passes unchanged: {err}");
    let o = env.siloc(&["exec", "nope", "true"]);
    assert_eq!(o.status.code(), Some(255));
}

/// `delete --force` of a running container leaves none of its processes: with its own
/// PID namespace (siloc kills the init, the kernel the rest) and in the host's (siloc
/// kills every process of the cgroup).
#[test]
fn forced_delete_kills_every_process_with_or_without_a_pid_namespace() {
    needs_root!();
    let env = TestEnv::new();
    for (name, own_pidns) in [("ownns", true), ("hostns", false)] {
        // Two background shells whose command lines carry the id, so traces_of
        // finds them (a shell stays while its non-final sleep runs).
        let id = env.id(name);
        let script = format!("sh -c 'sleep 1001; : {id}' & sh -c 'sleep 1002; : {id}' & wait");
        let mut b = env.bundle(name, &["sh", "-c", &script]);
        if !own_pidns {
            b.edit(|s| {
                let ns = s["linux"]["namespaces"].as_array_mut().expect("namespaces");
                ns.retain(|n| n["type"] != "pid");
            });
        }
        let c = Container::create(&env, &b, &id);
        env.ok(&["start", &id]);
        // Both inner shells are up: poll their command lines. A forked child shows its
        // parent's until it execs, so count distinct command lines, not processes.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let shells_of = |r: &[String]| {
            r.iter()
                .filter_map(|t| t.split_once(": sh -c sleep").map(|(_, cmd)| cmd))
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        let mut running = common::traces_of(&id);
        while shells_of(&running) < 2 && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(20));
            running = common::traces_of(&id);
        }
        let shells = shells_of(&running);
        assert_eq!(shells, 2, "{name}: {running:?}");
        env.ok(&["delete", "--force", &id]);
        drop(c);
        assert!(
            common::traces_of(&id).is_empty(),
            "{name}: {:?}",
            common::traces_of(&id)
        );
        assert!(env.leftovers().is_empty(), "{name}: {:?}", env.leftovers());
    }
}

/// `delete --force` of a paused container: a frozen init dies only once thawed, so a
/// plain SIGKILL would leave delete waiting out its drain timeout (10 s).
#[test]
fn forced_delete_of_a_paused_container_is_prompt() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("paused");
    let c = Container::create(&env, &b, &id);
    env.ok(&["start", &id]);
    env.ok(&["pause", &id]);
    assert_eq!(env.state(&id)["status"], "paused");
    let start = std::time::Instant::now();
    env.ok(&["delete", "--force", &id]);
    let took = start.elapsed();
    drop(c);
    assert!(
        took < std::time::Duration::from_secs(5),
        "delete --force took {took:?}"
    );
    env.assert_no_trace(&id);
}

#[test]
fn a_relative_root_is_the_same_state_dir_as_its_absolute_path() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    // A per-container user namespace: create then changes directories the most.
    b.annotate("io.siloc.userns", "auto").write();
    let id = env.id("rel");
    // runc makes --root absolute first; a relative one used to fail create with
    // "No such file or directory" and leave a half-made record behind.
    let rel = env.root.file_name().unwrap();
    // create's container keeps its stdio: a pipe would never close, so stderr goes to
    // a file.
    let run = |args: &[&str]| {
        let err = tempfile::NamedTempFile::new().expect("temp file");
        let status = std::process::Command::new(common::siloc_bin())
            .current_dir(env.dir.path())
            .arg("--root")
            .arg(rel)
            .arg("--config")
            .arg(&env.config)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(err.reopen().expect("reopen"))
            .status()
            .expect("run siloc");
        (
            status,
            std::fs::read_to_string(err.path()).unwrap_or_default(),
        )
    };
    let (status, err) = run(&["create", "--bundle", b.path(), &id]);
    let _c = Container {
        env: &env,
        id: id.clone(),
    };
    assert!(status.success(), "{err}");
    assert_eq!(env.state(&id)["status"], "created");
    let (status, err) = run(&["delete", "--force", &id]);
    assert!(status.success(), "{err}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A bundle reached through a symlink, with the usual relative root.path, runs: runc
/// resolves the bundle before it checks that root.path has no symlink on the way
/// (runc_texts::bad_cgroup_resources_and_rootfs_in_runc_words refuses a symlinked
/// root.path itself).
#[test]
fn a_bundle_reached_through_a_symlink_runs() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("real", &["sh", "-c", "echo linked"]);
    let link = env.dir.path().join("bundle-link");
    std::os::unix::fs::symlink(b.path(), &link).unwrap();
    let o = env.siloc(&["run", "--bundle", link.to_str().unwrap(), &env.id("linked")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "linked\n");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// runc cleans command-line paths lexically (Go's filepath.Abs), so a `..` may pass
/// through a directory that does not exist: the pid file lands where the clean path
/// says, for create and for exec.
#[test]
fn a_pid_file_path_is_cleaned_like_runcs() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("pidclean");
    let dir = env.dir.path().display().to_string();
    let pid_file = format!("{dir}/missing/../init.pid");
    let (ok, _, err) =
        env.detached(&["create", "--pid-file", &pid_file, "--bundle", b.path(), &id]);
    let c = Container {
        env: &env,
        id: id.clone(),
    };
    assert!(ok, "{err}");
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    let written = std::fs::read_to_string(env.dir.path().join("init.pid")).unwrap();
    assert_eq!(written.trim(), pid.to_string());
    env.ok(&["start", &id]);
    let exec_pid = format!("{dir}/missing/../exec.pid");
    // Not detached, so the output pipe closes when the process ends.
    env.ok(&["exec", "--pid-file", &exec_pid, &id, "true"]);
    assert!(env.dir.path().join("exec.pid").is_file());
    assert!(!env.dir.path().join("missing").exists());
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// The strace log (`-f -qq -e trace=TRACE`) of `siloc ARGS` in `env`, after the
/// command succeeded; None (and a SKIPPED line) without strace.
fn straced(env: &TestEnv, trace: &str, args: &[&str]) -> Option<String> {
    if Command::new("strace").arg("-V").output().is_err() {
        eprintln!("SKIPPED lifecycle: needs strace");
        return None;
    }
    let log = env.dir.path().join("siloc.strace");
    let st = Command::new("strace")
        .args(["-f", "-qq", "-e", trace, "-o"])
        .arg(&log)
        .arg(common::siloc_bin())
        .arg("--root")
        .arg(&env.root)
        .arg("--config")
        .arg(&env.config)
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "siloc {args:?} under strace");
    Some(std::fs::read_to_string(&log).unwrap())
}

/// Opens of /proc/self/mountinfo (any fd path form) in an strace log.
fn mountinfo_opens(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("open") && l.contains("mountinfo"))
        .count()
}

#[test]
fn delete_of_a_stopped_container_reads_the_mount_table_at_most_once() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["true"]);
    let id = env.id("stopped");
    let _c = Container::create(&env, &b, &id);
    env.ok(&["start", &id]);
    assert!(_c.wait_status("stopped", 5));
    let Some(trace) = straced(&env, "trace=openat,openat2,open", &["delete", &id]) else {
        return;
    };
    // libcontainer's v1 cgroup manager read it once per controller (12).
    assert!(mountinfo_opens(&trace) <= 1, "{}", mountinfo_opens(&trace));
    env.assert_no_trace(&id);
}

#[test]
fn foreground_run_without_terminal_reads_config_json_twice() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["true"]);
    let id = env.id("onespec");
    let run = ["run", "--bundle", b.path(), &id];
    let Some(trace) = straced(&env, "trace=openat,openat2,open", &run) else {
        return;
    };
    let config = format!("{}/config.json", b.path());
    let opens: Vec<&str> = trace.lines().filter(|l| l.contains(&config)).collect();
    // `process.terminal` alone, then create's full load; the console fix's load (a
    // third, full one) only when siloc relays a terminal.
    assert_eq!(opens.len(), 2, "{opens:#?}");
    env.assert_no_trace(&id);
}

/// The processes the first process of an strace log forked (clone/clone3 without
/// CLONE_THREAD); the log is `strace -f` output, each line led by its pid.
fn forks_of_first_process(log: &str) -> usize {
    let Some(first) = log.split_whitespace().next() else {
        return 0;
    };
    log.lines()
        .filter(|l| l.split_whitespace().next() == Some(first))
        .filter(|l| l.contains("clone(") || l.contains("clone3("))
        .filter(|l| !l.contains("CLONE_THREAD"))
        .count()
}

#[test]
fn run_forks_one_helper_for_all_post_build_fixups() {
    needs_root!();
    let env = TestEnv::new();
    // `siloc spec`'s bundle: masked paths (mount_compat) and a read-only cgroup mount
    // (mount_fixups on cgroup v1, propagation-free elsewhere).
    let b = env.bundle("b", &["true"]);
    let id = env.id("onehelper");
    // A foreground `run` of `true`: every traced process ends (after a `create`, the
    // waiting init would keep strace -f running).
    let run = ["run", "--bundle", b.path(), &id];
    let Some(trace) = straced(&env, "trace=clone,clone3,fork,vfork", &run) else {
        return;
    };
    // libcontainer's intermediate and one post-build helper (the relay's thread not
    // counted); the masking and the per-mount options forked one helper each (3).
    assert_eq!(forks_of_first_process(&trace), 2, "{trace}");
    env.assert_no_trace(&id);
}

#[test]
fn a_created_containers_init_carries_silocs_name() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["true"]);
    let id = env.id("named");
    let c = Container::create(&env, &b, &id);
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "siloc:[2:INIT]");
    drop(c);
}
/// runc's answers: `kill ID 0` checks the container, `exec` into a paused container
/// is refused in runc's words, `update` takes -1 (unlimited) values, `kill` of a
/// stopped container says it is not running.
#[test]
fn kill_zero_paused_exec_and_negative_update_as_runc() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("cli");
    let c = Container::start(&env, &b, &id);
    env.ok(&["kill", &id, "0"]);
    env.ok(&["pause", &id]);
    let (code, _, err) = c.exec(&["true"]);
    assert_eq!(code, 255);
    assert!(
        err.contains(
            "exec failed: cannot exec in a paused container (use --ignore-paused to override)"
        ),
        "{err}"
    );
    env.ok(&["resume", &id]);
    env.ok(&["update", "--memory", "100M", &id]);
    env.ok(&[
        "update",
        "--memory",
        "-1",
        "--memory-swap",
        "-1",
        "--pids-limit",
        "-1",
        &id,
    ]);
    env.ok(&["kill", &id, "KILL"]);
    assert!(c.wait_status("stopped", 5));
    for sig in ["0", "TERM"] {
        let err = env.fails(&["kill", &id, sig]);
        assert!(err.contains("container not running"), "{sig}: {err}");
    }
}

/// `siloc -v`: runc's first lines, `<name> version X.Y.Z` then `spec: V`.
#[test]
fn version_prints_runcs_lines() {
    let o = std::process::Command::new(common::siloc_bin())
        .arg("-v")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(format!("siloc version {}", env!("CARGO_PKG_VERSION")).as_str())
    );
    assert!(
        lines.next().is_some_and(|l| l.starts_with("spec: 1.")),
        "{out}"
    );
}

/// A spec without a mount namespace (issue 15): libcontainer sets up the rootfs in the
/// namespace the container runs in, and siloc's read-only cgroup fix-up once
/// remounted the caller's v1 hierarchies read-only there (every later create failed
/// with EROFS), made `/` rslave and left /proc, /dev, /sys and cgroup binds mounted
/// under the rootfs. All of it runs here inside `unshare -m --propagation private`
/// with `/` made rshared first, so a regression changes only that copy, and the
/// mountinfo of that copy is what is checked. The container itself must see its
/// cgroup binds read-only, as the spec asks.
#[test]
fn a_container_without_a_mount_namespace_leaves_the_callers_mounts_alone() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("nomntns");
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "grep ' - cgroup ' /proc/self/mountinfo | cut -d' ' -f5,6",
        ],
    );
    b.edit(|s| {
        let ns = s["linux"]["namespaces"].as_array_mut().unwrap();
        ns.retain(|n| n["type"] != "mount");
        s["linux"]["maskedPaths"] = serde_json::json!([]);
        s["linux"]["readonlyPaths"] = serde_json::json!([]);
    });
    let siloc = |args: &str| {
        format!(
            "{} --root {} --config {} {args}",
            common::siloc_bin().display(),
            env.root.display(),
            env.config.display()
        )
    };
    let script = format!(
        "mount --make-rshared / || exit 90\n\
         {run}\n\
         echo \"run=$?\"\n\
         {del}\n\
         echo \"delete=$?\"\n\
         grep ' - cgroup ' /proc/self/mountinfo | sed 's/^/after: /'\n\
         grep -E '^[0-9]+ [0-9]+ [^ ]+ / / ' /proc/self/mountinfo | sed 's/^/root: /'\n\
         grep -F ' {dir}' /proc/self/mountinfo | sed 's/^/leaked: /'\n",
        run = siloc(&format!("run --bundle {} {id}", b.path())),
        del = siloc(&format!("delete --force {id}")),
        dir = env.dir.path().display(),
    );
    let o = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("unshare");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("run=0"), "run failed: {out}{err}");
    assert!(out.contains("delete=0"), "delete -f failed: {out}{err}");
    // The caller's hierarchies: none turned read-only.
    let dir = env.dir.path().display().to_string();
    let after: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("after: ") && !l.contains(&dir))
        .collect();
    assert!(!after.is_empty(), "{out}");
    for l in &after {
        let opts = l.split(' ').nth(6).unwrap_or("");
        assert!(
            opts.split(',').any(|o| o == "rw"),
            "the caller's cgroup mount became read-only: {l}\n{out}"
        );
    }
    // `/` keeps its shared propagation: libcontainer's rslave stayed in siloc's copy.
    let root = out.lines().find(|l| l.starts_with("root: ")).unwrap_or("");
    assert!(
        root.contains(" shared:"),
        "/ lost its propagation: {root}\n{out}"
    );
    // Nothing stays mounted under the bundle.
    assert!(!out.contains("leaked: "), "{out}");
    // The container saw its own cgroup binds read-only (v1 host: one per hierarchy).
    let seen: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("/sys/fs/cgroup/"))
        .collect();
    assert!(
        !seen.is_empty(),
        "the container listed no cgroup mount: {out}"
    );
    for l in &seen {
        assert!(l.ends_with(" ro") || l.contains(" ro,"), "{l}\n{out}");
    }
    env.assert_no_trace(&id);
}

/// The processes of container `id`'s cgroup (v1 `pids` hierarchy, or v2), by pid.
fn cgroup_procs(id: &str) -> Vec<String> {
    let cg = format!("siloc-{id}");
    let p = [
        format!("/sys/fs/cgroup/pids/{cg}/cgroup.procs"),
        format!("/sys/fs/cgroup/{cg}/cgroup.procs"),
    ];
    p.iter()
        .find_map(|f| std::fs::read_to_string(f).ok())
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `kill ID KILL` of a container in the host's PID namespace kills every process of
/// its cgroup, as runc does: no namespace teardown would kill the init's children.
#[test]
fn kill_of_a_host_pid_namespace_container_kills_its_whole_cgroup() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("hostkill");
    let mut b = env.bundle("b", &["sh", "-c", "sleep 1001 & sleep 1002 & wait"]);
    b.edit(|s| {
        let ns = s["linux"]["namespaces"].as_array_mut().expect("namespaces");
        ns.retain(|n| n["type"] != "pid");
    });
    let c = Container::start(&env, &b, &id);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while cgroup_procs(&id).len() < 3 && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before = cgroup_procs(&id);
    assert_eq!(before.len(), 3, "{before:?}");
    env.ok(&["kill", &id, "KILL"]);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !cgroup_procs(&id).is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        cgroup_procs(&id),
        Vec::<String>::new(),
        "before: {before:?}"
    );
    drop(c);
}

/// `update --cpu-burst` (runc's flag) reaches the cgroup: cpu.cfs_burst_us on v1,
/// cpu.max.burst on v2.
#[test]
fn update_sets_the_cpu_burst() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("burst");
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.edit(|s| {
        s["linux"]["resources"]["cpu"] = serde_json::json!({"quota": 50000, "period": 100000})
    });
    let _c = Container::start(&env, &b, &id);
    env.ok(&["update", "--cpu-burst", "20000", &id]);
    let cg = format!("siloc-{id}");
    let got = std::fs::read_to_string(format!("/sys/fs/cgroup/cpu/{cg}/cpu.cfs_burst_us"))
        .or_else(|_| std::fs::read_to_string(format!("/sys/fs/cgroup/{cg}/cpu.max.burst")))
        .unwrap_or_default();
    assert_eq!(got.trim(), "20000");
}

/// `delete --force` on cgroup v1 removes the sub-cgroups below the container's own
/// (libcgroups' one rmdir per hierarchy fails on them) and kills what runs there;
/// nothing beside or above the container's cgroup is touched.
#[test]
fn forced_delete_removes_sub_cgroups_on_v1() {
    needs_root!();
    if !std::path::Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists() {
        eprintln!("SKIPPED: no cgroup v1 pids hierarchy");
        return;
    }
    let env = TestEnv::new();
    let id = env.id("subcg");
    let b = env.bundle("b", &["sleep", "1000"]);
    let c = Container::start(&env, &b, &id);
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    let top = std::path::PathBuf::from(format!("/sys/fs/cgroup/pids/siloc-{id}"));
    let inner = top.join("sub/inner");
    std::fs::create_dir_all(&inner).unwrap();
    // if delete fails: what the test made goes (the init killed first)
    struct Made(std::path::PathBuf);
    impl Drop for Made {
        fn drop(&mut self) {
            let procs = std::fs::read_to_string(self.0.join("sub/inner/cgroup.procs"));
            for p in procs.unwrap_or_default().lines() {
                if let Ok(p) = p.trim().parse() {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(p),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            for d in [self.0.join("sub/inner"), self.0.join("sub"), self.0.clone()] {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
    let _made = Made(top.clone());
    // the init moves down: the container's own cgroup.procs is then empty
    std::fs::write(inner.join("cgroup.procs"), pid.to_string()).unwrap();
    env.ok(&["delete", "--force", &id]);
    drop(c);
    assert!(!top.exists(), "{}", top.display());
    assert!(
        common::traces_of(&id).is_empty(),
        "{:?}",
        common::traces_of(&id)
    );
}

/// The pid a pidfd received on a `--pidfd-socket` listener refers to
/// (/proc/self/fdinfo's `Pid:` line).
fn receive_pidfd(l: &std::os::unix::net::UnixListener) -> i64 {
    use std::os::fd::AsRawFd;
    let fd = common::accept_fd(l, "pidfd socket");
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("not a pidfd: {info}"))
}

/// `--pidfd-socket` (runc 1.2) on `create` and `exec`: the socket receives a pidfd of
/// the init, then of the exec'd process; a socket nobody listens on fails `create`
/// and leaves nothing.
#[test]
fn pidfd_socket_receives_the_processes_pidfds() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let sock = env.dir.path().join("pidfd.sock");
    let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let s = sock.to_str().unwrap();
    let id = env.id("pidfd");
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), "--pidfd-socket", s, &id]);
    assert!(ok, "{err}");
    let c = Container {
        env: &env,
        id: id.clone(),
    };
    assert_eq!(receive_pidfd(&l), env.state(&id)["pid"].as_i64().unwrap());
    env.ok(&["start", &id]);
    let (ok, _, err) = env.detached(&["exec", "-d", "--pidfd-socket", s, &id, "sleep", "1001"]);
    assert!(ok, "{err}");
    let pid = receive_pidfd(&l);
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert_eq!(String::from_utf8_lossy(&cmd), "sleep\x001001\x00");
    drop(c);
    let gone = env.dir.path().join("nobody.sock");
    let id2 = env.id("pidfd2");
    let (ok, _, err) = env.detached(&[
        "create",
        "--bundle",
        b.path(),
        "--pidfd-socket",
        gone.to_str().unwrap(),
        &id2,
    ]);
    assert!(!ok);
    assert!(err.contains("--pidfd-socket"), "{err}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A test's cgroup `/<name>` (its `ctr` and `inner` children too), thawed and removed
/// from every hierarchy when dropped.
struct TestCgroup(String);

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let f = format!("/sys/fs/cgroup/freezer/{}", self.0);
        let _ = std::fs::write(format!("{f}/freezer.state"), "THAWED");
        for h in hierarchy_roots() {
            let d = h.join(&self.0);
            let _ = std::fs::remove_dir(d.join("ctr"));
            let _ = std::fs::remove_dir(d.join("inner"));
            let _ = std::fs::remove_dir(&d);
        }
    }
}

/// `delete` of a stopped container that shared a PID namespace kills what is left of
/// its own, as runc 1.1.5 does (the pids its v1 devices cgroup lists), and leaves
/// alive a process somebody put into its cgroupsPath in one hierarchy only:
/// libcontainer's delete SIGKILLed every pid of every hierarchy's dir.
#[test]
fn delete_of_a_shared_pid_namespace_container_kills_only_its_own() {
    needs_root!();
    if !std::path::Path::new("/sys/fs/cgroup/devices/cgroup.procs").exists()
        || !std::path::Path::new("/sys/fs/cgroup/pids/cgroup.procs").exists()
    {
        eprintln!("SKIPPED: no cgroup v1 devices and pids hierarchies");
        return;
    }
    let env = TestEnv::new();
    let id = env.id("sharedpid");
    let name = format!("siloc-test-{id}");
    let _cgroups = TestCgroup(name.clone());
    // The init leaves a child behind: with the host's PID namespace it outlives it.
    let mut b = env.bundle("b", &["sh", "-c", "sleep 1001 & echo started"]);
    b.edit(|s| {
        s["linux"]["cgroupsPath"] = serde_json::json!(format!("/{name}"));
        let ns = s["linux"]["namespaces"].as_array_mut().expect("namespaces");
        ns.retain(|n| n["type"] != "pid");
    });
    let c = Container::start(&env, &b, &id);
    assert!(c.wait_status("stopped", 10));
    let procs = |h: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{h}/{name}/cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse::<i32>().ok())
            .collect::<Vec<_>>()
    };
    let own = procs("devices");
    assert_eq!(own.len(), 1, "the container's sleep: {own:?}");
    let foreign = crate::cgroup_compat::Reaped(
        std::process::Command::new("sleep")
            .arg("1002")
            .spawn()
            .unwrap(),
    );
    let fpid = foreign.0.id() as i32;
    std::fs::write(
        format!("/sys/fs/cgroup/pids/{name}/cgroup.procs"),
        fpid.to_string(),
    )
    .unwrap();
    let o = env.siloc(&["delete", &id]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("are not the container's"), "{err}");
    // A zombie counts as dead: the reparented sleep is reaped by whoever adopted it.
    let alive = |p: i32| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            .is_ok_and(|s| s.rsplit(") ").next().is_some_and(|r| !r.starts_with('Z')))
    };
    assert!(alive(fpid), "the foreign process {fpid} was killed: {err}");
    assert!(!alive(own[0]), "the container's own {} survived", own[0]);
    assert!(!env.ok(&["list", "-q"]).contains(&id));
    drop(foreign);
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// `create` into a frozen cgroup (v1 freezer) fails at once, naming it, instead of
/// hanging with the init stopped in it; nothing is left behind.
#[test]
fn create_in_a_frozen_cgroup_fails_instead_of_hanging() {
    needs_root!();
    if !std::path::Path::new("/sys/fs/cgroup/freezer/cgroup.procs").exists() {
        eprintln!("SKIPPED: no cgroup v1 freezer hierarchy");
        return;
    }
    let env = TestEnv::new();
    let id = env.id("frozen");
    let name = format!("siloc-test-{id}");
    let guard = TestCgroup(name.clone());
    let dir = format!("/sys/fs/cgroup/freezer/{name}");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(format!("{dir}/freezer.state"), "FROZEN").unwrap();
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| s["linux"]["cgroupsPath"] = serde_json::json!(format!("/{name}/ctr")));
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut child = env
        .cmd(&["create", "--bundle", b.path(), &id])
        .stdout(std::process::Stdio::null())
        .stderr(out.reopen().unwrap())
        .spawn()
        .unwrap();
    let status = common::wait_within(&mut child, 20);
    if status.is_none() {
        // thaw: the hung create goes on and ends; delete its container, then the
        // cgroups libcontainer made
        let _ = std::fs::write(format!("{dir}/freezer.state"), "THAWED");
        let _ = child.wait();
        let _ = env.siloc(&["delete", "--force", &id]);
        drop(guard);
        panic!("create hung in a frozen cgroup");
    }
    let err = std::fs::read_to_string(out.path()).unwrap();
    assert!(!status.unwrap().success());
    assert!(err.contains(&format!("cgroup {dir} is frozen")), "{err}");
    // runc 1.1.5's words (it says them for a frozen cgroup itself)
    assert!(
        err.contains("container's cgroup unexpectedly frozen"),
        "{err}"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    drop(guard);
}

/// `events` on a container that ends returns (exit 0) once it has stopped, instead of
/// printing stats forever (runc 1.1.5 goes on until it is killed); `list` on a root
/// that does not exist prints runc's header only (exit 0) and makes no directory.
#[test]
fn events_end_with_the_container_and_list_takes_a_missing_root() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1"]);
    let id = env.id("events");
    let _c = Container::start(&env, &b, &id);
    let mut child = env
        .cmd(&["events", "--interval", "200ms", &id])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = common::wait_within(&mut child, 15);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let status = status.expect("events still running 14 s after the container stopped");
    assert!(status.success());
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(
        out.lines().count() >= 1 && out.contains(r#""type":"stats""#),
        "{out}"
    );

    let missing = env.dir.path().join("no-such-root");
    let o = Command::new(common::siloc_bin())
        .arg("--root")
        .arg(&missing)
        .arg("--config")
        .arg(&env.config)
        .arg("list")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"]
    );
    assert!(!missing.exists());
}

/// `kill ID KILL` and `delete ID` right after it, as scripts and podman do: the
/// kill returns before the kernel has torn the init down (its overlay rootfs
/// unmounts, which syncs), and delete found it still running: "cannot delete
/// container ... that is not stopped: running", every time with a layered rootfs.
#[test]
fn delete_right_after_kill_waits_for_the_dying_init() {
    needs_root!();
    let env = TestEnv::new();
    let layer = env.dir.path().join("layer");
    common::make_busybox_rootfs(&layer);
    for i in 0..5 {
        let mut b = common::Bundle::with_rootfs(
            &env.dir.path().join(format!("b{i}")),
            &[
                "sh",
                "-c",
                "dd if=/dev/zero of=/f bs=1M count=16 2>/dev/null; sleep 1000",
            ],
        );
        b.annotate("io.siloc.userns", "auto");
        b.annotate(
            "io.siloc.rootfs.layers",
            &serde_json::json!([layer]).to_string(),
        );
        let id = env.id(&format!("kd{i}"));
        let c = Container::start(&env, &b, &id);
        std::thread::sleep(std::time::Duration::from_millis(300));
        env.ok(&["kill", &id, "KILL"]);
        env.ok(&["delete", &id]);
        drop(c);
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// Bundles `a`, running `true` at the test's cgroup `/siloc-test-<outer>`, and `b`,
/// running `inner_args` at `/siloc-test-<outer>/inner`; the guard removes both cgroups.
fn nested_bundles(
    env: &TestEnv,
    outer: &str,
    inner_args: &[&str],
) -> (TestCgroup, common::Bundle, common::Bundle) {
    let name = format!("siloc-test-{outer}");
    let mut a = env.bundle("a", &["true"]);
    a.edit(|s| s["linux"]["cgroupsPath"] = serde_json::json!(format!("/{name}")));
    let mut b = env.bundle("b", inner_args);
    b.edit(|s| s["linux"]["cgroupsPath"] = serde_json::json!(format!("/{name}/inner")));
    (TestCgroup(name), a, b)
}

/// `delete` of a stopped container with its own PID namespace leaves alive what its
/// cgroup still holds: another container's processes, whose cgroupsPath is below it.
/// runc 1.1.5 kills a cgroup's processes only for a container that shares a PID
/// namespace; libcontainer's delete killed them (v1 sub-cgroups, v2 cgroup.kill).
#[test]
fn delete_leaves_a_container_in_a_cgroup_below_alive() {
    needs_root!();
    let env = TestEnv::new();
    let outer = env.id("outer");
    let (_cgroups, a, b) = nested_bundles(&env, &outer, &["sleep", "1000"]);
    let ca = Container::start(&env, &a, &outer);
    assert!(ca.wait_status("stopped", 10));
    let inner = env.id("inner");
    let cb = Container::start(&env, &b, &inner);
    let pid = env.state(&inner)["pid"].as_i64().unwrap() as i32;
    let o = env.siloc(&["delete", &outer]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("are not the container's"), "{err}");
    assert!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok(),
        "the inner container's init {pid} was killed by the outer's delete"
    );
    assert_eq!(env.state(&inner)["status"], "running");
    assert!(!env.ok(&["list", "-q"]).contains(&outer));
    drop(cb);
    drop(ca);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// Every cgroup hierarchy's mount point: /sys/fs/cgroup's entries (v1 ones, the
/// hybrid's unified and named ones) and /sys/fs/cgroup itself (pure v2).
fn hierarchy_roots() -> Vec<std::path::PathBuf> {
    let mut roots: Vec<std::path::PathBuf> = std::fs::read_dir("/sys/fs/cgroup")
        .map(|rd| rd.flatten().map(|h| h.path()).collect())
        .unwrap_or_default();
    roots.push("/sys/fs/cgroup".into());
    roots
}

/// The hierarchies (v1 ones, the hybrid's unified and named ones) still holding the
/// test's cgroup `/<name>`.
fn cgroups_left(name: &str) -> Vec<std::path::PathBuf> {
    hierarchy_roots()
        .into_iter()
        .map(|h| h.join(name))
        .filter(|d| d.is_dir())
        .collect()
}

/// Two containers at one cgroupsPath: `delete` of the first, stopped, while the
/// second runs keeps the cgroups; `delete` of the second removes them from every
/// hierarchy, the hybrid's unified and name=systemd ones included, which the second
/// found made by the first (runc removes a container's cgroup paths whoever made
/// them).
#[test]
fn two_containers_at_one_cgroups_path_leave_no_cgroup() {
    needs_root!();
    let env = TestEnv::new();
    let first = env.id("first");
    let name = format!("siloc-test-{first}");
    let _cgroups = TestCgroup(name.clone());
    let path = serde_json::json!(format!("/{name}"));
    let mut a = env.bundle("a", &["true"]);
    a.edit(|s| s["linux"]["cgroupsPath"] = path.clone());
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.edit(|s| s["linux"]["cgroupsPath"] = path.clone());
    let ca = Container::start(&env, &a, &first);
    assert!(ca.wait_status("stopped", 10));
    let second = env.id("second");
    let cb = Container::start(&env, &b, &second);
    let o = env.siloc(&["delete", &first]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!cgroups_left(&name).is_empty());
    assert_eq!(env.state(&second)["status"], "running");
    env.ok(&["delete", "--force", &second]);
    assert_eq!(cgroups_left(&name), Vec::<std::path::PathBuf>::new());
    drop(cb);
    drop(ca);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// `delete` of a stopped container whose cgroup holds a stopped, not yet deleted
/// container's cgroup below it succeeds at once and removes both, as runc's
/// recursive cgroup removal does (it failed after 10 s on the busy unified dir); the
/// inner container's `delete` then succeeds too.
#[test]
fn delete_of_a_stopped_parent_takes_a_stopped_childs_cgroups() {
    needs_root!();
    let env = TestEnv::new();
    let outer = env.id("outer");
    let (cgroups, a, b) = nested_bundles(&env, &outer, &["true"]);
    let name = cgroups.0.clone();
    let ca = Container::start(&env, &a, &outer);
    let inner = env.id("inner");
    let cb = Container::start(&env, &b, &inner);
    assert!(ca.wait_status("stopped", 10) && cb.wait_status("stopped", 10));
    let t0 = std::time::Instant::now();
    let o = env.siloc(&["delete", &outer]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(5),
        "delete took {:?}",
        t0.elapsed()
    );
    assert_eq!(cgroups_left(&name), Vec::<std::path::PathBuf>::new());
    env.ok(&["delete", &inner]);
    assert!(!env.ok(&["list", "-q"]).contains(&inner));
    drop(cb);
    drop(ca);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// `delete --force` of a create killed inside libcontainer (state `creating`, no pid:
/// what libcontainer saves before its init reported ready) kills the init left
/// waiting for `start`, then removes its cgroups and releases its ID range. Before,
/// the init lived on, pid 1 of its PID namespace, in the container's cgroups, and the
/// next container got its range (engine::killed_create).
#[test]
fn delete_of_a_create_killed_inside_libcontainer_kills_its_init() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["true"]);
    b.annotate("io.siloc.userns", "auto");
    let id = env.id("half");
    let c = Container::create(&env, &b, &id);
    let init = env.state(&id)["pid"].as_i64().expect("pid");
    let file = env.root.join(&id).join("state.json");
    let mut st: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    st["status"] = "creating".into();
    st.as_object_mut().unwrap().remove("pid");
    std::fs::write(&file, st.to_string()).unwrap();
    let o = env.siloc(&["delete", "--force", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // gone, or dead and not yet reaped by the host's init
    let stat = std::fs::read_to_string(format!("/proc/{init}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").map(|(_, r)| &r[..1]);
    assert!(
        matches!(state, None | Some("Z" | "X")),
        "the init {init} lives on: {stat}"
    );
    drop(c);
    env.assert_no_trace(&id);
}

/// `kill --all` of a stopped container whose v1 devices cgroup is gone (a pod's
/// StopPodSandbox removed the nested cgroups of another pod) signals nothing and
/// succeeds, as runc 1.1.5; it failed reading the devices dir and left the freezer dir
/// made again and FROZEN, so the runc shim never completed the pod's stop.
#[test]
fn kill_all_of_a_stopped_container_without_its_cgroup_succeeds() {
    needs_root!();
    let devices = std::path::Path::new("/sys/fs/cgroup/devices");
    if !devices.join("cgroup.procs").exists() {
        eprintln!("SKIPPED: no cgroup v1 devices hierarchy");
        return;
    }
    let env = TestEnv::new();
    let id = env.id("gone");
    let name = format!("siloc-test-{id}");
    let _cgroups = TestCgroup(name.clone());
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| s["linux"]["cgroupsPath"] = serde_json::json!(format!("/{name}")));
    let c = Container::start(&env, &b, &id);
    assert!(c.wait_status("stopped", 10));
    std::fs::remove_dir(devices.join(&name)).unwrap();
    env.ok(&["kill", "--all", &id, "KILL"]);
    let freezer = format!("/sys/fs/cgroup/freezer/{name}/freezer.state");
    let st = std::fs::read_to_string(&freezer).unwrap_or_default();
    assert!(!st.contains("FROZEN"), "{freezer}: {st}");
    env.ok(&["delete", &id]);
    assert_eq!(cgroups_left(&name), Vec::<std::path::PathBuf>::new());
    drop(c);
    env.assert_no_trace(&id);
}
