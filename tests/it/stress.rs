//! Foreground `run` and `exec` must return the process's exit status as soon as it
//! exits, every time: runtimes have shipped races here that hang one run in dozens.
//! Hundreds of fast-exiting containers and execs, with and without a terminal, each
//! with a deadline. Needs root; skips loudly without it.

use crate::common;

use std::os::fd::{AsFd, AsRawFd};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Container, TestEnv};

/// Waits for `child` up to `deadline`; kills it and returns None when it hangs.
fn wait_with_deadline(mut child: Child, deadline: Duration) -> Option<(i32, String)> {
    let end = Instant::now() + deadline;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                let mut out = String::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut o, &mut out);
                }
                return Some((st.code().unwrap_or(-1), out));
            }
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

const DEADLINE: Duration = Duration::from_secs(30);

/// Runs siloc with `args` and expects exit `code` and output `out` within DEADLINE.
fn expect_fast(env: &TestEnv, args: &[&str], code: i32, out: &str, what: &str) {
    let child = env
        .cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    match wait_with_deadline(child, DEADLINE) {
        Some((c, o)) => {
            assert_eq!(c, code, "{what}: exit status");
            assert_eq!(o.trim_end(), out, "{what}: output");
        }
        None => panic!("{what} hung for {DEADLINE:?}"),
    }
}

#[test]
fn hundreds_of_fast_runs_never_hang() {
    needs_root!();
    let env = TestEnv::new();
    let mut plain = env.bundle("plain", &["sh", "-c", "echo out; exit 7"]);
    plain.edit(|_| {});
    let mut tty = env.bundle("tty", &["sh", "-c", "echo out; exit 7"]);
    tty.edit(|s| s["process"]["terminal"] = serde_json::Value::Bool(true));
    let n = 300;
    let t0 = Instant::now();
    for i in 0..n {
        let b = if i % 3 == 0 { &tty } else { &plain };
        let id = env.id(&format!("s{i}"));
        expect_fast(
            &env,
            &["run", "--bundle", b.path(), &id],
            7,
            "out",
            &format!("run {i} ({id})"),
        );
    }
    eprintln!("{n} runs in {:?}", t0.elapsed());
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

#[test]
fn hundreds_of_fast_execs_never_hang() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "10000"]);
    let id = env.id("ex");
    let _c = Container::start(&env, &b, &id);
    let n = 300;
    for i in 0..n {
        let mut args = vec!["exec"];
        if i % 3 == 0 {
            args.push("--tty");
        }
        args.extend([id.as_str(), "sh", "-c", "echo e; exit 5"]);
        expect_fast(&env, &args, 5, "e", &format!("exec {i}"));
    }
    assert_eq!(env.state(&id)["status"], "running");
}

