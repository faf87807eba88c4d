//! runc's cgroup behaviour on cgroup v1 and the v1/v2 hybrid (src/engine/cgroup_compat.rs,
//! src/engine/exec_cgroup.rs, src/lifecycle/update_order.rs) with real containers.
//! Each test touches only cgroups named after its own unique ids, removed in guards
//! that run on failure too. Needs root and a host that is not pure cgroup v2; skips
//! loudly otherwise.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Container, TestEnv};
use serde_json::{Value, json};

const CG: &str = "/sys/fs/cgroup";

/// Skips unless the host has v1 controllers (v1 or the hybrid).
macro_rules! needs_v1 {
    () => {
        needs_root!();
        if Path::new(CG).join("cgroup.controllers").exists() {
            eprintln!("SKIP: needs cgroup v1 or the v1/v2 hybrid (hack/vm covers pure v2)");
            return;
        }
    };
}

/// Every hierarchy's mount point (v1 ones and the hybrid's unified one).
fn hierarchies() -> Vec<PathBuf> {
    std::fs::read_dir(CG)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("cgroup.procs").exists())
        .collect()
}

/// Removes cgroup `rel` (and what it holds, deepest first) in every hierarchy, killing
/// the processes left in it: for cgroups a test made itself.
struct CgroupGuard(String);

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        for h in hierarchies() {
            let dir = h.join(self.0.trim_start_matches('/'));
            let mut dirs: Vec<PathBuf> = walk(&dir);
            dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in dirs {
                for pid in std::fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                {
                    if let Ok(p) = pid.trim().parse::<i32>() {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(p),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
                for _ in 0..100 {
                    if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    if !dir.is_dir() {
        return Vec::new();
    }
    let mut out = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&e.path()));
        }
    }
    out
}

fn read(path: impl AsRef<Path>) -> String {
    let p = path.as_ref();
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

fn init_pid(env: &TestEnv, id: &str) -> i32 {
    env.state(id)["pid"].as_i64().unwrap() as i32
}

/// The `N:controllers:path` line of /proc/PID/cgroup for `key` (`name=systemd`,
/// `pids`, or `""` for the unified hierarchy), its path.
fn cgroup_of(pid: i32, key: &str) -> String {
    read(format!("/proc/{pid}/cgroup"))
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, k, p) = (f.next()?, f.next()?, f.next()?);
            (k == key).then(|| p.to_string())
        })
        .unwrap_or_default()
}

#[test]
fn unified_resources_are_refused_on_v1_and_leave_nothing() {
    needs_v1!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| s["linux"]["resources"] = json!({"unified": {"pids.max": "10"}}));
    let id = env.id("unified");
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    // Before: created, the unified resources silently ignored.
    assert!(!ok);
    assert!(
        err.contains("invalid configuration: cannot use unified on cgroup v1"),
        "{err}"
    );
    env.assert_no_trace(&id);
}

#[test]
fn pids_limit_zero_and_one_mean_one() {
    needs_v1!();
    let env = TestEnv::new();
    for limit in [0, 1] {
        let id = env.id(&format!("pids{limit}"));
        let mut b = env.bundle(&format!("b{limit}"), &["sleep", "1000"]);
        b.edit(|s| s["linux"]["resources"] = json!({"pids": {"limit": limit}}));
        // Before: 0 gave `max`, 1 failed ("failed to launch init process").
        let c = Container::create(&env, &b, &id);
        assert_eq!(read(format!("{CG}/pids/siloc-{id}/pids.max")), "1");
        env.ok(&["start", &id]);
        assert!(c.wait_status("running", 5));
        assert_eq!(read(format!("{CG}/pids/siloc-{id}/pids.current")), "1");
    }
}

