//! Bad input on the command line and in the bundle: missing or malformed bundles,
//! duplicate and bad IDs, signals, the JSON log, pid files, `delete --force` of
//! half-made containers, a state root that is a file.

use super::fails_cleanly;
use crate::common::{self, Container, TestEnv, traces_of};

#[test]
fn missing_bundle_and_config() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("nob");
    let missing = env.dir.path().join("nope");
    fails_cleanly(
        &env,
        &["create", "--bundle", missing.to_str().unwrap(), &id],
        "nope",
        &id,
    );
    let empty = env.dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    fails_cleanly(
        &env,
        &["create", "--bundle", empty.to_str().unwrap(), &id],
        "config.json not found",
        &id,
    );
}

#[test]
fn malformed_and_schema_invalid_config_name_the_field() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("badcfg");
    let b = env.bundle("b", &["true"]);
    let cfg = b.dir.join("config.json");
    let good = std::fs::read_to_string(&cfg).unwrap();
    let cases: &[(&str, &str)] = &[
        ("{ not json", "(top level)"),
        (
            &good.replace("\"args\": [", "\"args\": 5, \"x\": ["),
            "process.args",
        ),
        (
            &good.replace("\"cwd\": \"/\"", "\"cwd\": \"relative\""),
            "process.cwd",
        ),
        (
            &good.replace("\"ociVersion\"", "\"ociVersionX\""),
            "ociVersion",
        ),
        (
            &good.replace("\"uid\": 0", "\"uid\": \"root\""),
            "process.user.uid",
        ),
        (
            &good.replace(
                "\"linux\": {",
                "\"linux\": {\"rootfsPropagation\": \"rshare\",",
            ),
            "linux.rootfsPropagation",
        ),
    ];
    for (text, field) in cases {
        std::fs::write(&cfg, text).unwrap();
        fails_cleanly(&env, &["create", "--bundle", b.path(), &id], field, &id);
    }
}

#[test]
fn duplicate_id_start_twice_and_delete_running() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("dup");
    let c = Container::create(&env, &b, &id);
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    assert!(!ok && err.contains("container with id exists"), "{err}");
    env.ok(&["start", &id]);
    let err = env.fails(&["start", &id]);
    assert!(err.contains("cannot start"), "{err}");
    let err = env.fails(&["delete", &id]);
    assert!(err.contains("not stopped"), "{err}");
    assert_eq!(
        env.state(&id)["status"],
        "running",
        "a refused delete leaves it running"
    );
    drop(c);
    env.assert_no_trace(&id);
}

#[test]
fn bad_signal_and_bad_id() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("sig");
    let _c = Container::start(&env, &b, &id);
    // (runc takes 0: kill(2)'s existence check, see lifecycle.rs)
    for bad in ["SIGNOPE", "99", "-1"] {
        let err = env.fails(&["kill", &id, bad]);
        assert!(err.contains("unknown signal"), "{bad}: {err}");
    }
    assert_eq!(env.state(&id)["status"], "running");
    for bad in ["a/b", ".hidden", "sp ace"] {
        let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), bad]);
        assert!(!ok && err.contains("invalid container id"), "{bad}: {err}");
    }
    // Every command that names a container says so, as runc does, rather than
    // "does not exist" for a path-like id.
    for args in [
        &["state", "../x"][..],
        &["kill", "../..", "KILL"],
        &["pause", "a/b"],
        &["resume", "a/b"],
        &["ps", "../x"],
        &["exec", "../x", "true"],
        &["events", "--stats", "../x"],
        &["update", "--pids-limit", "10", "../x"],
    ] {
        let err = env.fails(args);
        assert!(err.contains("invalid container id"), "{args:?}: {err}");
    }
}

#[test]
fn errors_go_to_the_json_log() {
    needs_root!();
    let env = TestEnv::new();
    let log = env.dir.path().join("log.json");
    let o = env
        .cmd(&[
            "--log",
            log.to_str().unwrap(),
            "--log-format",
            "json",
            "state",
            "nope",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let line = std::fs::read_to_string(&log).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.lines().last().unwrap()).unwrap();
    assert_eq!(v["level"], "error");
    assert_eq!(v["msg"], "container does not exist");
    assert!(v["time"].as_str().unwrap().contains('T'));
    // with the log in a file, runc repeats the error on stderr
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "container does not exist\n"
    );
}

