//! `exec` into containers with their own user namespace under a state root whose
//! parents host root crosses only through CAP_DAC_READ_SEARCH: containerd 2.1's
//! `/run/containerd` is mode 0600, its runc shim's state root
//! `/run/containerd/runc/k8s.io`. siloc's exec joins the container's user namespace
//! before libcontainer's build, where those capabilities no longer apply to host
//! root's inodes; libcontainer then said "container state directory does not
//! exist" (engine::exec_view).

use crate::common;

use std::os::unix::fs::PermissionsExt;

use crate::userns_netns::set_namespace;
use common::{Container, TestEnv};
use serde_json::json;

fn set_mode(p: &std::path::Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A containerd 2.1 `hostUsers: false` pod: the sandbox has a user namespace of its
/// own with the spec's mappings, the app container joins it by path; the state root
/// is `<dir>/run/containerd/runc/k8s.io` with `containerd` 0600 and `runc` 0700.
/// exec (plain, `--process`, `--pid-file` into a dir under the 0600 one), `ps`,
/// `state` and `kill` work in both, and exec leaves no file behind.
#[test]
fn userns_exec_under_a_state_root_whose_parent_is_0600() {
    needs_root!();
    let mut env = TestEnv::new();
    set_mode(env.dir.path(), 0o711);
    let run = env.dir.path().join("run");
    let containerd = run.join("containerd");
    let runc = containerd.join("runc");
    std::fs::create_dir_all(&runc).unwrap();
    let pid_dir = containerd.join("task");
    std::fs::create_dir_all(&pid_dir).unwrap();
    env.root = runc.join("k8s.io");
    std::fs::create_dir_all(&env.root).unwrap();
    set_mode(&runc, 0o700);
    set_mode(&containerd, 0o600);

    let map = json!([{"containerID": 0, "hostID": 310000, "size": 65536}]);
    let mut sb = env.bundle("sandbox", &["sleep", "1000"]);
    sb.edit(|s| {
        set_namespace(s, "user", None);
        s["linux"]["uidMappings"] = map.clone();
        s["linux"]["gidMappings"] = map.clone();
    });
    let sid = env.id("sandbox");
    let s = Container::start(&env, &sb, &sid);
    let spid = env.state(&sid)["pid"].as_i64().unwrap();
    let mut app = env.bundle("app", &["sleep", "1000"]);
    app.edit(|s| {
        for t in ["user", "ipc", "uts"] {
            set_namespace(s, t, Some(&format!("/proc/{spid}/ns/{t}")));
        }
        s["linux"]["uidMappings"] = map.clone();
        s["linux"]["gidMappings"] = map.clone();
    });
    let aid = env.id("app");
    let a = Container::start(&env, &app, &aid);

    for (c, id) in [(&s, &sid), (&a, &aid)] {
        let (rc, out, err) = c.exec(&["sh", "-c", "id -u; cat /proc/self/uid_map"]);
        assert_eq!(rc, 0, "exec in {id}: {err}");
        let words: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(words, ["0", "0", "310000", "65536"], "{out}");

        let proc_file = env.dir.path().join(format!("process-{id}.json"));
        std::fs::write(
            &proc_file,
            json!({"args": ["sh", "-c", "echo via-process"], "cwd": "/",
                   "user": {"uid": 0, "gid": 0}, "env": ["PATH=/bin"]})
            .to_string(),
        )
        .unwrap();
        let (rc, out, err) = c.exec(&["--process", proc_file.to_str().unwrap()]);
        assert_eq!(
            (rc, out.trim()),
            (0, "via-process"),
            "exec --process in {id}: {err}"
        );

        let pid_file = pid_dir.join(format!("{id}.pid"));
        let (rc, _, err) = c.exec(&["--pid-file", pid_file.to_str().unwrap(), "true"]);
        assert_eq!(rc, 0, "exec --pid-file in {id}: {err}");
        let written = std::fs::read_to_string(&pid_file).unwrap();
        assert!(written.trim().parse::<u32>().is_ok(), "{written:?}");

        let ps = env.ok(&["ps", id]);
        assert!(ps.contains("sleep"), "{ps}");
        assert_eq!(env.state(id)["status"], "running");
        let rec = env.root.join(".siloc/containers").join(id);
        let left: Vec<_> = std::fs::read_dir(&rec)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("siloc-exec-"))
            .collect();
        assert!(
            left.is_empty(),
            "exec files left in {}: {left:?}",
            rec.display()
        );
        assert!(!env.root.join(".siloc/exec-created").exists());
    }
    env.ok(&["kill", &aid, "KILL"]);
    assert!(a.wait_status("stopped", 5));
    drop(a);
    drop(s);
    env.assert_no_trace(&aid);
    env.assert_no_trace(&sid);
}

/// `exec` into a user-namespaced container whose init has supplementary groups, as
/// containerd gives every process (`additionalGids`), and with `-g` groups of
/// its own (what `ctr task exec` sends). libcontainer validated the init's groups
/// from inside the joined user namespace and refused: "unprivileged user can't set
/// supplementary groups". runc runs both.
#[test]
fn userns_exec_with_supplementary_groups() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("gids", &["sleep", "1000"]);
    b.annotate("io.siloc.userns", "auto");
    b.edit(|s| s["process"]["user"]["additionalGids"] = json!([10]));
    let id = env.id("gids");
    let c = Container::start(&env, &b, &id);
    let (rc, out, err) = c.exec(&["sh", "-c", "id -G"]);
    assert_eq!((rc, out.trim()), (0, "0 10"), "exec: {err}");
    let (rc, out, err) = c.exec(&["-g", "20", "sh", "-c", "id -G"]);
    assert_eq!((rc, out.trim()), (0, "0 10 20"), "exec -g: {err}");
    // IDs past the range: named, not libcontainer's "failed syscall"
    for (args, says) in [
        (
            &["-g", "70000"][..],
            "process.user.additionalGids 70000 is not mapped",
        ),
        (&["-u", "70000"][..], "process.user.uid 70000 is not mapped"),
        (
            &["-u", "0:70000"][..],
            "process.user.gid 70000 is not mapped",
        ),
    ] {
        let mut a = args.to_vec();
        a.push("true");
        let (rc, _, err) = c.exec(&a);
        assert!(rc != 0 && err.contains(says), "exec {args:?}: {rc} {err}");
    }
    drop(c);
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}
