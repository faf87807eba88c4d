//! The host's one ID pool (issue 16 item 3) with real containers: ranges unique across
//! state roots, released by delete under the holder's root, reclaimed when the holder
//! left no state, never overlapping a live container's spec-given mappings, and clear
//! errors for a bad pool table. Each test uses a private pool (`TestEnv::pool`),
//! shared between its own state roots only. Needs root; skips loudly without it.

use crate::common;

use common::{Bundle, Container, TestEnv};
use serde_json::json;

/// A fixed pool, so the expected ranges are known: 8 ranges of 65536 from 400000.
const POOL: &str = "[userns]\npool_start = 400000\npool_size = 524288\n";
const START: u32 = 400_000;
const R: u32 = 65_536;

/// A busybox bundle running `sleep 1000` with `io.siloc.userns=auto`.
fn auto_bundle(env: &TestEnv, name: &str) -> Bundle {
    let mut b = env.bundle(name, &["sleep", "1000"]);
    b.annotate("io.siloc.userns", "auto");
    b
}

/// Host uid of the container's range (its `io.siloc.userns.range` annotation).
fn uid_of(env: &TestEnv, id: &str) -> u32 {
    let a = env.state(id)["annotations"]["io.siloc.userns.range"]
        .as_str()
        .expect("range annotation")
        .to_string();
    a.split(',')
        .find_map(|kv| kv.strip_prefix("uid="))
        .and_then(|v| v.parse().ok())
        .expect("uid=")
}

/// The first line of the container init's /proc/PID/uid_map: (inside, outside, count).
fn uid_map(env: &TestEnv, id: &str) -> (u32, u32, u32) {
    let pid = env.state(id)["pid"].as_i64().expect("pid");
    let m = std::fs::read_to_string(format!("/proc/{pid}/uid_map")).unwrap();
    let f: Vec<u32> = m
        .split_whitespace()
        .take(3)
        .map(|x| x.parse().unwrap())
        .collect();
    (f[0], f[1], f[2])
}

/// The host uid the pool table gives holder `id`.
fn table_uid(env: &TestEnv, id: &str) -> Option<u64> {
    env.pool_table()["entries"]
        .as_array()?
        .iter()
        .find(|e| e["id"] == id)
        .and_then(|e| e["uid"][0]["host"].as_u64())
}

/// Two state roots on one host get disjoint ranges (the bug: both got the first one).
#[test]
fn two_state_roots_get_disjoint_ranges() {
    needs_root!();
    let a = TestEnv::with_config(POOL);
    let b = TestEnv::sharing_pool_of(&a, POOL);
    let ca = Container::start(&a, &auto_bundle(&a, "b"), &a.id("a"));
    let cb = Container::start(&b, &auto_bundle(&b, "b"), &b.id("b"));
    assert_eq!(uid_map(&a, &ca.id), (0, START, R));
    assert_eq!(uid_map(&b, &cb.id), (0, START + R, R));
    drop((ca, cb));
    assert!(a.leftovers().is_empty(), "{:?}", a.leftovers());
    assert!(b.leftovers().is_empty(), "{:?}", b.leftovers());
}

/// Parallel creates in two state roots: every range is apart from every other.
#[test]
fn parallel_creates_across_two_roots_are_pairwise_disjoint() {
    needs_root!();
    let extra = "[userns]\npool_start = 400000\n";
    let a = TestEnv::with_config(extra);
    let b = TestEnv::sharing_pool_of(&a, extra);
    let n = 6;
    let mut jobs = Vec::new();
    for env in [&a, &b] {
        for i in 0..n {
            let bundle = auto_bundle(env, &format!("b{i}"));
            let id = env.id(&format!("p{i}"));
            let child = env
                .cmd(&["create", "--bundle", bundle.path(), &id])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            jobs.push((env, id, child));
        }
    }
    let mut guards = Vec::new();
    let mut ranges = Vec::new();
    for (env, id, mut child) in jobs {
        let ok = child.wait().unwrap().success();
        guards.push(Container {
            env,
            id: id.clone(),
        });
        assert!(ok, "create {id}");
        ranges.push((uid_of(env, &id), id));
    }
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].0 + R <= w[1].0, "overlap: {:?} {:?}", w[0], w[1]);
    }
    assert_eq!(a.pool_holders().len() + b.pool_holders().len(), 2 * n);
    drop(guards);
    assert!(a.leftovers().is_empty(), "{:?}", a.leftovers());
    assert!(b.leftovers().is_empty(), "{:?}", b.leftovers());
}

