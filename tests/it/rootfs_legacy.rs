//! The mount(2) path of rootfs assembly (kernels without overlayfs `lowerdir+`), forced
//! on this kernel with SILOC_OVERLAY_LEGACY=1: layers in detached, idmapped trees, the
//! overlay built in a helper's private mount namespace, one mount attached. The VM
//! suite (integration/vm.sh) runs the same path for real on Linux 6.1.

use crate::common;

use common::{Bundle, Container, TestEnv, make_busybox_rootfs, mounts_under};

#[test]
fn legacy_path_layers_under_userns() {
    needs_root!();
    let env = TestEnv::new();
    // The layers sit on a shared mount, as under systemd: open_tree clones of it are
    // its peers, so anything mounted on them would reach the host.
    let shared = env.dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let s = shared.to_str().unwrap();
    assert!(run_ok("mount", &["--bind", s, s]) && run_ok("mount", &["--make-shared", s]));
    let layers = shared.join("layers");
    make_busybox_rootfs(&layers.join("0"));
    for i in 1..5 {
        let d = layers.join(i.to_string()).join("etc");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("marker"), format!("{i}\n")).unwrap();
    }
    let list: Vec<String> = (0..5)
        .map(|i| layers.join(i.to_string()).display().to_string())
        .collect();
    let mut b = Bundle::with_rootfs(
        &env.dir.path().join("b"),
        &[
            "sh",
            "-c",
            "cat /etc/marker; stat -c %u /bin/busybox; touch /w && echo written; exec sleep 1000",
        ],
    );
    b.annotate(
        "io.siloc.rootfs.layers",
        &serde_json::to_string(&list).unwrap(),
    );
    b.annotate("io.siloc.userns", "auto");
    b.edit(|s| s["root"]["readonly"] = false.into());
    let id = env.id("legacy");
    let out = env.dir.path().join("out");
    let status = env
        .cmd(&["create", "--bundle", b.path(), &id])
        .env("SILOC_OVERLAY_LEGACY", "1")
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::inherit())
        .status()
        .unwrap();
    assert!(status.success(), "create on the legacy path failed");
    let c = Container {
        env: &env,
        id: id.clone(),
    };
    env.ok(&["start", &id]);
    // The rootfs is attached in the namespace the container was created from, so the
    // host's mount table shows nothing; the container's shows the overlay as "/".
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    let mi = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let line = mi
        .lines()
        .find(|l| l.split(' ').nth(4) == Some("/"))
        .unwrap();
    assert!(
        line.contains("lowerdir=/proc/self/fd/"),
        "not the legacy path: {line}"
    );
    // Nothing on the host but the test's own bind mount: neither the detached trees nor
    // the overlay, nor anything propagated from them.
    assert_eq!(mounts_under(env.dir.path()), vec![s.to_string()]);
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut text = String::new();
    while std::time::Instant::now() < end {
        text = std::fs::read_to_string(&out).unwrap_or_default();
        // The last line comes after the write, so the upper dir is checked only then.
        if text.lines().count() >= 3 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(text, "4\n0\nwritten\n", "container view of the layers");
    let written = env.data.join("containers").join(&id).join("upper/w");
    assert!(
        std::fs::metadata(&written).is_ok(),
        "write did not land in the upper dir"
    );
    drop(c);
    assert_eq!(mounts_under(env.dir.path()), vec![s.to_string()]);
    let _ = nix::mount::umount2(&shared, nix::mount::MntFlags::MNT_DETACH);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

fn run_ok(cmd: &str, args: &[&str]) -> bool {
    std::process::Command::new(cmd)
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}
