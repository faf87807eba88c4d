//! `siloc image` end to end: OCI layouts unpacked into the layer store, bundles made
//! from them, containers run from those bundles under a per-container user namespace.
//! The merged rootfs a container sees is compared with the image flattened layer by
//! layer (tests/common/oci.rs). Needs root; the Debian test also needs the Debian
//! mirror once (hack/images caches the debootstrap tree) and skips loudly without it.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::oci::{self, Comp, Entry, Tar};
use common::{Container, TestEnv};
use serde_json::Value;

/// Builds (or reuses) a hack/images image; `None` (with a SKIPPED line) when the
/// script skips because the Debian mirror is unreachable (exit status 77).
fn hack_image(name: &str) -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/images");
    let out = Command::new("bash")
        .arg(&script)
        .args(["path", name])
        .output()
        .expect("run hack/images");
    if out.status.code() == Some(77) {
        eprintln!(
            "SKIPPED: hack/images {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    assert!(
        out.status.success(),
        "hack/images {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(path.join("index.json").is_file(), "{}", path.display());
    Some(path)
}

/// The fixture image: a busybox base (gzip), a layer with every kind of entry
/// (zstd), a layer that deletes a file and a directory, makes a directory opaque and
/// replaces files by directories and back (uncompressed), and a layer deleting from
/// the base and from the layer below it (gzip).
fn fixture_layers(env: &TestEnv) -> Vec<(Vec<u8>, Comp)> {
    let bb = env.dir.path().join("busybox-root");
    common::make_busybox_rootfs(&bb);
    let mut base = Tar::new();
    base.add_tree(&bb);
    let mut l2 = Tar::new();
    l2.add([
        Entry::dir("srv"),
        Entry::dir("srv/owned").owner(1000, 1000).mode(0o750),
        Entry::file("srv/owned/secret", b"s3cret")
            .owner(1000, 1000)
            .mode(0o600),
        Entry::file("srv/suid", b"#!/bin/sh\n")
            .mode(0o4755)
            .owner(0, 42),
        Entry::file("srv/sgid", b"g").mode(0o2750).owner(0, 42),
        Entry::dir("srv/sticky").mode(0o1777),
        Entry::file("srv/xattr", b"x").xattr("user.siloc.test", b"kept"),
        Entry::file("srv/hard-a", b"one inode, two names").mtime(1_234_567_890),
        Entry::link("srv/hard-b", "srv/hard-a"),
        Entry::symlink("srv/rel-link", "owned/secret"),
        Entry::symlink("srv/abs-link", "/etc/passwd").mtime(1_111_111_111),
        Entry::symlink("srv/dangling", "/nowhere"),
        Entry::dir("devs"),
        Entry::char_dev("devs/null", 1, 3),
        Entry::block_dev("devs/loop7", 7, 7),
        Entry::fifo("devs/fifo"),
        Entry::file("srv/doomed-file", b"deleted by layer 3"),
        Entry::dir("srv/doomed-dir"),
        Entry::file("srv/doomed-dir/inner", b"gone"),
        Entry::dir("srv/opaque"),
        Entry::file("srv/opaque/old", b"hidden by layer 3"),
        Entry::file("srv/opaque/same-name", b"old"),
        Entry::dir("srv/becomes-file"),
        Entry::file("srv/becomes-file/child", b"x"),
        Entry::file("srv/becomes-dir", b"a file first"),
        Entry::file("srv/overwritten", b"version 1"),
        Entry::dir("home").mode(0o755),
        Entry::dir("home/app").owner(1000, 1000).mode(0o700),
        Entry::file("home/app/.profile", b"# app").owner(1000, 1000),
    ]);
    let mut l3 = Tar::new();
    l3.add([
        Entry::dir("srv"),
        Entry::whiteout("srv/doomed-file"),
        Entry::whiteout("srv/doomed-dir"),
        Entry::dir("srv/opaque"),
        Entry::opaque("srv/opaque"),
        Entry::file("srv/opaque/same-name", b"new"),
        Entry::file("srv/opaque/added", b"added"),
        Entry::file("srv/becomes-file", b"now a file"),
        Entry::dir("srv/becomes-dir").mode(0o700),
        Entry::file("srv/becomes-dir/child", b"c"),
        Entry::file("srv/overwritten", b"version 2, longer")
            .mode(0o640)
            .owner(33, 33),
        Entry::file("srv/short-lived", b"deleted by layer 4"),
    ]);
    let mut l4 = Tar::new();
    l4.add([
        Entry::dir("bin"),
        Entry::whiteout("bin/vi"),
        Entry::dir("srv"),
        Entry::whiteout("srv/short-lived"),
    ]);
    vec![
        (base.bytes(), Comp::Gzip),
        (l2.bytes(), Comp::Zstd),
        (l3.bytes(), Comp::None),
        (l4.bytes(), Comp::Gzip),
    ]
}

fn fixture_layout(env: &TestEnv) -> PathBuf {
    let dir = env.dir.path().join("fixture");
    oci::write_layout(
        &dir,
        &fixture_layers(env),
        serde_json::json!({"Cmd": ["sh"], "Env": ["PATH=/bin"], "WorkingDir": "/srv",
                           "Labels": {"org.example.purpose": "siloc test"}}),
        "localhost/siloc-test/fixture:v1",
    );
    dir
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).expect("read")).expect("json")
}

