//! Per-container user namespaces and the one-mount layered rootfs (DESIGN.md items 1
//! and 2) with real containers. Needs root; skips loudly without it.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::{Bundle, Container, TestEnv};
use serde_json::Value;

/// A busybox base layer plus `extra` small layers, each adding /layers/N and
/// overwriting /etc/top; returns the layer dirs, base first. One file in the base is
/// owned by 1000:1000 so the container's non-root users are visible too.
fn make_layers(env: &TestEnv, extra: usize) -> Vec<PathBuf> {
    let store = env.dir.path().join("layers");
    let base = store.join("base");
    common::make_busybox_rootfs(&base);
    std::fs::write(base.join("etc/owned-by-1000"), "x").unwrap();
    std::os::unix::fs::chown(base.join("etc/owned-by-1000"), Some(1000), Some(1000)).unwrap();
    let mut layers = vec![base];
    for i in 0..extra {
        let l = store.join(format!("l{i:03}"));
        std::fs::create_dir_all(l.join("layers")).unwrap();
        std::fs::create_dir_all(l.join("etc")).unwrap();
        std::fs::write(l.join("layers").join(i.to_string()), i.to_string()).unwrap();
        std::fs::write(l.join("etc/top"), i.to_string()).unwrap();
        layers.push(l);
    }
    layers
}

/// A bundle with an empty rootfs, layered and with a per-container user namespace.
fn layered_bundle(env: &TestEnv, name: &str, layers: &[PathBuf], args: &[&str]) -> Bundle {
    let mut b = Bundle::with_rootfs(&env.dir.path().join(name), args);
    b.annotate("io.siloc.userns", "auto");
    b.annotate(
        "io.siloc.rootfs.layers",
        &serde_json::to_string(layers).unwrap(),
    );
    b.edit(|s| s["root"]["readonly"] = Value::Bool(false));
    b
}

/// (uid, gid, size) of the container's range, from its state annotations.
fn range_of(env: &TestEnv, id: &str) -> (u32, u32, u32) {
    let a = env.state(id)["annotations"]["io.siloc.userns.range"]
        .as_str()
        .expect("range annotation")
        .to_string();
    let get = |k: &str| -> u32 {
        a.split(',')
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap()
            .parse()
            .unwrap()
    };
    (get("uid"), get("gid"), get("size"))
}

/// The container's rootfs as the host reaches it: its init's root.
fn root_of(env: &TestEnv, id: &str) -> PathBuf {
    let pid = env.state(id)["pid"].as_i64().expect("pid");
    PathBuf::from(format!("/proc/{pid}/root"))
}

/// The mounts at "/" in the container's mount table (fstype of each): siloc attaches
/// the rootfs in the namespace the container is created from, never in the host's.
fn container_root_mounts(env: &TestEnv, id: &str) -> Vec<String> {
    let pid = env.state(id)["pid"].as_i64().expect("pid");
    std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(4) == Some("/"))
        .filter_map(|l| {
            l.split_once(" - ")
                .map(|(_, post)| post.split(' ').next().unwrap_or("").to_string())
        })
        .collect()
}

fn mounts_at(p: &Path) -> usize {
    common::mounts_under(p)
        .iter()
        .filter(|m| Path::new(m) == p)
        .count()
}

