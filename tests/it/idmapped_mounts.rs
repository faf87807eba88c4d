//! Idmapped bind mounts from the spec (runtime-spec 1.1 `mounts[].uidMappings`/
//! `gidMappings`, options `idmap` and `ridmap`), which libcontainer 0.7 refuses and
//! siloc makes itself (src/idmapped_mounts.rs). Needs root; skips loudly without it.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::TestEnv;
use serde_json::{Value, json};

/// `[{containerID, hostID, size}]`.
fn map(container: u32, host: u32, size: u32) -> Value {
    json!([{"containerID": container, "hostID": host, "size": size}])
}

/// A host directory with `f` in it, both owned by `owner`.
fn source(env: &TestEnv, name: &str, owner: u32) -> std::path::PathBuf {
    let d = env.dir.path().join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("f"), "x").unwrap();
    for p in [&d, &d.join("f")] {
        std::os::unix::fs::chown(p, Some(owner), Some(owner)).unwrap();
    }
    d
}

use common::run;

fn push_mount(b: &mut common::Bundle, m: Value) {
    b.edit(|s| s["mounts"].as_array_mut().unwrap().push(m));
}

#[test]
fn mount_mappings_without_a_user_namespace_relative_destination_and_no_fd_leak() {
    needs_root!();
    let env = TestEnv::new();
    let src = source(&env, "src", 1000);
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "stat -c %u:%g /data/f /plain/f; ls /proc/1/fd; true",
        ],
    );
    let s = src.display().to_string();
    // Relative destination: relative to the rootfs, as runc takes it.
    push_mount(
        &mut b,
        json!({"destination": "data", "type": "bind", "source": s, "options": ["rbind", "idmap"],
               "uidMappings": map(1000, 0, 1), "gidMappings": map(1000, 0, 1)}),
    );
    push_mount(
        &mut b,
        json!({"destination": "/plain", "type": "bind", "source": s, "options": ["rbind"]}),
    );
    let (code, out, err) = run(&env, &b, "idm");
    assert_eq!(code, 0, "{err}");
    // On-disk 1000 shows as 0 through the mount; the plain bind still shows 1000.
    // The init (sh, pid 1) holds stdio only: no mount fd reached the container.
    assert_eq!(out, "0:0\n1000:1000\n0\n1\n2\n", "{err}");
    assert!(err.contains("is not absolute"), "runc's warning: {err}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn idmap_takes_the_container_user_namespace_and_unreachable_sources_are_staged() {
    needs_root!();
    let env = TestEnv::new();
    let src = source(&env, "src", 0);
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "stat -c %u:%g /data/f /plain/f && touch /data/new && stat -c %u /data/new",
        ],
    );
    let s = src.display().to_string();
    // The container's root cannot make mount points in a rootfs host root owns.
    for d in ["data", "plain"] {
        std::fs::create_dir_all(b.dir.join("rootfs").join(d)).unwrap();
    }
    b.edit(|s| {
        let ns = s["linux"]["namespaces"].as_array_mut().unwrap();
        ns.push(json!({"type": "user"}));
        s["linux"]["uidMappings"] = map(0, 200000, 65536);
        s["linux"]["gidMappings"] = map(0, 200000, 65536);
    });
    push_mount(
        &mut b,
        json!({"destination": "/data", "type": "bind", "source": s, "options": ["rbind", "idmap"]}),
    );
    push_mount(
        &mut b,
        json!({"destination": "/plain", "type": "bind", "source": s, "options": ["rbind"]}),
    );
    let (code, out, err) = run(&env, &b, "idu");
    assert_eq!(code, 0, "{err}");
    // Host root's files are the container root's through the idmapped mount; through
    // the plain bind they are unmapped (the overflow ID).
    assert_eq!(out, "0:0\n65534:65534\n0\n", "{err}");
    // The container root's write lands on disk as host 0 (the mapping undone).
    assert_eq!(std::fs::metadata(src.join("new")).unwrap().uid(), 0);
}