/// Lets the listing read every file, whoever owns it (the default spec keeps only
/// three capabilities).
fn grant_read_caps(bundle: &Path) {
    let path = bundle.join("config.json");
    let mut spec = read_json(&path);
    for set in ["bounding", "effective", "permitted"] {
        let caps = spec["process"]["capabilities"][set]
            .as_array_mut()
            .expect("caps");
        caps.push("CAP_DAC_OVERRIDE".into());
        caps.push("CAP_DAC_READ_SEARCH".into());
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&spec).expect("json")).expect("write");
}

/// Runs `bundle` in the foreground; returns stdout, panicking with stderr on failure.
fn run(env: &TestEnv, bundle: &Path, name: &str) -> String {
    let b = bundle.to_str().expect("utf-8");
    let o = env.siloc(&["run", "--bundle", b, &env.id(name)]);
    assert!(
        o.status.success(),
        "run {name}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Lists the merged rootfs inside a container of `image` and compares it with the
/// flattened `layout`. Returns the listing's link counts.
fn assert_merged_equals_flattened(
    env: &TestEnv,
    image: &str,
    layout: &Path,
    store: &[&str],
) -> BTreeMap<String, u64> {
    let b = env
        .dir
        .path()
        .join(format!("list-{}", image.replace(['/', ':'], "_")));
    let mut args = vec!["image", "bundle"];
    args.extend_from_slice(store);
    args.extend([
        image,
        b.to_str().expect("utf-8"),
        "--",
        "sh",
        "-c",
        oci::LIST_SCRIPT,
    ]);
    env.ok(&args);
    grant_read_caps(&b);
    let out = run(env, &b, "list");
    let (seen, nlink) = oci::parse_listing(&out);
    let want = oci::flatten(oci::layer_readers(layout));
    let diffs = oci::differences(&want, &seen);
    assert!(
        diffs.is_empty(),
        "{} differences, first ones:\n{}",
        diffs.len(),
        diffs[..diffs.len().min(20)].join("\n")
    );
    assert!(want.len() > 10, "{} paths", want.len());
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
    nlink
}

#[test]
fn merged_rootfs_equals_the_flattened_fixture_image() {
    needs_root!();
    let env = TestEnv::new();
    let layout = fixture_layout(&env);
    let out = env.ok(&["image", "unpack", layout.to_str().expect("utf-8")]);
    assert!(out.contains("4 unpacked"), "{out}");
    let nlink = assert_merged_equals_flattened(&env, "fixture:v1", &layout, &[]);
    assert_eq!(nlink.get("/srv/hard-b"), Some(&2), "hard link kept");
    // what the layers deleted is gone, what they replaced is new
    let want = oci::flatten(oci::layer_readers(&layout));
    for gone in [
        "/srv/doomed-file",
        "/srv/doomed-dir",
        "/srv/doomed-dir/inner",
        "/srv/opaque/old",
        "/srv/short-lived",
        "/bin/vi",
        "/srv/becomes-file/child",
    ] {
        assert!(!want.contains_key(gone), "{gone} in the flattened image");
    }
    assert!(want.contains_key("/srv/opaque/added") && want.contains_key("/bin/sh"));
    // the store holds overlayfs' forms and the pax xattr
    let store = env.data.join("store");
    let ls: Value =
        serde_json::from_str(&env.ok(&["image", "ls", "--format", "json"])).expect("json");
    let dirs: Vec<PathBuf> = ls[0]["layer_dirs"]
        .as_array()
        .expect("layer_dirs")
        .iter()
        .map(|d| PathBuf::from(d.as_str().expect("path")))
        .collect();
    assert_eq!(dirs.len(), 4);
    assert!(dirs.iter().all(|d| d.starts_with(store.join("layers"))));
    let m = std::fs::symlink_metadata(dirs[2].join("srv/doomed-dir")).expect("whiteout");
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &m.file_type()
    ));
    assert_eq!(std::os::unix::fs::MetadataExt::rdev(&m), 0);
    assert_eq!(
        xattr::get(dirs[2].join("srv/opaque"), "trusted.overlay.opaque").expect("xattr"),
        Some(b"y".to_vec())
    );
    assert_eq!(
        xattr::get(dirs[1].join("srv/xattr"), "user.siloc.test").expect("xattr"),
        Some(b"kept".to_vec())
    );
}

