//! Bad input: each case exits non-zero with a runc-style message that names what is
//! wrong, and leaves no mount, cgroup, process or state behind. Needs root.

mod common;

use common::{Container, TestEnv, traces_of};

/// Asserts `args` fails with `needle` in stderr and leaves nothing of `id`.
fn fails_cleanly(env: &TestEnv, args: &[&str], needle: &str, id: &str) {
    let (ok, _, err) = env.detached(args);
    assert!(!ok, "{args:?} should fail");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err:?}"
    );
    assert!(err.lines().count() <= 2, "one-line message expected: {err}");
    assert!(
        env.leftovers().is_empty(),
        "{args:?}: {:?}",
        env.leftovers()
    );
    assert!(traces_of(id).is_empty(), "{args:?}: {:?}", traces_of(id));
}

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
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
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
    let pool = env.root.join(".siloc/idpool.json");
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&pool).is_ok_and(|t| t.contains(&id)) {
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
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
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
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
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
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
}

/// An image layout with one small layer, for the hostile-layout cases below; returns
/// (layout dir, hex of the manifest blob, hex of the layer blob).
fn small_layout(env: &TestEnv, name: &str) -> (std::path::PathBuf, String, String) {
    use common::oci::{Comp, Entry, Tar};
    let dir = env.dir.path().join(name);
    let mut t = Tar::new();
    t.add([Entry::file("hello", b"hi")]);
    let layer = Comp::None.compress(&t.bytes());
    let md = common::oci::write_layout(
        &dir,
        &[(layer.clone(), Comp::None)],
        serde_json::json!({"Cmd": ["sh"]}),
        "localhost/siloc-test/small:v1",
    );
    let hex = |d: &str| d.trim_start_matches("sha256:").to_string();
    (dir, hex(&md), common::oci::sha256_hex(&layer))
}