#[test]
fn a_cgroup_holding_processes_is_refused() {
    needs_v1!();
    let env = TestEnv::new();
    let rel = format!("/{}", env.id("busy"));
    let _g = CgroupGuard(rel.clone());
    let dir = Path::new(CG).join("devices").join(&rel[1..]);
    std::fs::create_dir_all(&dir).unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("1000")
        .spawn()
        .unwrap();
    std::fs::write(dir.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    let mut b = env.bundle("b", &["true"]);
    b.edit(|s| s["linux"]["cgroupsPath"] = Value::from(rel.clone()));
    let id = env.id("c");
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    let alive = sleeper.try_wait().unwrap().is_none();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    // Before: created in it (and the delete then killed the stranger).
    assert!(!ok);
    assert!(
        err.contains("container's cgroup is not empty: 1 process(es) found"),
        "{err}"
    );
    assert!(alive, "the process already in the cgroup was killed");
    env.assert_no_trace(&id);
}

/// A loop device over a file in `dir`, detached when dropped.
struct Loop(String);

impl Loop {
    fn new(dir: &Path) -> Option<Loop> {
        let img = dir.join("loop.img");
        std::fs::File::create(&img).ok()?.set_len(16 << 20).ok()?;
        let o = std::process::Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&img)
            .output()
            .ok()?;
        let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
        (o.status.success() && !dev.is_empty()).then_some(Loop(dev))
    }

    fn name(&self) -> &str {
        self.0.trim_start_matches("/dev/")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup")
            .args(["-d", &self.0])
            .status();
    }
}

#[test]
fn per_device_bfq_weights_are_written() {
    needs_v1!();
    let env = TestEnv::new();
    // The test's own loop device under bfq: the host's disks are left alone.
    let Some(lo) = Loop::new(env.dir.path()) else {
        eprintln!("SKIP: needs losetup and a free loop device");
        return;
    };
    let sched = Path::new("/sys/block")
        .join(lo.name())
        .join("queue/scheduler");
    if std::fs::write(&sched, "bfq").is_err() {
        eprintln!("SKIP: bfq is not available for {}", lo.0);
        return;
    }
    let mm = read(Path::new("/sys/block").join(lo.name()).join("dev"));
    let (major, minor) = mm.split_once(':').unwrap();
    let (major, minor): (i64, i64) = (major.parse().unwrap(), minor.parse().unwrap());
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.edit(|s| {
        s["linux"]["resources"] = json!({"blockIO": {"weight": 200,
            "weightDevice": [{"major": major, "minor": minor, "weight": 300}]}});
    });
    let id = env.id("bfq");
    let c = Container::create(&env, &b, &id);
    let file = format!("{CG}/blkio/siloc-{id}/blkio.bfq.weight_device");
    // Before: only "default 200" (libcgroups ignores weightDevice).
    assert!(
        read(&file).lines().any(|l| l == format!("{mm} 300")),
        "{}",
        read(&file)
    );
    let upd =
        json!({"blockIO": {"weightDevice": [{"major": major, "minor": minor, "weight": 400}]}});
    let mut child = env
        .cmd(&["update", "-r", "-", &id])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(upd.to_string().as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        read(&file).lines().any(|l| l == format!("{mm} 400")),
        "{}",
        read(&file)
    );
    drop(c);
    env.assert_no_trace(&id);
}