#[test]
fn unpacking_twice_does_no_work_and_bundle_follows_the_image_config() {
    needs_root!();
    let env = TestEnv::new();
    let layout = fixture_layout(&env);
    let store = env.dir.path().join("my-store");
    let s = store.to_str().expect("utf-8");
    let l = format!("{}:v1", layout.display());
    env.ok(&["image", "unpack", "--store", s, "--jobs", "3", &l]);
    // the layer blobs are not read again: remove them and unpack once more
    for e in std::fs::read_dir(layout.join("blobs/sha256"))
        .expect("blobs")
        .flatten()
    {
        if std::fs::metadata(e.path()).expect("stat").len() > 2000 {
            std::fs::remove_file(e.path()).expect("rm blob");
        }
    }
    let out = env.ok(&["image", "unpack", "--store", s, &l]);
    assert!(
        out.contains("all 4 already stored") && out.contains("image unchanged"),
        "{out}"
    );
    let b = env.dir.path().join("bundle");
    env.ok(&[
        "image",
        "bundle",
        "--store",
        s,
        "siloc-test/fixture:v1",
        b.to_str().expect("utf-8"),
    ]);
    let spec = read_json(&b.join("config.json"));
    assert_eq!(spec["process"]["args"], serde_json::json!(["sh"]));
    assert_eq!(spec["process"]["cwd"], "/srv");
    assert_eq!(spec["process"]["terminal"], false);
    assert!(
        spec["process"]["env"]
            .as_array()
            .expect("env")
            .contains(&Value::from("PATH=/bin"))
    );
    assert_eq!(spec["root"]["readonly"], false);
    assert_eq!(spec["annotations"]["io.siloc.userns"], "auto");
    assert_eq!(spec["annotations"]["org.example.purpose"], "siloc test");
    let layers: Vec<PathBuf> = serde_json::from_str(
        spec["annotations"]["io.siloc.rootfs.layers"]
            .as_str()
            .expect("layers"),
    )
    .expect("layer list");
    assert_eq!(layers.len(), 4);
    assert!(
        layers
            .iter()
            .all(|p| p.starts_with(store.join("layers")) && p.is_dir())
    );
    assert_eq!(
        std::fs::read_dir(b.join("rootfs")).expect("rootfs").count(),
        0
    );
    // the bundle runs: the working dir and a file of layer 3 are there
    let b2 = env.dir.path().join("bundle2");
    env.ok(&[
        "image",
        "bundle",
        "--store",
        s,
        "fixture:v1",
        b2.to_str().expect("utf-8"),
        "--",
        "sh",
        "-c",
        "pwd; cat /srv/opaque/same-name; echo; cat /proc/self/uid_map",
    ]);
    let out = run(&env, &b2, "cfg");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "/srv");
    assert_eq!(lines[1], "new", "layer 3 replaced it");
    assert!(
        !lines[2].split_whitespace().eq(["0", "0", "4294967295"]),
        "a user namespace: {}",
        lines[2]
    );
    // a second bundle into the same dir is refused, the first is untouched
    let err = env.fails(&[
        "image",
        "bundle",
        "--store",
        s,
        "fixture:v1",
        b.to_str().expect("utf-8"),
    ]);
    assert!(
        err.contains("config.json") && err.contains("exists"),
        "{err}"
    );
}