#[test]
fn systemd_cgroup_without_systemd_is_a_clear_error() {
    needs_root!();
    if std::path::Path::new("/run/systemd/system").exists() {
        eprintln!("SKIPPED: systemd runs here");
        return;
    }
    let env = TestEnv::new();
    let b = env.bundle("b", &["true"]);
    let id = env.id("sd");
    let o = std::process::Command::new(common::siloc_bin())
        .args([
            "--root",
            env.root.to_str().unwrap(),
            "--systemd-cgroup",
            "create",
            "--bundle",
            b.path(),
            &id,
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("systemd is not running"));
    assert!(env.leftovers().is_empty());
}

#[test]
fn forced_delete_of_a_path_like_id_removes_nothing() {
    needs_root!();
    let env = TestEnv::new();
    // The state root's parent holds the config and the data root: `delete --force ..`
    // used to remove it whole (and `../../etc` would reach /etc).
    std::fs::create_dir_all(env.root.join(".siloc/containers")).unwrap();
    let canary = env.dir.path().join("canary");
    std::fs::write(&canary, "x").unwrap();
    for bad in ["..", ".", "../..", "x/..", "../canary", ".siloc", ""] {
        let err = env.fails(&["delete", "--force", bad]);
        assert!(err.contains("invalid container id"), "{bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    assert!(canary.exists(), "the state root's parent was removed");
    assert!(env.config.exists(), "the config was removed");
    assert!(
        env.root.join(".siloc/containers").is_dir(),
        "siloc's dir was removed"
    );
}

#[test]
fn unwritable_pid_file_fails_create_and_exec() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let bad = env.dir.path().join("no/such/dir/pid");
    let bad = bad.to_str().unwrap();
    // libcontainer only warns; runc (and containerd's shim) need the file.
    let id = env.id("pidf");
    fails_cleanly(
        &env,
        &["create", "--pid-file", bad, "--bundle", b.path(), &id],
        "--pid-file",
        &id,
    );
    let id = env.id("pidx");
    let c = Container::start(&env, &b, &id);
    let (ok, _, err) = env.detached(&["exec", "-d", "--pid-file", bad, &id, "sleep", "999"]);
    assert!(!ok && err.contains("--pid-file"), "{err}");
    let ps = env.ok(&["ps", &id]);
    assert!(
        !ps.contains("999"),
        "the exec'd process was left running: {ps}"
    );
    drop(c);
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
}

#[test]
fn forced_delete_waits_for_a_create_in_progress() {
    needs_root!();
    needs_test_hooks!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.annotate("io.siloc.userns", "auto");
    let id = env.id("racing");
    // create stalls right after taking its ID range; delete --force comes in then.
    let mut create = env
        .cmd(&["create", "--bundle", b.path(), &id])
        .env("SILOC_TEST_STALL_AT", "after-idpool")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !env.pool_holders().contains(&id) {
        assert!(std::time::Instant::now() < end, "create never took a range");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _guard = Container {
        env: &env,
        id: id.clone(),
    };
    env.ok(&["delete", "--force", &id]);
    let created = create.wait().unwrap();
    // delete waited for create, then removed the container: nothing is left.
    // (It used to release the range under the create, which then still succeeded.)
    assert!(created.success(), "create: {created}");
    env.assert_no_trace(&id);
}

#[test]
fn forced_delete_clears_a_create_that_died_before_its_first_record() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["true"]);
    let id = env.id("halfmade");
    // What a create killed between claiming the id and writing record.json leaves:
    // the record dir with a marker naming a dead process.
    let rec = env.root.join(".siloc/containers").join(&id);
    std::fs::create_dir_all(&rec).unwrap();
    std::fs::write(rec.join("creating"), "999999999 1").unwrap();
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    assert!(
        !ok && err.contains("exists"),
        "the id is still taken: {err}"
    );
    env.ok(&["delete", "--force", &id]);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    // the id is free again
    let _guard = Container {
        env: &env,
        id: id.clone(),
    };
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    assert!(ok, "create after the forced delete: {err}");
    env.ok(&["delete", "--force", &id]);
    env.assert_no_trace(&id);
}

#[test]
fn forced_delete_removes_a_container_whose_state_file_is_empty() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.annotate("io.siloc.userns", "auto");
    let id = env.id("emptystate");
    let _guard = Container {
        env: &env,
        id: id.clone(),
    };
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    assert!(ok, "create: {err}");
    // libcontainer writes state.json in place: a create killed mid-write leaves it so.
    std::fs::write(env.root.join(&id).join("state.json"), "").unwrap();
    let (ok, _, err) = env.detached(&["state", &id]);
    assert!(!ok, "state of an unreadable state.json: {err}");
    env.ok(&["delete", "--force", &id]);
    // the init (sleep) was killed through the cgroup, the range released
    env.assert_no_trace(&id);
}

