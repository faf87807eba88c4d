//! The console of a process in a container with a user namespace (spec-given
//! mappings, and siloc's own range): `exec -t`, `exec --console-socket`, `create
//! --console-socket` and a foreground `run` hand over the pty as runc 1.1.5 does on
//! this host: owned by the process's uid, the group devpts gave it (`gid=5`, so
//! `1000:5` for `--user 1000:1000`), ONLCR cleared, and sized (the caller's terminal
//! for `exec -t`, `process.consoleSize` otherwise). The main binary failed every
//! `exec -t` into such a container with `console: fchown pty: EINVAL` (siloc chowned
//! to the host uid from inside the user namespace; engine::console_owner). Needs
//! root; skips loudly without it.

use crate::common;

use std::process::{Command, Stdio};

use common::{Bundle, Container, TestEnv};
use serde_json::{Value, json};

use crate::spec_features::{console_socket_bundle, console_socket_case};

/// The two kinds of user namespace: `spec` (mappings in config.json, as a
/// `hostUsers: false` pod's) and `auto` (siloc's range).
const KINDS: [&str; 2] = ["spec", "auto"];

/// Gives bundle `b` a user namespace of kind `how`.
fn in_userns(b: &mut Bundle, how: &str) {
    if how == "auto" {
        b.annotate("io.siloc.userns", "auto");
        return;
    }
    b.edit(|s| {
        s["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user"}));
        let m = json!([{"containerID": 0, "hostID": 430000, "size": 65536}]);
        s["linux"]["uidMappings"] = m.clone();
        s["linux"]["gidMappings"] = m;
    });
}

/// A running `sleep` container with a user namespace of kind `how`.
fn sleeper<'a>(env: &'a TestEnv, how: &str) -> Container<'a> {
    let mut b = env.bundle(how, &["sleep", "1000"]);
    in_userns(&mut b, how);
    Container::start(env, &b, &env.id(&format!("ct{how}")))
}

/// `exec -t` relayed by siloc: the pty is the process's (also for `--user`), the
/// group devpts's, and lines come back as `text\n`. On main: `console: fchown pty:
/// EINVAL` for both kinds.
#[test]
fn exec_tty_in_a_user_namespace_is_owned_by_the_process() {
    needs_root!();
    let env = TestEnv::new();
    for how in KINDS {
        let c = sleeper(&env, how);
        for (user, want) in [(None, "0:5"), (Some("1000:1000"), "1000:5")] {
            let mut args = vec!["-t"];
            if let Some(u) = user {
                args.extend(["--user", u]);
            }
            args.extend(["sh", "-c", "stat -L -c %u:%g /proc/self/fd/0; echo x"]);
            let (code, out, err) = c.exec(&args);
            assert_eq!(
                (code, out.as_str()),
                (0, format!("{want}\nx\n").as_str()),
                "{how} {user:?}: {err}"
            );
        }
    }
}

/// `exec -t` from a terminal (util-linux `script` gives the caller one, 33x77): the
/// process's console has the caller's size, and ONLCR is off (`stty -a`).
#[test]
fn exec_tty_in_a_user_namespace_takes_the_callers_size() {
    needs_root!();
    let env = TestEnv::new();
    for how in KINDS {
        let c = sleeper(&env, how);
        let cmd = format!(
            "stty rows 33 cols 77; {} --root {} --config {} exec -t {} \
             sh -c 'stty size; stty -a | grep -o .onlcr'",
            common::siloc_bin().display(),
            env.root.display(),
            env.config.display(),
            c.id
        );
        let o = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .expect("script");
        // script echoes the NUL it sends at the end as `^@`, anywhere in the output
        let out = String::from_utf8_lossy(&o.stdout)
            .replace(['\r', '\0'], "")
            .replace("^@", "");
        let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(lines, ["33 77", "-onlcr"], "{how}: {out:?}");
    }
}

/// A caller's `--console-socket` (containerd's shim, conmon) with a user namespace:
/// `create` and `exec -d --process` hand over the pty owned by the process's uid,
/// sized by `process.consoleSize`, without ONLCR; the exec'd program sees its own uid
/// from its first instruction (it waits for siloc's chown). On main the exec failed
/// with `console: fchown pty: EINVAL`.
#[test]
fn a_callers_console_socket_in_a_user_namespace() {
    needs_root!();
    let env = TestEnv::new();
    for how in KINDS {
        let mut b = console_socket_bundle(&env, &format!("cs{how}"));
        in_userns(&mut b, how);
        console_socket_case(&env, &b, how);
    }
}

/// A foreground `run` with `process.terminal` in a user namespace: the same pty.
#[test]
fn a_foreground_run_in_a_user_namespace_gets_the_processs_terminal() {
    needs_root!();
    let env = TestEnv::new();
    for how in KINDS {
        let mut b = env.bundle(
            &format!("run{how}"),
            &["sh", "-c", "stat -L -c %u:%g /proc/self/fd/0; stty size"],
        );
        b.edit(|s| {
            s["process"]["terminal"] = Value::Bool(true);
            s["process"]["user"] = json!({"uid": 1000, "gid": 1001});
            s["process"]["consoleSize"] = json!({"height": 30, "width": 100});
        });
        in_userns(&mut b, how);
        let (code, out, err) = common::run(&env, &b, &format!("run{how}"));
        assert_eq!(
            (code, out.as_str()),
            (0, "1000:5\n30 100\n"),
            "{how}: {err}"
        );
    }
}