#[test]
fn layered_rootfs_ownership_inside_and_outside() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 2);
    let b = layered_bundle(&env, "b", &layers, &["sleep", "1000"]);
    let id = env.id("own");
    let c = Container::start(&env, &b, &id);
    let (uid, gid, size) = range_of(&env, &id);
    assert!(uid >= 100_000 && size == 65536, "range {uid} {size}");
    assert_eq!(
        container_root_mounts(&env, &id),
        ["overlay"],
        "one rootfs mount"
    );
    assert_eq!(
        mounts_at(&b.dir.join("rootfs")),
        0,
        "nothing on the host's table"
    );
    let rootfs = root_of(&env, &id);
    assert_eq!(
        env.state(&id)["annotations"]["io.siloc.rootfs.assembly"],
        "overlay layers=3 trees=1 idmapped=yes attached=1 via=lowerdir+"
    );
    // Inside: image files belong to root and to the container's user 1000.
    let out = env.ok(&[
        "exec",
        "--cap",
        "CAP_CHOWN",
        &id,
        "sh",
        "-c",
        "stat -c '%u:%g' /bin/busybox /etc/owned-by-1000; echo $(cat /etc/top); id -u; \
         cat /proc/self/uid_map; echo hi > /written; chown 1000:1000 /written",
    ]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(&lines[..4], &["0:0", "1000:1000", "1", "0"]);
    let map: Vec<u32> = lines[4]
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(map, vec![0, uid, size]);
    // Outside, through the container's root: the container's range.
    let m = std::fs::metadata(rootfs.join("bin/busybox")).unwrap();
    assert_eq!((m.uid(), m.gid()), (uid, gid));
    let m = std::fs::metadata(rootfs.join("etc/owned-by-1000")).unwrap();
    assert_eq!(m.uid(), uid + 1000);
    // The layers themselves are untouched (no chown), the write landed in the upper dir.
    let m = std::fs::metadata(layers[0].join("bin/busybox")).unwrap();
    assert_eq!((m.uid(), m.gid()), (0, 0));
    let upper = env.data.join("containers").join(&id).join("upper");
    let w = std::fs::metadata(upper.join("written")).unwrap();
    assert_eq!((w.uid(), w.gid()), (uid + 1000, gid + 1000));
    assert!(!layers.iter().any(|l| l.join("written").exists()));
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn two_containers_share_layers_with_disjoint_ids() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 1);
    let b1 = layered_bundle(&env, "b1", &layers, &["sleep", "1000"]);
    let b2 = layered_bundle(&env, "b2", &layers, &["sleep", "1000"]);
    let (i1, i2) = (env.id("a"), env.id("b"));
    let c1 = Container::start(&env, &b1, &i1);
    let c2 = Container::start(&env, &b2, &i2);
    let (u1, _, s1) = range_of(&env, &i1);
    let (u2, _, s2) = range_of(&env, &i2);
    assert!(
        u1 + s1 <= u2 || u2 + s2 <= u1,
        "ranges overlap: {u1}+{s1} {u2}+{s2}"
    );
    for c in [&c1, &c2] {
        let (_, out, _) = c.exec(&["cat", "/etc/top"]);
        assert_eq!(out, "0");
    }
    let o1 = std::fs::metadata(root_of(&env, &i1).join("bin/busybox"))
        .unwrap()
        .uid();
    let o2 = std::fs::metadata(root_of(&env, &i2).join("bin/busybox"))
        .unwrap()
        .uid();
    assert_eq!((o1, o2), (u1, u2));
}