/// A create killed right after taking its range keeps it (its init could be running
/// under it) until `delete --force` under its own root releases it, which the other
/// root then sees. A killed create whose state root is removed altogether is
/// reclaimed by the next allocation, from the other root.
#[test]
fn a_killed_create_keeps_its_range_until_deleted_or_its_state_is_gone() {
    needs_root!();
    needs_test_hooks!();
    let a = TestEnv::with_config(POOL);
    let b = TestEnv::sharing_pool_of(&a, POOL);
    let crash = |name: &str| {
        let id = a.id(name);
        let bundle = auto_bundle(&a, name);
        let st = a
            .cmd(&["create", "--bundle", bundle.path(), &id])
            .env("SILOC_TEST_CRASH_AT", "after-idpool")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!st.success(), "create {id} should have been killed");
        assert_eq!(a.pool_holders(), std::slice::from_ref(&id));
        id
    };
    let x = crash("x");
    assert_eq!(table_uid(&a, &x), Some(u64::from(START)));
    let y = Container::create(&b, &auto_bundle(&b, "y"), &b.id("y"));
    assert_eq!(
        uid_of(&b, &y.id),
        START + R,
        "the killed create's range is held"
    );
    a.ok(&["delete", "--force", &x]);
    assert!(a.leftovers().is_empty(), "{:?}", a.leftovers());
    let z = Container::create(&b, &auto_bundle(&b, "z"), &b.id("z"));
    assert_eq!(uid_of(&b, &z.id), START, "released by delete under root a");
    drop(z);
    // Killed again, then its whole state root goes (a tmpfs root cleared at boot).
    let w = crash("w");
    assert_eq!(table_uid(&a, &w), Some(u64::from(START)));
    std::fs::remove_dir_all(&a.root).unwrap();
    let v = Container::create(&b, &auto_bundle(&b, "v"), &b.id("v"));
    assert_eq!(uid_of(&b, &v.id), START, "reclaimed");
    assert!(a.pool_holders().is_empty(), "{:?}", a.pool_holders());
    drop((v, y));
    assert!(b.leftovers().is_empty(), "{:?}", b.leftovers());
}

/// A live container whose spec brings its own mappings (as containerd 2.1 and the
/// kubelet do for `hostUsers: false` pods) is never overlapped by a range, from any
/// state root; its mappings are released on delete.
#[test]
fn a_spec_given_mapping_is_never_overlapped() {
    needs_root!();
    let a = TestEnv::with_config(POOL);
    let b = TestEnv::sharing_pool_of(&a, POOL);
    let mut sb = a.bundle("spec", &["sleep", "1000"]);
    sb.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user"}));
        // The pool's second range, half of it: uids and gids.
        s["linux"]["uidMappings"] =
            json!([{"containerID": 0, "hostID": START + R + 1000, "size": 1000}]);
        s["linux"]["gidMappings"] =
            json!([{"containerID": 0, "hostID": START + R + 1000, "size": 1000}]);
    });
    let spec = Container::start(&a, &sb, &a.id("spec"));
    assert_eq!(uid_map(&a, &spec.id), (0, START + R + 1000, 1000));
    let c1 = Container::create(&b, &auto_bundle(&b, "c1"), &b.id("c1"));
    let c2 = Container::create(&b, &auto_bundle(&b, "c2"), &b.id("c2"));
    let c3 = Container::create(&a, &auto_bundle(&a, "c3"), &a.id("c3"));
    assert_eq!(
        (uid_of(&b, &c1.id), uid_of(&b, &c2.id), uid_of(&a, &c3.id)),
        (START, START + 2 * R, START + 3 * R),
        "the second range overlaps the spec's mapping"
    );
    let mut held = a.pool_holders();
    held.sort();
    assert_eq!(held, [c3.id.clone(), spec.id.clone()]);
    drop(spec);
    assert_eq!(
        a.pool_holders(),
        std::slice::from_ref(&c3.id),
        "spec mapping released"
    );
    let c4 = Container::create(&b, &auto_bundle(&b, "c4"), &b.id("c4"));
    assert_eq!(uid_of(&b, &c4.id), START + R);
    drop((c1, c2, c3, c4));
    assert!(a.leftovers().is_empty(), "{:?}", a.leftovers());
    assert!(b.leftovers().is_empty(), "{:?}", b.leftovers());
}