#[test]
fn ridmap_maps_submounts_and_idmap_does_not() {
    needs_root!();
    let env = TestEnv::new();
    let src = source(&env, "src", 1000);
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let mut b = env.bundle(
        "b",
        &["sh", "-c", "stat -c %u /top/sub /rec/sub /top/f /rec/f"],
    );
    let s = src.display().to_string();
    for (dest, opt) in [("/top", "idmap"), ("/rec", "ridmap")] {
        push_mount(
            &mut b,
            json!({"destination": dest, "type": "bind", "source": s, "options": ["rbind", opt],
                   "uidMappings": map(1000, 0, 1), "gidMappings": map(1000, 0, 1)}),
        );
    }
    // The submount exists only in this private mount namespace.
    let script = format!(
        "mount -t tmpfs -o uid=1000,gid=1000 tmpfs {s}/sub && exec {} --root {} --config {} \
         run --bundle {} {}",
        common::siloc_bin().display(),
        env.root.display(),
        env.config.display(),
        b.path(),
        env.id("rid")
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "1000\n0\n0\n0\n",
        "{err}"
    );
}

#[test]
fn a_source_under_an_earlier_mount_is_resolved_through_it() {
    needs_root!();
    let env = TestEnv::new();
    let src = source(&env, "src", 1000);
    let mut b = env.bundle("b", &["stat", "-c", "%u", "/other/f"]);
    let rootfs = b.dir.join("rootfs");
    push_mount(
        &mut b,
        json!({"destination": "/vol", "type": "bind", "source": src.display().to_string(),
               "options": ["rbind"]}),
    );
    // In the rootfs, /vol/f is only there once mounts[N-1] is made.
    assert!(!rootfs.join("vol/f").exists());
    push_mount(
        &mut b,
        json!({"destination": "/other", "type": "bind",
               "source": rootfs.join("vol").display().to_string(),
               "options": ["rbind", "idmap"],
               "uidMappings": map(1000, 0, 1), "gidMappings": map(1000, 0, 1)}),
    );
    let (code, out, err) = run(&env, &b, "order");
    assert_eq!((code, out.as_str()), (0, "0\n"), "{err}");
}

#[test]
fn bad_idmapped_mounts_are_refused_by_name_and_leave_nothing() {
    needs_root!();
    let env = TestEnv::new();
    let tmpfs = |b: &mut common::Bundle| {
        push_mount(
            b,
            json!({"destination": "/t", "type": "tmpfs", "source": "tmpfs", "options": ["idmap"],
                   "uidMappings": map(0, 1000, 1), "gidMappings": map(0, 1000, 1)}),
        )
    };
    let no_userns = |b: &mut common::Bundle| {
        push_mount(
            b,
            json!({"destination": "/t", "type": "bind", "source": "/tmp", "options": ["rbind", "idmap"]}),
        )
    };
    let under_tmpfs = |b: &mut common::Bundle| {
        let inside = b.dir.join("rootfs/t/sub").display().to_string();
        push_mount(
            b,
            json!({"destination": "/t", "type": "tmpfs", "source": "tmpfs"}),
        );
        push_mount(
            b,
            json!({"destination": "/u", "type": "bind", "source": inside, "options": ["rbind"],
                   "uidMappings": map(0, 1000, 1), "gidMappings": map(0, 1000, 1)}),
        );
    };
    type Edit<'a> = &'a dyn Fn(&mut common::Bundle);
    let cases: [(&str, Edit, &str); 3] = [
        (
            "tmpfs",
            &tmpfs,
            "idmapped mounts are only supported for bind mounts",
        ),
        (
            "nouserns",
            &no_userns,
            "takes the container's user namespace",
        ),
        ("under", &under_tmpfs, "(tmpfs at /t)"),
    ];
    for (name, edit, want) in cases {
        let mut b = env.bundle(name, &["true"]);
        edit(&mut b);
        let id = env.id(name);
        let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
        assert!(!ok && err.contains(want), "{name}: {err}");
        assert!(env.leftovers().is_empty(), "{name}: {:?}", env.leftovers());
        assert!(common::traces_of(&id).is_empty(), "{name}");
    }
    assert!(!Path::new("/proc/self/mountinfo").exists() || env.leftovers().is_empty());
}
