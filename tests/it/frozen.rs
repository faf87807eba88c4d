//! A container whose own cgroup is frozen while its state.json says created or
//! running: what a `pause` or `kill --all` killed between its freeze and its thaw
//! leaves, or a freeze from outside. runc 1.1.5 reads the freezer for the status
//! (`paused`), thaws a SIGKILL through, and `delete --force` is prompt
//! (engine::frozen_cgroup). Needs root; skips loudly without it.

use crate::common;

use common::{Container, TestEnv};

/// The freezer of container `id`'s default cgroup (`/siloc-<id>`): the v1 freezer
/// hierarchy's `freezer.state`, or on a pure v2 host `cgroup.freeze`. Thawed on drop
/// (declare it after the container's guard, so it drops first).
struct Freeze {
    file: std::path::PathBuf,
    thawed: &'static str,
}

impl Freeze {
    /// `None` (with a loud SKIPPED line) when the host has no freezer for it.
    fn of(id: &str) -> Option<Freeze> {
        let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let f = if v2 {
            Freeze {
                file: format!("/sys/fs/cgroup/siloc-{id}/cgroup.freeze").into(),
                thawed: "0",
            }
        } else {
            Freeze {
                file: format!("/sys/fs/cgroup/freezer/siloc-{id}/freezer.state").into(),
                thawed: "THAWED",
            }
        };
        if !f.file.exists() {
            eprintln!("SKIPPED: no freezer at {}", f.file.display());
            return None;
        }
        Some(f)
    }

