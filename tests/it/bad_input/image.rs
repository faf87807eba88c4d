//! Bad input in image layouts: missing blobs, blobs that are not regular files, a
//! malformed index; nothing may hang or stay in the store.

use crate::common::{self, TestEnv};

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