/// A persistent upper dir outlives its container, and the next container on it gets
/// the same ID range back, so the files it finds there belong to its own users (with
/// another range they would show as the overflow ID 65534).
#[test]
fn a_persistent_upper_keeps_its_files_and_their_owners() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 1);
    let up = env.dir.path().join("up");
    let with_upper = |name: &str| {
        let mut b = layered_bundle(&env, name, &layers, &["sleep", "1000"]);
        // The trailing "/" must not put the work dir inside the upper dir.
        b.annotate("io.siloc.rootfs.upper", &format!("{}/", up.display()));
        b
    };
    // A container on the first range, so the first fit would hand out another one.
    let x = Container::start(
        &env,
        &layered_bundle(&env, "x", &layers, &["sleep", "1000"]),
        &env.id("x"),
    );
    let (ia, ib) = (env.id("a"), env.id("b"));
    let a = Container::start(&env, &with_upper("a"), &ia);
    let range_a = range_of(&env, &ia);
    env.ok(&[
        "exec",
        "--cap",
        "CAP_CHOWN",
        &ia,
        "sh",
        "-c",
        "echo kept > /kept && touch /u1000 && chown 1000:1000 /u1000",
    ]);
    assert!(
        env.dir.path().join("up.work").is_dir(),
        "work dir is <upper>.work"
    );
    assert!(!up.join(".work").exists(), "work dir inside the upper dir");
    drop(x);
    drop(a);
    assert!(
        !env.dir.path().join("up.work").exists(),
        "work dir left after delete"
    );
    assert_eq!(std::fs::metadata(up.join("kept")).unwrap().uid(), range_a.0);
    let b = Container::start(&env, &with_upper("b"), &ib);
    assert_eq!(range_of(&env, &ib), range_a, "the upper dir's range again");
    let (_, out, err) = b.exec(&["sh", "-c", "stat -c %u /kept /u1000; cat /kept"]);
    assert_eq!(out, "0\n1000\nkept\n", "{err}");
    drop(b);
    std::fs::remove_dir_all(&up).unwrap();
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn plain_rootfs_gets_one_idmapped_bind() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &["sh", "-c", "stat -c %u /bin/busybox; touch /tmp/new"],
    );
    b.annotate("io.siloc.userns", "auto");
    b.edit(|s| s["root"]["readonly"] = Value::Bool(false));
    let o = env.siloc(&["run", "--bundle", b.path(), &env.id("plain")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "0\n");
    // A file written by container root is host root's again: the image stays unshifted.
    let m = std::fs::metadata(b.dir.join("rootfs/tmp/new")).unwrap();
    assert_eq!(m.uid(), 0);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn five_hundred_layers() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 499);
    assert_eq!(layers.len(), 500);
    let b = layered_bundle(
        &env,
        "b",
        &layers,
        &["sh", "-c", "cat /etc/top; ls /layers | wc -l"],
    );
    let o = env.siloc(&["run", "--bundle", b.path(), &env.id("l500")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "498499\n");
    // The pre-6.8 path (mount(2) with /proc/self/fd paths) cannot: the kernel cuts
    // mount options at 4095 bytes. siloc says so instead of mounting a truncated list.
    let o = env
        .cmd(&["run", "--bundle", b.path(), &env.id("legacy")])
        .env("SILOC_OVERLAY_LEGACY", "1")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("4095-byte limit"), "{err}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn legacy_mount_path_runs_fifty_layers() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 49);
    let b = layered_bundle(&env, "b", &layers, &["cat", "/etc/top"]);
    let o = env
        .cmd(&["run", "--bundle", b.path(), &env.id("leg")])
        .env("SILOC_OVERLAY_LEGACY", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "48");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn spec_user_namespace_is_left_as_is() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["cat", "/proc/self/uid_map"]);
    b.annotate("io.siloc.userns", "auto");
    b.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"type": "user"}));
        s["linux"]["uidMappings"] =
            serde_json::json!([{"containerID": 0, "hostID": 0, "size": 65536}]);
        s["linux"]["gidMappings"] =
            serde_json::json!([{"containerID": 0, "hostID": 0, "size": 65536}]);
    });
    let o = env.siloc(&["run", "--bundle", b.path(), &env.id("spec")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let map: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(String::from)
        .collect();
    assert_eq!(map, ["0", "0", "65536"]);
}

/// Each bad input fails with a message naming what is wrong and leaves nothing.
#[test]
fn bad_layers_rootfs_and_upper_fail_cleanly() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 1);
    let layer_list = |extra: &str| {
        let mut v: Vec<String> = layers.iter().map(|l| l.display().to_string()).collect();
        v.push(extra.to_string());
        serde_json::to_string(&v).unwrap()
    };
    type Edit<'a> = Box<dyn Fn(&mut Bundle) + 'a>;
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "missing layer",
            Box::new(|b| {
                b.annotate("io.siloc.rootfs.layers", &layer_list("/nonexistent/layer"));
            }),
            "/nonexistent/layer",
        ),
        (
            "relative layer",
            Box::new(|b| {
                b.annotate("io.siloc.rootfs.layers", &layer_list("rel/layer"));
            }),
            "io.siloc.rootfs.layers",
        ),
        (
            "not JSON",
            Box::new(|b| {
                b.annotate("io.siloc.rootfs.layers", "/a,/b");
            }),
            "io.siloc.rootfs.layers",
        ),
        (
            "non-empty root.path",
            Box::new(|b| {
                std::fs::write(b.dir.join("rootfs/file"), "x").unwrap();
            }),
            "must be an empty directory",
        ),
        (
            "missing upper parent",
            Box::new(|b| {
                b.annotate("io.siloc.rootfs.upper", "/nonexistent/parent/upper");
            }),
            "io.siloc.rootfs.upper",
        ),
        (
            "upper dir inside root.path",
            Box::new(|b| {
                let up = b.dir.join("rootfs/up");
                b.annotate("io.siloc.rootfs.upper", up.to_str().unwrap());
            }),
            "overlaps root.path",
        ),
        (
            "filesystem that cannot be idmapped",
            Box::new(|b| {
                b.annotate("io.siloc.rootfs.layers", r#"["/sys/kernel"]"#);
            }),
            "cannot be idmapped",
        ),
        (
            "bad userns size",
            Box::new(|b| {
                b.annotate("io.siloc.userns.size", "0");
            }),
            "io.siloc.userns.size",
        ),
        (
            // The spec's /dev/pts has gid=5: 1 ID maps container ID 0 only.
            "userns size below a mount's gid",
            Box::new(|b| {
                b.annotate("io.siloc.userns.size", "1");
            }),
            "annotation io.siloc.userns.size: 1 IDs map container IDs 0..=0, but the spec's mount /dev/pts option gid=5",
        ),
    ];
    for (i, (what, edit, needle)) in cases.iter().enumerate() {
        let mut b = layered_bundle(&env, &format!("b{i}"), &layers, &["true"]);
        edit(&mut b);
        let (ok, _, err) =
            env.detached(&["create", "--bundle", b.path(), &env.id(&format!("bad{i}"))]);
        assert!(!ok, "{what}: create should fail");
        assert!(err.contains(needle), "{what}: {err}");
        assert!(
            env.leftovers().is_empty(),
            "{what}: left {:?}",
            env.leftovers()
        );
        assert_eq!(mounts_at(&b.dir.join("rootfs")), 0, "{what}");
        let made: Vec<_> = std::fs::read_dir(b.dir.join("rootfs"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n != "file")
            .collect();
        assert!(made.is_empty(), "{what}: left in root.path: {made:?}");
    }
    // The layers are untouched.
    assert_eq!(
        std::fs::metadata(layers[0].join("bin/busybox"))
            .unwrap()
            .uid(),
        0
    );
}