    /// Freezes the cgroup from outside siloc and waits until the kernel says frozen.
    fn freeze(&self) {
        let frozen = if self.thawed == "0" { "1" } else { "FROZEN" };
        std::fs::write(&self.file, frozen).unwrap();
        let settled = |s: &str| {
            if self.thawed == "0" {
                s.contains("frozen 1")
            } else {
                s.trim() == "FROZEN"
            }
        };
        let probe = if self.thawed == "0" {
            self.file.with_file_name("cgroup.events")
        } else {
            self.file.clone()
        };
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !settled(&std::fs::read_to_string(&probe).unwrap_or_default()) {
            assert!(
                std::time::Instant::now() < end,
                "{} never froze",
                probe.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn is_thawed(&self) -> bool {
        std::fs::read_to_string(&self.file).is_ok_and(|s| s.trim() == self.thawed)
    }
}

impl Drop for Freeze {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.file, self.thawed);
    }
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

/// Waits up to `secs` for process `pid` to end.
fn ends_within(pid: i64, secs: u64) -> bool {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !ended(pid) {
        if std::time::Instant::now() > end {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// `kill ID KILL` and `kill --all ID KILL` of a running container frozen behind its
/// state: `state` and `list` say paused (as runc), the init dies (it used to stay,
/// stopped in the v1 freezer), and the cgroup is thawed after, as runc leaves it.
#[test]
fn sigkill_reaches_a_container_frozen_behind_its_state() {
    needs_root!();
    for name in ["one", "all"] {
        let env = TestEnv::new();
        let b = env.bundle("b", &["sleep", "1000"]);
        let id = env.id(&format!("frz-{name}"));
        let c = Container::start(&env, &b, &id);
        let Some(f) = Freeze::of(&id) else { return };
        let pid = env.state(&id)["pid"].as_i64().unwrap();
        f.freeze();
        assert_eq!(env.state(&id)["status"], "paused", "{name}");
        let list = env.ok(&["list"]);
        let row = list
            .lines()
            .find(|l| l.starts_with(&id))
            .unwrap_or_default();
        assert!(row.contains("paused"), "{name}: {list}");
        let kill = match name {
            "one" => vec!["kill", id.as_str(), "KILL"],
            _ => vec!["kill", "--all", id.as_str(), "KILL"],
        };
        env.ok(&kill);
        // Bounded wait, generous: a thawed SIGKILLed sleep ends at once; without the
        // thaw it never does.
        assert!(ends_within(pid, 10), "{name}: init {pid} survived {kill:?}");
        assert!(f.is_thawed(), "{name}: still frozen after {kill:?}");
        assert!(c.wait_status("stopped", 10), "{name}");
        env.ok(&["delete", &id]);
        drop(f);
        drop(c);
        env.assert_no_trace(&id);
    }
}

/// `delete --force` of a running container frozen behind its state kills it at once,
/// as for a paused one, instead of waiting out the 10 s cgroup drain for an init that
/// cannot die (the bound is half the drain, generous for a delete that takes ~0.1 s).
#[test]
fn forced_delete_of_a_container_frozen_behind_its_state_is_prompt() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("frz-del");
    let c = Container::start(&env, &b, &id);
    let Some(f) = Freeze::of(&id) else { return };
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    f.freeze();
    let start = std::time::Instant::now();
    env.ok(&["delete", "--force", &id]);
    let took = start.elapsed();
    // Ordering first: the init had ended when delete returned.
    assert!(ended(pid), "init {pid} outlived delete --force");
    assert!(
        took < std::time::Duration::from_secs(5),
        "delete --force took {took:?} (the drain is 10 s)"
    );
    drop(f);
    drop(c);
    env.assert_no_trace(&id);
}

/// A paused container sent SIGTERM stays paused (runc: the signal waits for the
/// thaw); libcontainer saved it as stopped and siloc used to report it running.
#[test]
fn a_paused_container_sent_sigterm_stays_paused() {
    needs_root!();
    let env = TestEnv::new();
    // As pid 1 of its PID namespace, the init gets SIGTERM only with a handler.
    let b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "trap 'exit 0' TERM; while :; do sleep 0.1; done",
        ],
    );
    let id = env.id("frz-term");
    let c = Container::start(&env, &b, &id);
    // Pause only once the shell has its TERM handler: before the trap, pid 1 of the
    // PID namespace ignores SIGTERM and the signal is lost (a loaded host got there).
    let pid = env.state(&id)["pid"].as_i64().unwrap();
    assert!(
        (0..200).any(|_| {
            let caught = catches_term(pid);
            if !caught {
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            caught
        }),
        "the init never installed its TERM handler"
    );
    env.ok(&["pause", &id]);
    env.ok(&["kill", &id, "TERM"]);
    assert_eq!(env.state(&id)["status"], "paused");
    env.ok(&["resume", &id]);
    assert!(
        ends_within(pid, 10),
        "the SIGTERM was not delivered on resume"
    );
    assert!(c.wait_status("stopped", 10));
    drop(c);
    env.assert_no_trace(&id);
}

/// A created container whose cgroup is frozen before `start` (item 9 of issue 19: an
/// init frozen before start): `state` says paused, `start` refuses in runc 1.1.5's
/// words instead of hanging, `exec` is refused as for a paused container, `resume`
/// thaws it back to created, and then it starts.
#[test]
fn a_created_container_frozen_before_start_is_paused_not_hung() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("frz-start");
    let c = Container::create(&env, &b, &id);
    let Some(f) = Freeze::of(&id) else { return };
    f.freeze();
    assert_eq!(env.state(&id)["status"], "paused");
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut child = env
        .cmd(&["start", &id])
        .stdout(std::process::Stdio::null())
        .stderr(out.reopen().unwrap())
        .spawn()
        .unwrap();
    let Some(status) = common::wait_within(&mut child, 20) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("start hung in a frozen cgroup");
    };
    let err = std::fs::read_to_string(out.path()).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("cannot start a container in the paused state"),
        "{err}"
    );
    let (code, _, err) = c.exec(&["true"]);
    assert_ne!(code, 0);
    assert!(err.contains("cannot exec in a paused container"), "{err}");
    env.ok(&["resume", &id]);
    assert!(f.is_thawed());
    assert_eq!(env.state(&id)["status"], "created");
    env.ok(&["start", &id]);
    assert_eq!(env.state(&id)["status"], "running");
    drop(f);
    drop(c);
    env.assert_no_trace(&id);
}

/// Whether process `pid` has a handler for SIGTERM (bit 15 of SigCgt in its status).
fn catches_term(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        })
        .is_some_and(|m| m & (1 << (libc::SIGTERM - 1)) != 0)
}