/// A corrupt pool table, and a pool_dir that is a file: create fails naming the
/// file, exits non-zero, leaves the table as it was and nothing else behind.
#[test]
fn a_bad_pool_table_fails_cleanly_naming_it() {
    needs_root!();
    let env = TestEnv::with_config(POOL);
    std::fs::create_dir_all(&env.pool).unwrap();
    let table = env.pool.join("ranges.json");
    std::fs::write(&table, "{\"entries\": [{\"root\"").unwrap();
    let id = env.id("bad");
    let (ok, _, err) = env.detached(&["create", "--bundle", auto_bundle(&env, "b").path(), &id]);
    assert!(!ok, "create should fail");
    assert!(err.contains(&*table.to_string_lossy()), "{err}");
    assert_eq!(
        std::fs::read_to_string(&table).unwrap(),
        "{\"entries\": [{\"root\""
    );
    env.assert_no_trace(&id);
    // A container without a user namespace never reads the table.
    let plain = env.bundle("plain", &["true"]);
    let o = env.siloc(&["run", "--bundle", plain.path(), &env.id("plain")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(&table).unwrap();
    // pool_dir is a regular file
    let file = env.dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let env2 = TestEnv::with_config(&format!(
        "[userns]\npool_dir = {:?}\n",
        file.display().to_string()
    ));
    let id = env2.id("file");
    let (ok, _, err) = env2.detached(&["create", "--bundle", auto_bundle(&env2, "b").path(), &id]);
    assert!(!ok && err.contains(&*file.to_string_lossy()), "{err}");
    assert!(env2.leftovers().is_empty(), "{:?}", env2.leftovers());
}

/// A bundle's own `io.siloc.userns.range` (and siloc's other report annotations) is
/// not siloc's report: `siloc state` shows siloc's range, or none for a container
/// without one. containerd-shim-siloc-v2 reads the sandbox's range from `siloc state`
/// to put the pod's app containers into its user namespace; a pod annotation passed
/// through `pod_annotations = ["io.siloc.*"]` made it join the host's user namespace
/// with the forged mapping (EINVAL), and podman showed the forged range.
#[test]
fn a_bundles_own_report_annotations_are_dropped() {
    needs_root!();
    let env = TestEnv::with_config(POOL);
    let forged = [
        ("io.siloc.userns.range", "uid=0,gid=0,size=4294967295"),
        ("io.siloc.rootfs.assembly", "forged"),
        ("io.siloc.numa.decision", "forged"),
        ("io.siloc.io.policy", "forged"),
    ];
    let mut host = env.bundle("host", &["sleep", "1000"]);
    let mut auto = auto_bundle(&env, "auto");
    for (k, v) in forged {
        host.annotate(k, v);
        auto.annotate(k, v);
    }
    let ch = Container::start(&env, &host, &env.id("host"));
    let ca = Container::start(&env, &auto, &env.id("auto"));
    let a = &env.state(&ch.id)["annotations"];
    for (k, _) in forged {
        assert!(a.get(k).is_none(), "{k} kept: {a}");
    }
    assert_eq!(uid_of(&env, &ca.id), START, "siloc's own range");
    let a = &env.state(&ca.id)["annotations"];
    for (k, _) in &forged[1..] {
        assert_ne!(a.get(*k).and_then(|v| v.as_str()), Some("forged"), "{k}");
    }
    drop((ch, ca));
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// A busybox bundle running `sleep 1000` whose spec brings its own user namespace
/// (joined by `path` when given) with `host:size` as its uid and gid mapping.
fn spec_bundle(env: &TestEnv, name: &str, host: u32, size: u32, path: Option<String>) -> Bundle {
    let mut b = env.bundle(name, &["sleep", "1000"]);
    b.edit(|s| {
        let ns = match &path {
            Some(p) => json!({"type": "user", "path": p}),
            None => json!({"type": "user"}),
        };
        s["linux"]["namespaces"].as_array_mut().unwrap().push(ns);
        let m = json!([{"containerID": 0, "hostID": host, "size": size}]);
        s["linux"]["uidMappings"] = m.clone();
        s["linux"]["gidMappings"] = m;
    });
    b
}

/// A spec mapping that overlaps a range siloc handed out to a live container (in
/// another state root) is refused, naming the mapping, the other container and its
/// range, and leaves nothing; the pod's case, a container joining that container's
/// user namespace with exactly its range (containerd's CRI, siloc's shim), still runs.
/// Before the fix the overlapping container was created and shared host IDs.
#[test]
fn a_spec_mapping_overlapping_a_handed_out_range_is_refused() {
    needs_root!();
    let a = TestEnv::with_config(POOL);
    let b = TestEnv::sharing_pool_of(&a, POOL);
    let sandbox = Container::start(&a, &auto_bundle(&a, "sb"), &a.id("sb"));
    assert_eq!(uid_map(&a, &sandbox.id), (0, START, R));
    let root_a = std::fs::canonicalize(&a.root).unwrap();
    // A new user namespace with the same range, and one overlapping part of it.
    for (name, host, size) in [("same", START, R), ("part", START + R - 10, 100)] {
        let id = b.id(name);
        let bundle = spec_bundle(&b, name, host, size, None);
        let (ok, _, err) = b.detached(&["create", "--bundle", bundle.path(), &id]);
        assert!(!ok, "create {id} should be refused");
        let want = format!(
            "linux.uidMappings [0 {host} {size}] overlaps the ID range uid={START},gid={START},\
             size={R} that container {} (state root {}) holds",
            sandbox.id,
            root_a.display()
        );
        assert!(err.contains(&want), "{err}");
        b.assert_no_trace(&id);
    }
    assert_eq!(a.pool_holders(), std::slice::from_ref(&sandbox.id));
    // The same range joining a user namespace that is not the sandbox's (containerd
    // 2.1 makes a hostUsers: false sandbox's namespace itself): refused.
    let other = ForeignUserns::new(START, R);
    let id = b.id("foreign");
    let bundle = spec_bundle(&b, "foreign", START, R, Some(other.path()));
    let (ok, _, err) = b.detached(&["create", "--bundle", bundle.path(), &id]);
    assert!(
        !ok,
        "create {id} joining a foreign namespace should be refused"
    );
    assert!(err.contains("overlaps the ID range"), "{err}");
    b.assert_no_trace(&id);
    // The pod's app container: joins the sandbox's user namespace, repeats its range.
    let pid = a.state(&sandbox.id)["pid"].as_i64().unwrap();
    let app = spec_bundle(&b, "app", START, R, Some(format!("/proc/{pid}/ns/user")));
    let app = Container::start(&b, &app, &b.id("app"));
    assert_eq!(uid_map(&b, &app.id), (0, START, R));
    drop((app, sandbox));
    assert!(a.leftovers().is_empty(), "{:?}", a.leftovers());
    assert!(b.leftovers().is_empty(), "{:?}", b.leftovers());
}

/// A user namespace made outside siloc (`unshare -U sleep`) whose uid and gid maps
/// are `0 host size`; its process is killed when dropped.
struct ForeignUserns(std::process::Child);

impl ForeignUserns {
    fn new(host: u32, size: u32) -> ForeignUserns {
        let child = std::process::Command::new("unshare")
            .args(["-U", "sleep", "1000"])
            .spawn()
            .expect("unshare -U");
        let me = ForeignUserns(child);
        let pid = me.0.id();
        let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/user")).ok();
        // unshare(1) unshares, then execs sleep: wait for the new namespace.
        for _ in 0..500 {
            if ns(&pid.to_string()).is_some_and(|n| Some(n) != ns("self")) {
                for f in ["uid_map", "gid_map"] {
                    std::fs::write(format!("/proc/{pid}/{f}"), format!("0 {host} {size}\n"))
                        .expect(f);
                }
                return me;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("unshare -U made no user namespace");
    }

    fn path(&self) -> String {
        format!("/proc/{}/ns/user", self.0.id())
    }
}

impl Drop for ForeignUserns {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// 64 ranges: a pool larger than the default per-container cap (16 ranges).
const BIG_POOL: &str = "[userns]\npool_start = 400000\npool_size = 4194304\n";

/// A spec mapping of `1:4294967294` covers the whole pool: held, it would block every
/// range. Refused under the default cap, naming the mapping, the pool and the cap;
/// nothing is left and the pool still hands out ranges. Before the fix the mapping
/// was recorded and every `io.siloc.userns=auto` create failed "exhausted".
#[test]
fn a_spec_mapping_covering_the_pool_is_refused() {
    needs_root!();
    let env = TestEnv::with_config(BIG_POOL);
    let id = env.id("huge");
    let bundle = spec_bundle(&env, "huge", 1, u32::MAX - 1, None);
    let (ok, _, err) = env.detached(&["create", "--bundle", bundle.path(), &id]);
    assert!(!ok, "create {id} should be refused");
    assert!(
        err.contains(
            "linux.uidMappings [0 1 4294967294] covers 4194304 IDs of the host ID pool \
             (host uids 400000..=4594303), more than the per-container cap of 1048576 IDs \
             ([userns] max_size)"
        ),
        "{err}"
    );
    env.assert_no_trace(&id);
    let c = Container::create(&env, &auto_bundle(&env, "c"), &env.id("c"));
    assert_eq!(uid_of(&env, &c.id), START);
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// `io.siloc.userns.size` above `[userns] max_size` (default 1048576) is refused,
/// naming the annotation, the value and the cap, before anything is made; the cap
/// itself is accepted. Before the fix a container could take the whole pool.
#[test]
fn a_userns_size_above_the_cap_is_refused() {
    needs_root!();
    let env = TestEnv::with_config(BIG_POOL);
    let id = env.id("wide");
    let mut bundle = auto_bundle(&env, "wide");
    bundle.annotate("io.siloc.userns.size", "1048577");
    let (ok, _, err) = env.detached(&["create", "--bundle", bundle.path(), &id]);
    assert!(!ok, "create {id} should be refused");
    assert!(
        err.contains(
            "annotation io.siloc.userns.size: 1048577 IDs is above the per-container cap \
             of 1048576 IDs ([userns] max_size)"
        ),
        "{err}"
    );
    env.assert_no_trace(&id);
    let mut at_cap = auto_bundle(&env, "cap");
    at_cap.annotate("io.siloc.userns.size", "1048576");
    let c = Container::create(&env, &at_cap, &env.id("cap"));
    assert_eq!(uid_of(&env, &c.id), START);
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// `io.siloc.userns.size` where the container gets no user namespace of siloc's (no
/// `io.siloc.userns: auto` and the host default off, or the spec's own user namespace)
/// runs with a warning naming the annotation; it used to be ignored in silence.
#[test]
fn a_userns_size_without_a_userns_of_siloc_is_a_warning() {
    needs_root!();
    let env = TestEnv::new();
    let mut plain = env.bundle("plain", &["true"]);
    plain.annotate("io.siloc.userns.size", "1000");
    let (code, _, err) = common::run(&env, &plain, "plain");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "annotation io.siloc.userns.size: ignored, the container gets no user namespace \
             of siloc's"
        ),
        "{err}"
    );
    let mut own = env.bundle("own", &["true"]);
    own.annotate("io.siloc.userns.size", "1000");
    own.annotate("io.siloc.userns", "auto");
    own.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user"}));
        s["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 500000, "size": 65536}]);
        s["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 500000, "size": 65536}]);
    });
    let (code, _, err) = common::run(&env, &own, "own");
    assert_eq!(code, 0, "{err}");
    for key in ["io.siloc.userns=auto", "io.siloc.userns.size=1000"] {
        assert!(
            err.contains(&format!(
                "annotation {key}: ignored, the spec gives the container's"
            )),
            "{key}: {err}"
        );
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}