#[test]
fn pool_exhaustion_is_a_clear_error() {
    needs_root!();
    let env = TestEnv::with_config("[userns]\npool_start = 200000\npool_size = 131072\n");
    let layers = make_layers(&env, 0);
    let b: Vec<Bundle> = (0..3)
        .map(|i| layered_bundle(&env, &format!("b{i}"), &layers, &["sleep", "100"]))
        .collect();
    let _c0 = Container::create(&env, &b[0], &env.id("x0"));
    let _c1 = Container::create(&env, &b[1], &env.id("x1"));
    let (ok, _, err) = env.detached(&["create", "--bundle", b[2].path(), &env.id("x2")]);
    assert!(!ok);
    assert!(err.contains("ID pool exhausted"), "{err}");
    assert_eq!(mounts_at(&b[2].dir.join("rootfs")), 0);
    assert!(!env.data.join("containers").join(env.id("x2")).exists());
}

#[test]
fn hundred_parallel_creates_never_overlap() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 1);
    let n = 100;
    let bundles: Vec<Bundle> = (0..n)
        .map(|i| layered_bundle(&env, &format!("b{i}"), &layers, &["sleep", "1000"]))
        .collect();
    let ids: Vec<String> = (0..n).map(|i| env.id(&format!("p{i}"))).collect();
    let children: Vec<std::process::Child> = bundles
        .iter()
        .zip(&ids)
        .map(|(b, id)| {
            env.cmd(&["create", "--bundle", b.path(), id])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let mut ranges: Vec<(u32, u32)> = ids
        .iter()
        .map(|id| {
            let (u, _, s) = range_of(&env, id);
            (u, s)
        })
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].0 + w[0].1 <= w[1].0, "overlap: {:?} {:?}", w[0], w[1]);
    }
    for id in &ids {
        env.ok(&["delete", "--force", id]);
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A create killed at each point of prepare (and just before and after libcontainer)
/// leaves state that `delete --force` removes completely.
#[test]
fn delete_force_cleans_up_after_a_crashed_create() {
    needs_root!();
    needs_test_hooks!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 1);
    for point in [
        "after-idpool",
        "after-upper",
        "after-mount",
        "before-libcontainer",
        "after-libcontainer",
    ] {
        let b = layered_bundle(&env, point, &layers, &["sleep", "1000"]);
        let id = env.id(point);
        let status = env
            .cmd(&["create", "--bundle", b.path(), &id])
            .env("SILOC_TEST_CRASH_AT", point)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "{point}: create should have been killed");
        assert!(
            !env.leftovers().is_empty(),
            "{point}: the crash should leave state"
        );
        env.ok(&["delete", "--force", &id]);
        assert!(
            env.leftovers().is_empty(),
            "{point}: left {:?}",
            env.leftovers()
        );
        assert_eq!(mounts_at(&b.dir.join("rootfs")), 0, "{point}");
    }
}

