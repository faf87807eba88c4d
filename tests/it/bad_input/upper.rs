//! Bad layers and upper dirs: overlapping layers, and persistent upper dirs that
//! overlap siloc's roots or another container's, refused before anything changes.

use super::fails_cleanly;
use crate::common::{self, Container, TestEnv, traces_of};

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
        assert!(!env.pool_holders().contains(&id), "{name}: range kept");
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