/// `siloc <args>` with output captured, killed after `secs`; `None` when it hung.
fn within(env: &TestEnv, args: &[&str], secs: u64) -> Option<std::process::Output> {
    let mut child = env
        .cmd(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

/// Asserts the store holds no image, layer or unpack in progress.
fn store_is_empty(env: &TestEnv) {
    let store = env.data.join("store");
    for sub in ["images", "layers", "tmp"] {
        let n = std::fs::read_dir(store.join(sub)).map_or(0, |rd| rd.count());
        assert_eq!(n, 0, "store {sub}/ is not empty");
    }
}

#[test]
fn a_missing_blob_is_named_once_with_its_cause() {
    needs_root!();
    let env = TestEnv::new();
    let (dir, manifest, _) = small_layout(&env, "nomanifest");
    let blob = dir.join("blobs/sha256").join(&manifest);
    std::fs::remove_file(&blob).unwrap();
    let err = env.fails(&["image", "unpack", dir.to_str().unwrap()]);
    assert!(err.contains(&blob.display().to_string()), "{err}");
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "the cause is repeated: {err}"
    );
    store_is_empty(&env);
}

#[test]
fn a_blob_that_is_not_a_regular_file_fails_without_hanging() {
    needs_root!();
    let env = TestEnv::new();
    // A blob read to its end before its size is checked: /dev/zero never ends (and
    // filled memory), a FIFO never opens.
    let (_, manifest, layer) = small_layout(&env, "devzero");
    let cases = [
        (manifest.clone(), "zero"),
        (layer.clone(), "zero"),
        (manifest, "fifo"),
        (layer, "fifo"),
        ("index.json".to_string(), "fifo"),
    ];
    for (name, kind) in cases {
        let (dir, _, _) = small_layout(&env, &format!("{kind}-{}", &name[..6]));
        let path = if name == "index.json" {
            dir.join(&name)
        } else {
            dir.join("blobs/sha256").join(&name)
        };
        std::fs::remove_file(&path).unwrap();
        if kind == "zero" {
            std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        } else {
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        }
        let o = within(&env, &["image", "unpack", dir.to_str().unwrap()], 20)
            .unwrap_or_else(|| panic!("unpack hung on {kind} {}", path.display()));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{kind} {name}: {err}");
        assert!(
            err.contains(&path.display().to_string()) && err.contains("not a regular file"),
            "{kind} {name}: {err}"
        );
        store_is_empty(&env);
    }
}

#[test]
fn a_malformed_index_names_the_field() {
    needs_root!();
    let env = TestEnv::new();
    let (dir, _, _) = small_layout(&env, "badindex");
    let cases = [
        ("{", "EOF"),
        ("[]", "expected struct"),
        (r#"{"schemaVersion":2}"#, "manifests"),
        (
            r#"{"schemaVersion":2,"manifests":[{"mediaType":"x","digest":"sha256:zz","size":1}]}"#,
            "digest",
        ),
        (
            r#"{"schemaVersion":2,"manifests":[{"mediaType":"x","size":-1,
                "digest":"sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}]}"#,
            "-1",
        ),
    ];
    for (text, want) in cases {
        std::fs::write(dir.join("index.json"), text).unwrap();
        let err = env.fails(&["image", "unpack", dir.to_str().unwrap()]);
        assert!(
            err.contains("index.json") && err.contains(want),
            "{text}: expected {want:?} in {err}"
        );
        store_is_empty(&env);
    }
}

#[test]
fn overlapping_layers_and_upper_fail_before_anything_is_changed() {
    use std::os::unix::fs::MetadataExt;
    needs_root!();
    let env = TestEnv::new();
    let store = env.dir.path().join("layers");
    let base = store.join("base");
    common::make_busybox_rootfs(&base);
    let top = store.join("top");
    std::fs::create_dir_all(top.join("etc")).unwrap();
    let s = |p: &std::path::Path| p.display().to_string();
    let list = |ls: &[&std::path::Path]| serde_json::to_string(ls).unwrap();
    // (layers, upper, what the message names)
    let cases: Vec<(String, Option<String>, &str)> = vec![
        // overlayfs refused these with "fsmount overlay ...: ELOOP"
        (list(&[&base, &top, &base]), None, "listed twice"),
        (list(&[&base, &base.join("bin")]), None, "inside"),
        (list(&[&top.join("etc"), &top]), None, "inside"),
        (list(&[&base, &top]), Some(s(&top)), "io.siloc.rootfs.upper"),
        (
            list(&[&base, &top]),
            Some(s(&store)),
            "io.siloc.rootfs.upper",
        ),
        // overlayfs took this one, and siloc had chowned the layer's directory
        (
            list(&[&base, &top]),
            Some(s(&top.join("etc"))),
            "io.siloc.rootfs.upper",
        ),
    ];
    for (i, (layers, upper, needle)) in cases.into_iter().enumerate() {
        let mut b = common::Bundle::with_rootfs(&env.dir.path().join(format!("b{i}")), &["true"]);
        b.annotate("io.siloc.userns", "auto");
        b.annotate("io.siloc.rootfs.layers", &layers);
        if let Some(u) = &upper {
            b.annotate("io.siloc.rootfs.upper", u);
        }
        let id = env.id(&format!("overlap{i}"));
        fails_cleanly(&env, &["create", "--bundle", b.path(), &id], needle, &id);
        for d in [&store, &top, &top.join("etc"), &base, &base.join("bin")] {
            let m = std::fs::metadata(d).unwrap();
            assert_eq!(
                (m.uid(), m.gid()),
                (0, 0),
                "case {i}: {} chowned",
                d.display()
            );
        }
        assert!(!top.join("etc.work").exists() && !store.with_extension("work").exists());
    }
}

/// A persistent upper dir must not overlap siloc's data or state root, or another live
/// container's upper or work dir (also through a symlink), and must not be taken over
/// under another container's ID range. Each refusal leaves the live container whole.
#[test]
fn a_persistent_upper_stays_apart_from_siloc_and_other_containers() {
    needs_root!();
    let env = TestEnv::new();
    let base = env.dir.path().join("layers/base");
    common::make_busybox_rootfs(&base);
    let layers = serde_json::to_string(&[&base]).unwrap();
    let ups = env.dir.path().join("ups");
    std::fs::create_dir(&ups).unwrap();
    let x_upper = ups.join("x");
    std::os::unix::fs::symlink(&x_upper, ups.join("alias")).unwrap();
    let bundle = |name: &str, upper: Option<&std::path::Path>| {
        let mut b = common::Bundle::with_rootfs(&env.dir.path().join(name), &["sleep", "1000"]);
        b.annotate("io.siloc.userns", "auto");
        b.annotate("io.siloc.rootfs.layers", &layers);
        if let Some(u) = upper {
            b.annotate("io.siloc.rootfs.upper", u.to_str().unwrap());
        }
        b
    };
    let x = Container::start(&env, &bundle("bx", Some(&x_upper)), &env.id("x"));
    let x_work = ups.join("x.work");
    let refused = |name: &str, upper: &std::path::Path, needle: &str| {
        let id = env.id(name);
        let b = bundle(name, Some(upper));
        let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
        assert!(!ok, "{name}: create should fail");
        assert!(
            err.contains("io.siloc.rootfs.upper") && err.contains(needle),
            "{name}: {err}"
        );
        assert!(
            !env.root.join(".siloc/containers").join(&id).exists(),
            "{name}: record"
        );
        let pool = std::fs::read_to_string(env.root.join(".siloc/idpool.json")).unwrap();
        assert!(!pool.contains(&id), "{name}: range kept");
        assert!(traces_of(&id).is_empty(), "{name}: {:?}", traces_of(&id));
    };
    refused("data", &env.data, "data root");
    refused("state", &env.root.join("sub"), "state root");
    refused("work", &x_work, "of container");
    refused("nested", &x_upper.join("inner"), "of container");
    refused("alias", &ups.join("alias"), "of container");
    refused("their-layer", &base, "of container");
    // A bind mount of the state root is the state root.
    let salias = env.dir.path().join("salias");
    std::fs::create_dir(&salias).unwrap();
    nix::mount::mount(
        Some(&env.root),
        &salias,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
    refused("bound-state", &salias.join(".siloc"), "state root");
    let _ = nix::mount::umount2(&salias, nix::mount::MntFlags::MNT_DETACH);
    assert!(x_work.is_dir(), "the live container's work dir was removed");
    assert_eq!(x.exec(&["true"]).0, 0);
    // x's upper dir belongs to x's range; once x is gone, another container takes that
    // range, and the upper dir is refused rather than shown as the overflow ID.
    drop(x);
    let _w = Container::start(&env, &bundle("bw", None), &env.id("w"));
    refused("taken", &x_upper, "ID range container");
}

#[test]
fn parallel_updates_keep_every_limit_and_the_saved_spec_whole() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("upd");
    let c = Container::start(&env, &b, &id);
    let saved = env
        .root
        .join(".siloc/containers")
        .join(&id)
        .join("config.json");
    for round in 0..10u64 {
        let flags = [
            ("--pids-limit", format!("{}", 200 + round)),
            ("--memory", format!("{}M", 100 + round)),
            ("--cpu-share", format!("{}", 500 + round)),
        ];
        std::thread::scope(|s| {
            for (flag, value) in &flags {
                let env = &env;
                let id = &id;
                s.spawn(move || {
                    let o = env.siloc(&["update", flag, value, id]);
                    assert!(
                        o.status.success(),
                        "round {round}: update {flag} {value}: {}",
                        String::from_utf8_lossy(&o.stderr)
                    );
                });
            }
        });
        // Each update used to write the saved spec in place: parallel ones left it
        // with trailing bytes, and every later update and exec failed to parse it.
        let text = std::fs::read_to_string(&saved).unwrap();
        let spec: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("round {round}: saved spec corrupt: {e}"));
        let r = &spec["linux"]["resources"];
        assert_eq!(
            (
                r["pids"]["limit"].as_u64(),
                r["memory"]["limit"].as_u64(),
                r["cpu"]["shares"].as_u64()
            ),
            (
                Some(200 + round),
                Some((100 + round) << 20),
                Some(500 + round)
            ),
            "round {round}: an update was lost"
        );
    }
    let (code, _, err) = c.exec(&["true"]);
    assert_eq!(code, 0, "exec after the updates: {err}");
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
}

#[test]
fn an_env_entry_without_a_name_is_refused_not_a_panic() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("envc");
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| s["process"]["env"] = serde_json::json!(["PATH=/bin", "=x"]));
    fails_cleanly(
        &env,
        &["create", "--bundle", b.path(), &id],
        "process.env[1]",
        &id,
    );
    let b = env.bundle("b2", &["sleep", "1000"]);
    let id = env.id("envx");
    let c = Container::start(&env, &b, &id);
    let process = env.dir.path().join("process.json");
    std::fs::write(
        &process,
        r#"{"args":["true"],"cwd":"/","user":{"uid":0,"gid":0},"env":["PATH=/bin",""]}"#,
    )
    .unwrap();
    for (args, needle) in [
        (vec!["exec", "-e", "=x", &id, "true"], "-e"),
        (
            vec!["exec", "--process", process.to_str().unwrap(), &id],
            "env[1]",
        ),
    ] {
        let (ok, _, err) = env.detached(&args);
        assert!(!ok, "{args:?}");
        assert!(
            err.contains(needle) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn a_process_file_without_args_or_with_a_relative_cwd_names_the_field() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("procf");
    let c = Container::start(&env, &b, &id);
    let process = env.dir.path().join("process.json");
    // libcontainer said "PATH environment variable is not set" and "failed to unix
    // syscall" for these.
    for (body, needle) in [
        (r#"{"args":[],"cwd":"/","user":{"uid":0,"gid":0}}"#, "args"),
        (
            r#"{"args":[""],"cwd":"/","user":{"uid":0,"gid":0}}"#,
            "args",
        ),
        (
            r#"{"args":["true"],"cwd":"rel","user":{"uid":0,"gid":0}}"#,
            "cwd",
        ),
    ] {
        std::fs::write(&process, body).unwrap();
        let (ok, _, err) = env.detached(&["exec", "--process", process.to_str().unwrap(), &id]);
        assert!(!ok, "{body}");
        assert!(
            err.contains("--process") && err.contains(needle),
            "{body}: {err}"
        );
    }
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn exec_writes_its_process_file_nowhere_another_user_can_reach() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("exectmp");
    let c = Container::start(&env, &b, &id);
    // exec wrote /tmp/siloc-exec-<pid>.json with a plain write: any user could put a
    // symlink there first (pids are predictable) and have root overwrite its target.
    let tmp = env.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let canary = env.dir.path().join("canary");
    std::fs::write(&canary, "untouched").unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for pid in last..last + 500 {
        std::os::unix::fs::symlink(&canary, tmp.join(format!("siloc-exec-{pid}.json"))).unwrap();
    }
    let o = env
        .cmd(&["exec", &id, "true"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "untouched");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // nor does it need a temporary directory at all
    let file = env.dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let o = env
        .cmd(&["exec", &id, "true"])
        .env("TMPDIR", &file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
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