/// Layers on two filesystems: one detached, idmapped tree per filesystem, still one
/// attached mount; the annotation reports it.
#[test]
fn layers_on_two_filesystems() {
    needs_root!();
    let env = TestEnv::new();
    let mut layers = make_layers(&env, 1);
    let tmp = env.dir.path().join("tmpfs");
    std::fs::create_dir_all(&tmp).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &tmp,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    let on_tmpfs = tmp.join("top");
    std::fs::create_dir_all(on_tmpfs.join("etc")).unwrap();
    std::fs::write(on_tmpfs.join("etc/top"), "tmpfs").unwrap();
    layers.push(on_tmpfs);
    let b = layered_bundle(&env, "b", &layers, &["sleep", "1000"]);
    let id = env.id("twofs");
    let c = Container::start(&env, &b, &id);
    let (_, out, _) = c.exec(&["sh", "-c", "cat /etc/top; stat -c %u /etc/top"]);
    let asm = env.state(&id)["annotations"]["io.siloc.rootfs.assembly"].clone();
    let root_mounts = container_root_mounts(&env, &id);
    let on_host = mounts_at(&b.dir.join("rootfs"));
    drop(c);
    let _ = nix::mount::umount2(&tmp, nix::mount::MntFlags::MNT_DETACH);
    assert_eq!(out, "tmpfs0\n");
    assert_eq!((root_mounts, on_host), (vec!["overlay".to_string()], 0));
    assert_eq!(
        asm,
        "overlay layers=3 trees=2 idmapped=yes attached=1 via=lowerdir+"
    );
}

/// A plain rootfs on a mount that is idmapped already (by another tool): the kernel
/// will not idmap it twice, and the error says so instead of blaming the filesystem.
#[test]
fn a_rootfs_on_an_idmapped_mount_is_named_as_such() {
    needs_root!();
    let env = TestEnv::new();
    let outer = env.dir.path().join("idmapped");
    let mut b = Bundle::busybox(&outer.join("b"), &["true"]);
    b.annotate("io.siloc.userns", "auto");
    let map = [siloc::userns::IdMap {
        container_id: 0,
        host_id: 3_000_000,
        size: 65536,
    }];
    let ns = siloc::userns::userns_with_mapping(&map, &map).unwrap();
    siloc::rootfs::mount_idmapped_bind(&outer, std::os::fd::AsFd::as_fd(&ns)).unwrap();
    let id = env.id("twice");
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    let _ = nix::mount::umount2(&outer, nix::mount::MntFlags::MNT_DETACH);
    assert!(!ok, "create on an idmapped mount should fail");
    assert!(err.contains("already idmapped"), "{err}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    // An idmapped mount inside the rootfs: the recursive clone takes it along.
    let data = b.dir.join("rootfs/data");
    std::fs::create_dir(&data).unwrap();
    siloc::rootfs::mount_idmapped_bind(&data, std::os::fd::AsFd::as_fd(&ns)).unwrap();
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    let _ = nix::mount::umount2(&data, nix::mount::MntFlags::MNT_DETACH);
    assert!(!ok, "create over an idmapped submount should fail");
    assert!(
        err.contains("already idmapped") && err.contains("/data"),
        "{err}"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A missing process.cwd is made as the container's root (runc does the same): on the
/// layered rootfs it lands in the upper dir with the container's host root IDs.
#[test]
fn a_missing_cwd_belongs_to_the_containers_root() {
    needs_root!();
    let env = TestEnv::new();
    let layers = make_layers(&env, 1);
    let mut b = layered_bundle(&env, "b", &layers, &["sleep", "1000"]);
    b.edit(|s| s["process"]["cwd"] = Value::from("/work/dir"));
    let id = env.id("cwd");
    let c = Container::start(&env, &b, &id);
    let (uid, gid, _) = range_of(&env, &id);
    let (_, out, err) = c.exec(&["sh", "-c", "cd /work/dir && stat -c '%u:%g %a' ."]);
    assert_eq!(out, "0:0 755\n", "{err}");
    let upper = env.data.join("containers").join(&id).join("upper");
    let m = std::fs::metadata(upper.join("work/dir")).unwrap();
    assert_eq!((m.uid(), m.gid()), (uid, gid));
    assert!(
        !layers.iter().any(|l| l.join("work").exists()),
        "a layer changed"
    );
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}