#[test]
fn debian_image_runs_apt_and_dpkg_under_a_user_namespace_and_equals_its_layers() {
    needs_root!();
    let Some(layout) = hack_image("debian") else {
        return;
    };
    let env = TestEnv::new();
    let out = env.ok(&["image", "unpack", layout.to_str().expect("utf-8")]);
    assert!(
        out.contains("localhost/siloc/debian:latest") && out.contains("4 layers"),
        "{out}"
    );
    let b = env.dir.path().join("apt");
    env.ok(&[
        "image",
        "bundle",
        "debian",
        b.to_str().expect("utf-8"),
        "--",
        "sh",
        "-c",
        "apt-get --version | head -n1; dpkg -l | grep '^ii  dpkg '; id -u; cat /proc/self/uid_map",
    ]);
    assert_eq!(
        read_json(&b.join("config.json"))["annotations"]["io.siloc.userns"],
        "auto"
    );
    let out = run(&env, &b, "apt");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("apt 2."), "{out}");
    assert!(lines[1].starts_with("ii  dpkg "), "{out}");
    assert_eq!(lines[2], "0", "root inside");
    let map: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(map[0], "0");
    assert!(
        map[1] != "0" && map[2] == "65536",
        "mapped to a host range: {}",
        lines[3]
    );
    // whiteouts and the opaque directory of the cleanup layer are honoured
    assert_merged_equals_flattened(&env, "debian", &layout, &[]);
}

#[test]
fn fifty_layers_unpack_in_parallel_and_the_last_writer_wins() {
    needs_root!();
    let Some(layout) = hack_image("layers50") else {
        return;
    };
    let env = TestEnv::new();
    let out = env.ok(&[
        "image",
        "unpack",
        "--jobs",
        "3",
        layout.to_str().expect("utf-8"),
    ]);
    assert!(out.contains("50 layers"), "{out}");
    let b = env.dir.path().join("b");
    env.ok(&[
        "image",
        "bundle",
        "layers50",
        b.to_str().expect("utf-8"),
        "--",
        "sh",
        "-c",
        "for i in 0 1 2 3 4 5 6 7; do cat /shared/f$i; done; ls /layers/24 /layers/49 /layers/50",
    ]);
    let out = run(&env, &b, "l50");
    for i in 0..8u32 {
        let last = (2..=50u32).filter(|k| k % 8 == i).max().expect("writer");
        assert!(
            out.contains(&format!("written by layer {last}\n")),
            "f{i}: {out}"
        );
    }
    // layer 25 deleted /layers/24/b, layer 50 deleted /layers/49/b
    assert!(
        out.contains("/layers/24:\na\n") && out.contains("/layers/49:\na\n"),
        "{out}"
    );
    assert!(out.contains("/layers/50:\na\nb\n"), "{out}");
}

