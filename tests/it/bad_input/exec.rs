//! Bad `exec` input: env entries without a name, process files without args or with
//! a relative cwd, and where exec writes its process file.

use super::fails_cleanly;
use crate::common::{Container, TestEnv};

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
