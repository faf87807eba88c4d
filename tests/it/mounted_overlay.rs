//! A bundle whose root.path is already an overlayfs mount, as containerd's runc shim
//! (BinaryName = siloc) and podman hand it over (issue 16, item 2). With
//! `io.siloc.userns=auto` siloc refuses at once, naming its shim, and leaves nothing;
//! without a user namespace the container runs as before. The overlay is mounted in a
//! private mount namespace (`unshare -m --propagation private`) that siloc runs in, so
//! the host's mount table never changes. Needs root; skips loudly without it.

use crate::common;

use std::process::Command;

use common::{Bundle, TestEnv};

/// Runs `siloc <args>` (each line of `then` after it, with `$S` = siloc with the
/// env's root and config) in a private mount namespace where `bundle`'s rootfs is an
/// overlay of a busybox layer; returns (status, stdout, stderr).
fn in_overlay_ns(env: &TestEnv, bundle: &Bundle, script: &str) -> (i32, String, String) {
    let d = env.dir.path();
    let lower = d.join("lower");
    common::make_busybox_rootfs(&lower);
    for sub in ["upper", "work"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    let siloc = env.siloc_sh();
    let full = format!(
        "set -e; mount -t overlay overlay -o lowerdir={l},upperdir={u},workdir={w} {r}; S=\"{siloc}\"; {script}",
        l = lower.display(),
        u = d.join("upper").display(),
        w = d.join("work").display(),
        r = bundle.dir.join("rootfs").display(),
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &full])
        .output()
        .expect("unshare");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_mounted_overlay_with_userns_auto_is_refused_naming_the_shim() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("ovl-userns");
    let mut b = Bundle::with_rootfs(&env.dir.path().join("b"), &["true"]);
    b.annotate("io.siloc.userns", "auto");
    let (rc, out, err) = in_overlay_ns(&env, &b, &format!("$S create --bundle {} {id}", b.path()));
    assert_ne!(rc, 0, "create should fail: {out}{err}");
    assert!(
        err.contains("already an overlay mount")
            && err.contains("containerd-shim-siloc-v2")
            && err.contains("podman --uidmap"),
        "{err}"
    );
    assert!(
        !err.contains("EINVAL"),
        "the refusal comes before mount_setattr: {err}"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn a_mounted_overlay_without_userns_runs_as_before() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("ovl-plain");
    let b = Bundle::with_rootfs(
        &env.dir.path().join("b"),
        &["sh", "-c", "echo hi-from-overlay"],
    );
    let (rc, out, err) = in_overlay_ns(&env, &b, &format!("$S run --bundle {} {id}", b.path()));
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains("hi-from-overlay"), "{out}{err}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A pod's own `io.siloc.rootfs.layers` that reaches siloc through containerd's runc
/// shim: root.path is the (here empty) image mount, and the annotation names a host
/// directory. Before the check the container read that directory's files as its root.
#[test]
fn layer_annotations_over_a_mounted_root_path_are_refused() {
    needs_root!();
    let env = TestEnv::new();
    let id = env.id("ovl-layers");
    let host_dir = env.dir.path().join("host-dir");
    common::make_busybox_rootfs(&host_dir);
    std::fs::write(host_dir.join("secret"), "host-secret-data\n").unwrap();
    let mut b = Bundle::with_rootfs(&env.dir.path().join("b"), &["cat", "/secret"]);
    b.annotate(
        "io.siloc.rootfs.layers",
        &serde_json::json!([host_dir]).to_string(),
    );
    let script = format!(
        "set -e; mount -t tmpfs image {r}; {s} --root {root} --config {cfg} run --bundle {b} {id}",
        r = b.dir.join("rootfs").display(),
        s = common::siloc_bin().display(),
        root = env.root.display(),
        cfg = env.config.display(),
        b = b.path(),
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(!o.status.success(), "run should fail: {out}{err}");
    assert!(!out.contains("host-secret-data"), "{out}");
    assert!(
        err.contains("already a tmpfs mount")
            && err.contains("io.siloc.rootfs.layers")
            && err.contains("containerd-shim-siloc-v2"),
        "{err}"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}