#[test]
fn rm_refuses_layers_of_a_live_container_and_then_frees_them() {
    needs_root!();
    let Some(layout) = hack_image("busybox") else {
        return;
    };
    let env = TestEnv::new();
    env.ok(&["image", "unpack", layout.to_str().expect("utf-8")]);
    let fixture = fixture_layout(&env);
    env.ok(&["image", "unpack", fixture.to_str().expect("utf-8")]);
    let b = env.dir.path().join("b");
    env.ok(&[
        "image",
        "bundle",
        "siloc/busybox",
        b.to_str().expect("utf-8"),
        "--",
        "sleep",
        "1000",
    ]);
    let id = env.id("rm");
    let bundle = common::Bundle {
        dir: b.clone(),
        spec: read_json(&b.join("config.json")),
    };
    let c = Container::create(&env, &bundle, &id);
    let err = env.fails(&["image", "rm", "busybox"]);
    assert!(
        err.contains(&id) && err.contains("delete the container first"),
        "{err}"
    );
    let layers = env.ok(&["image", "ls", "--layers"]);
    assert!(layers.contains(&id), "{layers}");
    assert!(
        env.ok(&["image", "ls", "-q"])
            .contains("localhost/siloc/busybox:latest")
    );
    // another image can go meanwhile
    let out = env.ok(&["image", "rm", "siloc-test/fixture:v1"]);
    assert!(out.contains("removed 4 layers"), "{out}");
    env.ok(&["delete", "--force", &id]);
    drop(c);
    let out = env.ok(&["image", "rm", "busybox"]);
    assert!(
        out.contains("removed image localhost/siloc/busybox:latest")
            && out.contains("removed 1 layers"),
        "{out}"
    );
    assert_eq!(env.ok(&["image", "ls", "--layers", "-q"]).trim(), "");
    assert_eq!(
        std::fs::read_dir(env.data.join("store/layers"))
            .expect("layers")
            .count(),
        0
    );
    assert_eq!(
        std::fs::read_dir(env.data.join("store/tmp"))
            .expect("tmp")
            .count(),
        0
    );
}

#[test]
fn bad_input_fails_clearly_and_leaves_nothing() {
    needs_root!();
    let env = TestEnv::new();
    let store = env.data.join("store");
    let err = env.fails(&["image", "unpack", "/nonexistent/layout"]);
    assert!(
        err.contains("/nonexistent/layout") && err.contains("not an OCI image layout"),
        "{err}"
    );
    let layout = fixture_layout(&env);
    let l = layout.to_str().expect("utf-8");
    let err = env.fails(&["image", "unpack", &format!("{l}:v9")]);
    assert!(
        err.contains("no manifest is tagged")
            && err.contains("v9")
            && err.contains("localhost/siloc-test/fixture:v1"),
        "{err}"
    );
    // a layer blob whose bytes do not match its digest
    let index = read_json(&layout.join("index.json"));
    let blob = |d: &Value| {
        layout
            .join("blobs/sha256")
            .join(d.as_str().expect("digest").trim_start_matches("sha256:"))
    };
    let manifest = read_json(&blob(&index["manifests"][0]["digest"]));
    let bad = blob(&manifest["layers"][2]["digest"]);
    let mut bytes = std::fs::read(&bad).expect("blob");
    bytes[6 * 512] ^= 0x55; // content of srv/opaque/same-name: the tar still reads
    std::fs::write(&bad, bytes).expect("write blob");
    let err = env.fails(&["image", "unpack", "--jobs", "1", l]);
    assert!(
        err.contains("digest mismatch") && err.contains(&bad.display().to_string()),
        "{err}"
    );
    let diff_ids = read_json(&blob(&manifest["config"]["digest"]))["rootfs"]["diff_ids"].clone();
    let bad_layer = store.join("layers").join(format!(
        "sha256-{}",
        diff_ids[2]
            .as_str()
            .expect("diffID")
            .trim_start_matches("sha256:")
    ));
    assert!(!bad_layer.exists(), "no partial layer");
    assert_eq!(
        std::fs::read_dir(store.join("tmp")).expect("tmp").count(),
        0
    );
    assert_eq!(env.ok(&["image", "ls", "-q"]).trim(), "", "no image record");
    // bundles of unknown images, and rm of unknown images
    let err = env.fails(&[
        "image",
        "bundle",
        "nope",
        env.dir.path().join("b").to_str().expect("utf-8"),
    ]);
    assert!(err.contains("no image nope"), "{err}");
    assert!(!env.dir.path().join("b").exists());
    let err = env.fails(&["image", "rm", "nope"]);
    assert!(err.contains("no image nope"), "{err}");
}