/// `--root` naming a file, or a path below one, fails every command with the flag
/// named, before anything is made (it used to say "File exists" on create, "container
/// does not exist" on state, and list nothing).
#[test]
fn a_state_root_that_is_a_file_is_named() {
    needs_root!();
    let env = TestEnv::new();
    let file = env.dir.path().join("root-file");
    std::fs::write(&file, "x").unwrap();
    let b = env.bundle("b", &["true"]);
    let id = env.id("rootfile");
    let below = file.join("sub");
    for (root, args) in [&file, &below].into_iter().flat_map(|r| {
        [
            vec!["list"],
            vec!["state", &id],
            vec!["create", "--bundle", b.path(), &id],
        ]
        .map(|a| (r, a))
    }) {
        let o = std::process::Command::new(common::siloc_bin())
            .arg("--root")
            .arg(root)
            .arg("--config")
            .arg(&env.config)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            err.contains("--root") && err.contains("not a directory"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A spec that joins siloc's own mount namespace by path would have libcontainer set
/// up the rootfs in the caller's mount table (issue 15): refused before anything is
/// made, naming the field and the path. siloc runs in `unshare -m --propagation
/// private`, so a regression changes only that copy.
#[test]
fn joining_the_callers_mount_namespace_is_refused() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("joinmnt");
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| {
        for n in s["linux"]["namespaces"].as_array_mut().unwrap() {
            if n["type"] == "mount" {
                n["path"] = serde_json::json!("/proc/self/ns/mnt");
            }
        }
    });
    // Bounded: without the check, libcontainer hangs in the joined namespace.
    let o = std::process::Command::new("timeout")
        .args(["60", "unshare", "-m", "--propagation", "private"])
        .arg(common::siloc_bin())
        .arg("--root")
        .arg(&env.root)
        .arg("--config")
        .arg(&env.config)
        .args(["create", "--bundle", b.path(), &id])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("unshare");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "create should fail");
    assert!(
        err.contains("linux.namespaces: mount namespace path /proc/self/ns/mnt is siloc's own"),
        "{err}"
    );
    env.assert_no_trace(&id);
}

/// A user-namespaced container whose bundle lies under a directory its host root
/// cannot search (`mktemp -d` makes 0700 root:root) failed with libcontainer's bare
/// "failed to prepare rootfs" (EACCES): now the directory, the host uid and the fix
/// are named, and nothing is left (ID range, record, mount, cgroup).
#[test]
fn a_bundle_the_containers_root_cannot_reach_is_named() {
    use std::os::unix::fs::PermissionsExt;
    needs_root!();
    let env = TestEnv::new();
    let closed = env.dir.path().join("closed");
    std::fs::create_dir(&closed).expect("mkdir");
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let mut b = common::Bundle::busybox(&closed.join("b"), &["true"]);
    b.annotate("io.siloc.userns", "auto");
    let id = env.id("reach");
    let needle = format!("cannot search {} (mode 0700, owner 0:0)", closed.display());
    fails_cleanly(&env, &["create", "--bundle", b.path(), &id], &needle, &id);
    let err = env.fails(&["create", "--bundle", b.path(), &id]);
    assert!(
        err.contains("host uid") && err.contains("chmod o+x"),
        "{err}"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// `nosymfollow` in a container without a mount namespace of its own: siloc sets the
/// flag only inside the container's own mount namespace, so the mount is named and
/// nothing is made (libcontainer 0.7 dropped the option on a bind without a word).
#[test]
fn nosymfollow_without_an_own_mount_namespace_is_refused() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("nosymns");
    let mut b = env.bundle("b", &["true"]);
    let src = env.dir.path().to_str().unwrap().to_string();
    b.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .retain(|n| n["type"] != "mount");
        s["mounts"].as_array_mut().unwrap().push(serde_json::json!(
            {"destination": "/b", "type": "bind", "source": src, "options": ["rbind", "nosymfollow"]}));
    });
    fails_cleanly(
        &env,
        &["create", "--bundle", b.path(), &id],
        "mounts: /b: nosymfollow needs a mount namespace of the container's own",
        &id,
    );
}