/// Kills and reaps the child on drop, also when the test fails.
pub(crate) struct Reaped(pub(crate) std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `delete` that cannot remove the container's extra cgroup (the hybrid's unified
/// one, or name=systemd) fails naming it and keeps the container's state, so a second
/// `delete` retries and leaves nothing (runc 1.1.5 drops its state, exits 0 and leaves
/// the busy cgroup behind).
/// Before the fix libcontainer's state was removed first: `siloc state` and a second
/// `delete` said "not found" while the cgroup stayed. The failure is real: a process
/// outside the container sits in its extra cgroup, where delete's kill cannot reach.
#[test]
fn a_failed_delete_keeps_the_state_until_the_extra_cgroup_is_gone() {
    needs_v1!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("busy");
    let c = Container::start(&env, &b, &id);
    let want = format!("/siloc-{id}");
    let init = init_pid(&env, &id);
    let (key, mount) = [("", "unified"), ("name=systemd", "systemd")]
        .into_iter()
        .find(|(k, _)| cgroup_of(init, k) == want)
        .expect("the init in an extra hierarchy");
    let dir = Path::new(CG).join(mount).join(want.trim_start_matches('/'));
    let mut outsider = Reaped(
        std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap(),
    );
    std::fs::write(dir.join("cgroup.procs"), outsider.0.id().to_string()).unwrap();
    assert_eq!(cgroup_of(outsider.0.id() as i32, key), want);
    let err = env.fails(&["delete", "--force", &id]);
    assert!(err.contains(&*dir.to_string_lossy()), "{err}");
    assert!(dir.exists());
    assert_eq!(env.state(&id)["status"], "stopped", "state kept");
    // The kill that drains the extra cgroup freezes through the v1 freezer dir: it
    // must not be left frozen (nor made again, frozen, after delete removed it), or
    // the next container at this cgroupsPath would hang in it.
    let freezer = Path::new(CG)
        .join("freezer")
        .join(want.trim_start_matches('/'));
    if let Ok(st) = std::fs::read_to_string(freezer.join("freezer.state")) {
        assert_eq!(st.trim(), "THAWED", "{} left frozen", freezer.display());
    }
    let _ = outsider.0.kill();
    let _ = outsider.0.wait();
    env.ok(&["delete", &id]);
    assert!(!dir.exists(), "{} left", dir.display());
    drop(c);
    env.assert_no_trace(&id);
}

#[test]
fn init_and_exec_join_the_named_and_unified_hierarchies() {
    needs_v1!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("extra");
    let want = format!("/siloc-{id}");
    {
        let _c = Container::start(&env, &b, &id);
        let init = init_pid(&env, &id);
        let extras: Vec<&str> = ["name=systemd", ""]
            .into_iter()
            .filter(|k| !cgroup_of(std::process::id() as i32, k).is_empty())
            .collect();
        assert!(
            !extras.is_empty(),
            "no named or unified hierarchy on this host"
        );
        for k in &extras {
            // Before: the init stayed in the caller's cgroup there.
            assert_eq!(cgroup_of(init, k), want, "init in {k:?}");
        }
        let pid_file = env.dir.path().join("exec.pid");
        let pf = pid_file.display().to_string();
        let (ok, _, err) = env.detached(&["exec", "-d", "--pid-file", &pf, &id, "sleep", "1000"]);
        assert!(ok, "{err}");
        let pid: i32 = read(&pid_file).parse().unwrap();
        for k in extras.iter().chain(&["pids", "memory"]) {
            assert_eq!(cgroup_of(pid, k), want, "exec in {k:?}");
        }
        // siloc went back to its own cgroups.
        assert_ne!(cgroup_of(std::process::id() as i32, extras[0]), want);

        // --cgroup: a missing sub-cgroup is refused, per controller and for all.
        let exec = |args: &[&str]| {
            let mut a = vec!["exec"];
            a.extend_from_slice(args);
            a.extend_from_slice(&[id.as_str(), "true"]);
            let o = env.siloc(&a);
            (
                o.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        };
        let (code, err) = exec(&["--cgroup", "nosuch"]);
        assert_ne!(code, 0);
        assert!(
            err.contains("nosuch/cgroup.procs: no such file or directory"),
            "{err}"
        );
        let (code, err) = exec(&["--cgroup", "pids:../.."]);
        assert_ne!(code, 0);
        assert!(err.contains("bad sub cgroup path: ../.."), "{err}");
        let (code, err) = exec(&["--cgroup", "a", "--cgroup", "pids:b"]);
        assert_ne!(code, 0);
        assert!(
            err.contains("invalid --cgroup argument: a (missing <controller>: prefix)"),
            "{err}"
        );
        // Per controller: pids in the sub-cgroup, the rest in the container's.
        std::fs::create_dir(format!("{CG}/pids/siloc-{id}/sub")).unwrap();
        let (ok, _, err) = env.detached(&[
            "exec",
            "-d",
            "--pid-file",
            &pf,
            "--cgroup",
            "pids:sub",
            &id,
            "sleep",
            "1000",
        ]);
        assert!(ok, "{err}");
        let pid: i32 = read(&pid_file).parse().unwrap();
        assert_eq!(cgroup_of(pid, "pids"), format!("{want}/sub"));
        assert_eq!(cgroup_of(pid, "memory"), want);
    }
    env.assert_no_trace(&id);
}

fn update(env: &TestEnv, id: &str, args: &[&str]) -> (bool, String) {
    let mut a = vec!["update"];
    a.extend_from_slice(args);
    a.push(id);
    let o = env.siloc(&a);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn update_json(env: &TestEnv, id: &str, v: Value) -> (bool, String) {
    use std::io::Write;
    let mut child = env
        .cmd(&["update", "-r", "-", id])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(v.to_string().as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn update_writes_cpu_limits_in_an_order_the_kernel_accepts() {
    needs_v1!();
    let env = TestEnv::new();
    // A pod cgroup with its own limit: half a CPU.
    let pod = format!("/{}", env.id("pod"));
    let _g = CgroupGuard(pod.clone());
    let pod_cpu = Path::new(CG).join("cpu").join(&pod[1..]);
    std::fs::create_dir_all(&pod_cpu).unwrap();
    std::fs::write(pod_cpu.join("cpu.cfs_period_us"), "100000").unwrap();
    std::fs::write(pod_cpu.join("cpu.cfs_quota_us"), "50000").unwrap();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.edit(|s| {
        s["linux"]["cgroupsPath"] = Value::from(format!("{pod}/ctr"));
        s["linux"]["resources"] = json!({"cpu": {"period": 100000, "quota": 50000, "shares": 512}});
    });
    let id = env.id("upd");
    let _c = Container::start(&env, &b, &id);
    let ctr = pod_cpu.join("ctr");
    let f = |name: &str| read(ctr.join(name));
    // A shorter period: the old quota over it would exceed the pod's half CPU.
    let (ok, err) = update(
        &env,
        &id,
        &["--cpu-period", "50000", "--cpu-quota", "25000"],
    );
    assert!(ok, "{err}");
    assert_eq!(
        (f("cpu.cfs_period_us"), f("cpu.cfs_quota_us")),
        ("50000".into(), "25000".into())
    );
    // A quota below the current burst, with a smaller burst.
    let (ok, err) = update(&env, &id, &["--cpu-burst", "20000"]);
    assert!(ok, "{err}");
    let (ok, err) = update(&env, &id, &["--cpu-quota", "10000", "--cpu-burst", "5000"]);
    assert!(ok, "{err}");
    assert_eq!(
        (f("cpu.cfs_quota_us"), f("cpu.cfs_burst_us")),
        ("10000".into(), "5000".into())
    );
    // cpu.idle: later updates still work (shares are not written while idle), and
    // leaving idle takes the shares again.
    let (ok, err) = update_json(&env, &id, json!({"cpu": {"idle": 1}}));
    assert!(ok, "{err}");
    assert_eq!(f("cpu.idle"), "1");
    let (ok, err) = update(&env, &id, &["--pids-limit", "30"]);
    assert!(ok, "{err}");
    let (ok, err) = update_json(&env, &id, json!({"cpu": {"idle": 0, "shares": 300}}));
    assert!(ok, "{err}");
    assert_eq!((f("cpu.idle"), f("cpu.shares")), ("0".into(), "300".into()));
    // Before: each of the above failed with EINVAL.
}

#[test]
fn update_writes_rt_period_before_a_larger_runtime() {
    needs_v1!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("rt");
    let _c = Container::start(&env, &b, &id);
    let dir = Path::new(CG).join("cpu").join(format!("siloc-{id}"));
    if !dir.join("cpu.rt_runtime_us").exists() {
        eprintln!("SKIP: no CONFIG_RT_GROUP_SCHED");
        return;
    }
    // The runtime is larger than the current period (1 s): the period goes first.
    let (ok, err) = update(
        &env,
        &id,
        &["--cpu-rt-period", "2000000", "--cpu-rt-runtime", "1500000"],
    );
    assert!(ok, "{err}");
    assert_eq!(read(dir.join("cpu.rt_period_us")), "2000000");
    assert_eq!(read(dir.join("cpu.rt_runtime_us")), "1500000");
}

/// `update` with `linux.resources.devices` leaves the device rules as they are, as
/// runc's update does (`SkipDevices`, runc 1.1.5 to 1.4): the v1 devices.list is
/// unchanged and the saved spec keeps the rules in force (siloc saved the new rules
/// without applying them, so the spec no longer said what the cgroup did).
#[test]
fn update_leaves_device_rules_as_runc_does() {
    needs_v1!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("upddev");
    let c = Container::start(&env, &b, &id);
    let pid = env.state(&c.id)["pid"].as_i64().unwrap() as i32;
    let list = Path::new(CG)
        .join("devices")
        .join(cgroup_of(pid, "devices").trim_start_matches('/'))
        .join("devices.list");
    let saved = env
        .root
        .join(".siloc/containers")
        .join(&id)
        .join("config.json");
    let devices = |p: &Path| -> Value {
        let s: Value = serde_json::from_str(&read(p)).unwrap();
        s["linux"]["resources"]["devices"].clone()
    };
    let (list_before, spec_before) = (read(&list), devices(&saved));
    let (ok, err) = update_json(
        &env,
        &id,
        json!({"devices": [{"allow": false, "type": "c", "major": 1, "minor": 3, "access": "rwm"}]}),
    );
    assert!(ok, "{err}");
    assert_eq!(read(&list), list_before);
    assert_eq!(devices(&saved), spec_before);
    let (rc, _, _) = c.exec(&["sh", "-c", "echo x >/dev/null"]);
    assert_eq!(rc, 0);
}

/// A create killed right after it made the container's directory in the named (or
/// unified) hierarchy: `delete --force` removes that directory too. The list of those
/// directories used to be written only after all were made, so a SIGKILL in between
/// (breaker: killing siloc at random points of a pod's create) left
/// /sys/fs/cgroup/systemd/<pod>/<id> behind.
#[test]
fn a_create_killed_after_making_an_extra_cgroup_leaves_none_after_delete() {
    needs_v1!();
    needs_test_hooks!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("xkill");
    let _g = CgroupGuard(format!("/siloc-{id}"));
    let st = env
        .cmd(&["create", "--bundle", b.path(), &id])
        .env("SILOC_TEST_CRASH_AT", "after-extra-cgroup")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!st.success(), "create {id} should have been killed");
    let dirs = || -> Vec<PathBuf> {
        hierarchies()
            .into_iter()
            .map(|h| h.join(format!("siloc-{id}")))
            .filter(|d| d.exists())
            .collect()
    };
    let extra = [Path::new(CG).join("systemd"), Path::new(CG).join("unified")];
    assert!(
        dirs()
            .iter()
            .any(|d| extra.iter().any(|h| d.starts_with(h))),
        "the crash point comes after an extra hierarchy's directory is made: {:?}",
        dirs()
    );
    env.ok(&["delete", "--force", &id]);
    assert_eq!(
        dirs(),
        Vec::<PathBuf>::new(),
        "cgroups left after delete --force"
    );
    env.assert_no_trace(&id);
}

/// The extra hierarchies this host has: (key in /proc/PID/cgroup, mount point name).
fn extra_hierarchies() -> Vec<(&'static str, &'static str)> {
    [("name=systemd", "systemd"), ("", "unified")]
        .into_iter()
        .filter(|(k, m)| {
            !cgroup_of(std::process::id() as i32, k).is_empty() && Path::new(CG).join(m).is_dir()
        })
        .collect()
}

/// The container's directories in any hierarchy.
fn cgroup_dirs(id: &str) -> Vec<PathBuf> {
    hierarchies()
        .into_iter()
        .map(|h| h.join(format!("siloc-{id}")))
        .filter(|d| d.exists())
        .collect()
}

/// A created, not yet started container's init is in the named and unified
/// hierarchies' container cgroups, alone: it was born there (engine::cgroup_handoff:
/// siloc's create process joined them while libcontainer forked), and siloc's
/// process left them.
#[test]
fn a_created_init_is_alone_in_its_extra_cgroups_before_start() {
    needs_v1!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("born");
    let _g = CgroupGuard(format!("/siloc-{id}"));
    let want = format!("/siloc-{id}");
    let extras = extra_hierarchies();
    assert!(!extras.is_empty(), "no named or unified hierarchy here");
    {
        let _c = Container::create(&env, &b, &id);
        assert_eq!(env.state(&id)["status"], "created");
        let init = init_pid(&env, &id);
        for (k, mount) in &extras {
            assert_eq!(cgroup_of(init, k), want, "init in {k:?}");
            let dir = Path::new(CG).join(mount).join(want.trim_start_matches('/'));
            assert_eq!(
                read(dir.join("cgroup.procs")),
                init.to_string(),
                "{k:?}: the init alone"
            );
        }
    }
    env.assert_no_trace(&id);
}

/// A create that fails after siloc joined the container's extra cgroups leaves no
/// cgroup and no trace: before libcontainer forks (a terminal without console socket,
/// refused by libcontainer) and after (a program that does not exist, refused by the
/// init). siloc's process must be back in its own cgroups before create removes them:
/// rmdir refuses a cgroup that holds a process, and the directories stayed.
#[test]
fn a_create_failing_after_joining_the_extra_cgroups_leaves_none() {
    needs_v1!();
    let env = TestEnv::new();
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit, &str); 2] = [
        (
            "tty",
            |s| s["process"]["terminal"] = Value::Bool(true),
            "console socket",
        ),
        (
            "noexe",
            |s| s["process"]["args"] = json!(["/nosuch"]),
            "/nosuch",
        ),
    ];
    for (name, edit, want) in cases {
        let mut b = env.bundle(name, &["true"]);
        b.edit(edit);
        let id = env.id(name);
        let _g = CgroupGuard(format!("/siloc-{id}"));
        let err = env.fails(&["create", "--bundle", b.path(), &id]);
        assert!(err.contains(want), "{name}: {err}");
        assert_eq!(
            cgroup_dirs(&id),
            Vec::<PathBuf>::new(),
            "{name}: cgroups left"
        );
        env.assert_no_trace(&id);
    }
}

/// A foreground `run` deletes its container's extra cgroups: siloc's process, which
/// joined them while libcontainer forked, left them before its delete (rmdir refuses
/// a cgroup that holds a process: delete warned "Device or resource busy" and the
/// directories stayed).
#[test]
fn a_foreground_run_leaves_its_extra_cgroups_before_delete() {
    needs_v1!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sh", "-c", "sleep 0.2 & wait"]);
    let id = env.id("fg");
    let _g = CgroupGuard(format!("/siloc-{id}"));
    let (code, _, err) = common::run(&env, &b, "fg");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("delete"), "{err}");
    assert_eq!(cgroup_dirs(&id), Vec::<PathBuf>::new(), "cgroups left");
    env.assert_no_trace(&id);
}

/// `hugepageLimits` reach the v1 hugetlb controller for each page size the host has
/// (`2MB`, `1GB`: the kernel's names), as under runc 1.1.5 (issue 19 item 7: it used
/// to fail as "malformed page size"), and leave the other size unlimited.
#[test]
fn hugetlb_limits_reach_the_cgroup() {
    needs_v1!();
    let sizes: Vec<&str> = [("2MB", "2048kB"), ("1GB", "1048576kB")]
        .into_iter()
        .filter(|(_, kb)| Path::new(&format!("/sys/kernel/mm/hugepages/hugepages-{kb}")).exists())
        .map(|(name, _)| name)
        .collect();
    if sizes.is_empty() || !Path::new(CG).join("hugetlb/cgroup.procs").exists() {
        eprintln!("SKIP: needs the v1 hugetlb controller and huge page sizes");
        return;
    }
    let env = TestEnv::new();
    for (i, size) in sizes.iter().enumerate() {
        let file = format!("/sys/fs/cgroup/hugetlb/hugetlb.{size}.limit_in_bytes");
        let mut b = env.bundle(&format!("b{i}"), &["cat", &file]);
        let limit = 1u64 << 30;
        b.edit(|s| {
            s["linux"]["resources"]["hugepageLimits"] = json!([{"pageSize": size, "limit": limit}])
        });
        let (code, out, err) = common::run(&env, &b, &format!("huge{i}"));
        assert_eq!(
            (code, out.trim()),
            (0, limit.to_string().as_str()),
            "{size}: {err}"
        );
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}

/// Whether process `pid`'s main thread sleeps in `nanosleep`/`clock_nanosleep`
/// (/proc/PID/syscall, x86_64 numbers 35 and 230): a test-hook stall
/// (`SILOC_TEST_STALL_AT`), where siloc's exec makes no other sleep on its main thread.
fn stalled(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/syscall"))
        .is_ok_and(|s| s.starts_with("35 ") || s.starts_with("230 "))
}

/// Spawns `siloc exec ARGS` stalled right after libcontainer's build returned
/// (`exec-after-libcontainer`), waits until it is in the stall, and returns it with
/// its cgroup path in each extra hierarchy then, and the file its stderr goes to (not
/// a pipe: a detached exec'd process would hold it open).
fn exec_stalled(env: &TestEnv, args: &[&str], keys: &[&str]) -> Stalled {
    let mut a = vec!["exec"];
    a.extend_from_slice(args);
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = env
        .cmd(&a)
        .env("SILOC_TEST_STALL_AT", "exec-after-libcontainer")
        .stdout(std::process::Stdio::null())
        .stderr(err.reopen().unwrap())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !stalled(child.id()) {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("exec {args:?} ended before its stall: {st}");
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "exec {args:?} never reached its stall"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let at: Vec<String> = keys
        .iter()
        .map(|k| cgroup_of(child.id() as i32, k))
        .collect();
    (child, at, err)
}

/// [`exec_stalled`]'s siloc process, its cgroups in the stall, its stderr.
type Stalled = (std::process::Child, Vec<String>, tempfile::NamedTempFile);

/// An exec'd process is born in the container's named and unified cgroups, and
/// siloc's exec process has left them by the time libcontainer's build returns: it
/// goes back the moment libcontainer forked (engine::cgroup_handoff), not after
/// libcontainer returned, which cost a second RCU grace period per exec (it was still
/// in the container's cgroups at this point). An exec failing after the fork (a
/// program that does not exist) likewise: siloc back in its own cgroups, nothing of
/// the exec left in the container's, which keeps running and execs again.
#[test]
fn an_exec_leaves_the_extra_cgroups_once_libcontainer_forked() {
    needs_v1!();
    // The exec is held in the hand-over by the stall hook.
    needs_test_hooks!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("exho");
    let _g = CgroupGuard(format!("/siloc-{id}"));
    let want = format!("/siloc-{id}");
    let extras = extra_hierarchies();
    assert!(!extras.is_empty(), "no named or unified hierarchy here");
    let keys: Vec<&str> = extras.iter().map(|(k, _)| *k).collect();
    let own: Vec<String> = keys
        .iter()
        .map(|k| cgroup_of(std::process::id() as i32, k))
        .collect();
    let procs = |mount: &str| -> Vec<i32> {
        read(
            Path::new(CG)
                .join(mount)
                .join(want.trim_start_matches('/'))
                .join("cgroup.procs"),
        )
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
    };
    {
        let _c = Container::start(&env, &b, &id);
        let init = init_pid(&env, &id);
        let pid_file = env.dir.path().join("exec.pid");
        let pf = pid_file.display().to_string();

        let (mut child, at, err) = exec_stalled(
            &env,
            &["-d", "--pid-file", &pf, &id, "sleep", "1000"],
            &keys,
        );
        let siloc = child.id() as i32;
        assert_eq!(
            at, own,
            "siloc's exec in {keys:?} once libcontainer returned"
        );
        for (_, mount) in &extras {
            assert!(!procs(mount).contains(&siloc), "siloc in {mount}");
        }
        let st = child.wait().unwrap();
        assert!(st.success(), "{}", read(err.path()));
        let pid: i32 = read(&pid_file).parse().unwrap();
        for k in keys.iter().chain(&["pids", "memory"]) {
            assert_eq!(cgroup_of(pid, k), want, "exec'd process in {k:?}");
        }
        for (_, mount) in &extras {
            let mut p = procs(mount);
            p.sort();
            let mut w = vec![init, pid];
            w.sort();
            assert_eq!(p, w, "{mount}: the init and the exec'd process");
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );

        // Failing after the fork: the init of the exec cannot find its program.
        let (mut child, at, err) = exec_stalled(&env, &[&id, "/nosuch"], &keys);
        assert_eq!(at, own, "a failed exec's siloc in {keys:?}");
        assert!(!child.wait().unwrap().success());
        let err = read(err.path());
        assert!(err.contains("/nosuch"), "{err}");
        let t0 = std::time::Instant::now();
        for (_, mount) in &extras {
            // the killed sleep may take a moment to leave
            let patience = std::time::Duration::from_secs(5);
            while procs(mount) != vec![init] && t0.elapsed() < patience {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            assert_eq!(procs(mount), vec![init], "{mount}: the init alone");
        }
        assert_eq!(env.state(&id)["status"], "running");
        let (code, _, err) = _c.exec(&["true"]);
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(cgroup_dirs(&id), Vec::<PathBuf>::new(), "cgroups left");
    env.assert_no_trace(&id);
}