#[test]
fn signals_reach_the_foreground_container() {
    needs_root!();
    let env = TestEnv::new();
    // The shell traps TERM and exits 42: siloc must forward the signal and report it.
    let b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "trap 'exit 42' TERM; echo ready; while true; do sleep 0.05; done",
        ],
    );
    let id = env.id("sig");
    let mut child = env
        .cmd(&["run", "--bundle", b.path(), &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut buf = [0u8; 6];
    std::io::Read::read_exact(&mut out, &mut buf).unwrap();
    assert_eq!(&buf, b"ready\n");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    match wait_with_deadline(child, Duration::from_secs(10)) {
        Some((code, _)) => assert_eq!(code, 42),
        None => panic!("run did not return after SIGTERM"),
    }
    // A container killed by SIGKILL (from `siloc kill`): 128 + 9, as runc reports.
    let b = env.bundle("b2", &["sleep", "1000"]);
    let id = env.id("k");
    let child = env
        .cmd(&["run", "--bundle", b.path(), &id])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while env.siloc(&["state", &id]).stdout.is_empty() || env.state(&id)["status"] != "running" {
        assert!(Instant::now() < end, "container never ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    env.ok(&["kill", &id, "KILL"]);
    match wait_with_deadline(child, Duration::from_secs(10)) {
        Some((code, _)) => assert_eq!(code, 137),
        None => panic!("run did not return after the container was killed"),
    }
}

/// A foreground `exec -t` forwards signals too, and SIGWINCH resizes the process's
/// terminal to the caller's new size (as runc's tty handling does) instead of being
/// sent on: the shell reports the size the kernel's SIGWINCH found, then exits on
/// TERM with its own code.
#[test]
fn a_foreground_exec_resizes_on_winch_and_forwards_term() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let c = Container::start(&env, &b, &env.id("winch"));
    let size = |rows, cols| nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size(21, 77)), None).unwrap();
    let script = "trap 'stty size' WINCH; trap 'exit 42' TERM; echo ready; \
                  while true; do sleep 0.05; done";
    let mut child = env
        .cmd(&["exec", "-t", &c.id, "sh", "-c", script])
        .stdin(std::fs::File::from(pty.slave.try_clone().unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Bounded reads: a lost signal must fail the test, not hang it.
    let mut read_line = |what: &str| {
        let mut pfd = [nix::poll::PollFd::new(
            out.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ready = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(10_000u16));
        if ready != Ok(1) {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("no output {what} within 10 s");
        }
        let mut buf = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut buf).unwrap();
        String::from_utf8_lossy(&buf).into_owned()
    };
    assert_eq!(read_line("at start"), "ready\n");
    // SAFETY: TIOCSWINSZ reads one Winsize from the pointer, which outlives the call.
    let r = unsafe { libc::ioctl(pty.master.as_raw_fd(), libc::TIOCSWINSZ, &size(30, 90)) };
    assert_eq!(r, 0);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGWINCH).unwrap();
    assert_eq!(read_line("after SIGWINCH"), "30 90\n");
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    match wait_with_deadline(child, Duration::from_secs(10)) {
        Some((code, _)) => assert_eq!(code, 42),
        None => panic!("exec did not return after SIGTERM"),
    }
}

/// Names in the container's state dir that are libcontainer's exec notify sockets.
fn notify_sockets(env: &TestEnv, id: &str) -> Vec<String> {
    std::fs::read_dir(env.root.join(id))
        .expect("state dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tenant-notify-"))
        .collect()
}

/// libcontainer 0.7 leaves one `tenant-notify-<hex>.sock` per exec in the state dir
/// (issue 15: 553 after 553 execs). 1,000 execs, some failing, some detached, some
/// in parallel: the state dir stays as it was.
#[test]
fn a_thousand_execs_leave_no_socket_in_the_state_dir() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("socks");
    let _c = Container::start(&env, &b, &id);
    let before: Vec<String> = std::fs::read_dir(env.root.join(&id))
        .expect("state dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let run = |i: usize| match i % 10 {
        // A command that does not exist: the exec fails.
        7 => {
            let o = env.siloc(&["exec", &id, "/no/such/command"]);
            assert!(
                !o.status.success(),
                "exec {i} of a missing command succeeded"
            );
        }
        // Detached: siloc returns while the process still runs.
        8 => {
            let (ok, _, err) = env.detached(&["exec", "--detach", &id, "sleep", "0.2"]);
            assert!(ok, "exec -d {i}: {err}");
        }
        _ => {
            let o = env.siloc(&["exec", &id, "true"]);
            assert!(o.status.success(), "exec {i}: {o:?}");
        }
    };
    // 800 one after the other, then 200 four at a time.
    for i in 0..800 {
        run(i);
    }
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || (0..50).for_each(|i| run(800 + t * 50 + i)));
        }
    });
    assert!(
        notify_sockets(&env, &id).is_empty(),
        "{} sockets left: {:?}",
        notify_sockets(&env, &id).len(),
        notify_sockets(&env, &id).iter().take(5).collect::<Vec<_>>()
    );
    let mut after: Vec<String> = std::fs::read_dir(env.root.join(&id))
        .expect("state dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let mut before = before;
    before.sort();
    after.sort();
    assert_eq!(before, after, "the state dir changed");
}
