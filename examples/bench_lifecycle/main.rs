//! `hack/bench-lifecycle`: the lifecycle of a `true` container, many times, for siloc
//! and its peers (runc, crun, youki when installed) in one run. Modes (`--modes`):
//!
//! - `lifecycle`: create, start, wait, delete, timed per phase. The benchmark acts as
//!   containerd's shim does: it is the child subreaper, so the container's init is
//!   re-parented to it and it waits for the exit directly instead of polling `state`;
//! - `run`: foreground `run` of `true` (the runtime waits for the exit and deletes);
//! - `parallel`: `--runs` foreground runs, `--jobs` at a time, timed as one batch;
//! - `exec`: `exec` of `true` into a running container (one per runtime, started
//!   with `run --detach` before the rounds and deleted after), in the foreground: the
//!   runtime waits for the exit.
//!
//! Runtimes take turns within each round so that load on the machine spreads over all
//! of them, and the turn order rotates from round to round ([`turns`]): a runtime's
//! first `cgroup.procs` write waits for an RCU grace period unless another write came
//! less than about one grace period before (kernel/rcu/sync.c), so a fixed order
//! would hand that wait to whichever runtime always follows the slowest one.
//! Every command is reaped with wait4(2), whose `ru_maxrss` is the peak RSS of the
//! runtime process and the children it reaped (what `/usr/bin/time -v` reports),
//! and whose `ru_utime + ru_stime` is the CPU time of the same processes (`run` and
//! `parallel` report it: on a saturated host wall time follows CPU time, and CPU time
//! varies much less with the load than wall time does).
//! `--peer-userns` gives the peers' containers a user namespace as well (siloc gives
//! every container one of its own), so that the ratios compare like with like.
//! A command that takes longer than `--timeout` counts as hung and is killed. Prints
//! per-mode medians and siloc's ratio to each peer.
//!
//! `--cgroup-window` sets the state each timed `create`, foreground `run` and `exec`
//! starts from (not for `parallel`, whose runs overlap), so that no runtime's figure
//! depends on what the one before it did: `open` (the benchmark moves itself into its
//! own cgroup, a no-op move, just before the command, so the command's moves find the
//! window open: the runtime's own work), `idle` (it waits 100 ms first, so every
//! runtime's first move waits for a grace period: a node where nothing else moves
//! processes between cgroups), or `as-is` (back to back, as before).
//!
//! `--pod-mounts N` runs every runtime under the mount table of a node with N pods
//! ([`pod_mounts`]): each `/proc/self/mountinfo` read then costs what it costs there.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;

mod pod_mounts;

#[derive(Parser, Debug)]
struct Args {
    /// Rounds: lifecycles (and foreground runs) per runtime, batches for `parallel`
    #[arg(long, default_value_t = 100)]
    n: usize,
    /// What to measure: lifecycle, run, parallel, exec
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "lifecycle,run,parallel,exec"
    )]
    modes: Vec<String>,
    /// Foreground runs per batch in `parallel`
    #[arg(long, default_value_t = 100)]
    runs: usize,
    /// Runs at a time in `parallel`
    #[arg(long, default_value_t = 8)]
    jobs: usize,
    /// Batches of `parallel` per runtime (default: n/20, at least 3)
    #[arg(long)]
    batches: Option<usize>,
    /// A command running longer than this (seconds) counts as hung and is killed
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// The siloc binary
    #[arg(long, default_value = "target/release/siloc")]
    siloc: PathBuf,
    /// Peers to compare with, when installed
    #[arg(long, value_delimiter = ',', default_value = "runc,crun,youki")]
    peers: Vec<String>,
    /// Parent of the work directory (bundle and state roots)
    #[arg(long, default_value = "/var/tmp")]
    workdir: PathBuf,
    /// What each timed create, run and exec starts from (not parallel): open (a no-op
    /// cgroup move just before: no runtime waits for the kernel's RCU grace period),
    /// idle (a 100 ms pause: each runtime's first cgroup move waits once), as-is (back
    /// to back)
    #[arg(long, value_enum, default_value = "as-is")]
    cgroup_window: Window,
    /// The host mount table of a Kubernetes node with this many pods (5 mounts each:
    /// rootfs overlay, 3 volumes, /dev/shm), made in the benchmark's own mount
    /// namespace for every runtime alike; 0: the host's table as it is
    #[arg(long, default_value_t = 0)]
    pod_mounts: usize,
    /// Give the peers' containers a user namespace too, as siloc gives every container
    /// one: their bundle maps container IDs 0-65535 to a fixed host range (siloc
    /// allocates a range per container and idmaps the rootfs; the peers' containers
    /// only read the root-owned rootfs, which `true` and `sleep` need)
    #[arg(long)]
    peer_userns: bool,
}

/// What the benchmark does before each timed `create`, `run` and `exec`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
enum Window {
    /// a no-op cgroup move of the benchmark just before: no runtime waits
    Open,
    /// a 100 ms pause first: each runtime's first cgroup move waits once
    Idle,
    /// nothing: back to back
    AsIs,
}

/// Longer than two grace periods on the hosts measured (10-25 ms each): the kernel's
/// `rcu_sync` is idle again after one or two grace periods without a writer.
const IDLE_GAP: Duration = Duration::from_millis(100);

/// Per-phase durations and peak RSS of one lifecycle.
#[derive(Default, Clone, Copy)]
struct Sample {
    create: Duration,
    start: Duration,
    wait: Duration,
    delete: Duration,
    /// Largest ru_maxrss of the four commands, KiB.
    rss_kib: i64,
}

impl Sample {
    fn total(&self) -> Duration {
        self.create + self.start + self.wait + self.delete
    }
}

fn median<T: Ord + Copy + Default>(mut v: Vec<T>) -> T {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// Kills commands that run past their deadline. Pids are registered before the wait
/// and removed after a non-reaping wait, so a recycled pid is never signalled.
#[derive(Default)]
struct Watchdog {
    deadlines: Mutex<HashMap<i32, Instant>>,
    hung: AtomicUsize,
}

impl Watchdog {
    fn start(self: &Arc<Self>) {
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let now = Instant::now();
                let mut map = me.deadlines.lock().unwrap_or_else(|e| e.into_inner());
                // Each hung pid is counted and killed once, then forgotten.
                map.retain(|&pid, d| {
                    if now <= *d {
                        return true;
                    }
                    eprintln!("  hung: pid {pid}; killing it");
                    me.hung.fetch_add(1, Ordering::Relaxed);
                    // SAFETY: plain kill(2) of a pid not yet reaped (see above).
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    false
                });
            }
        });
    }
}

struct Runtime {
    name: String,
    bin: PathBuf,
    root: PathBuf,
    /// The bundle of `true` and the one whose container sleeps (`exec`).
    bundle: PathBuf,
    sleep_bundle: PathBuf,
}

impl Runtime {
    /// Runs one command; returns whether it succeeded and its ru_maxrss (KiB).
    fn cmd(&self, args: &[&str], dog: &Watchdog, timeout: Duration) -> (bool, i64) {
        let (ok, rss, _) = self.cmd_cpu(args, dog, timeout);
        (ok, rss)
    }

    /// As [`Runtime::cmd`], plus the CPU time (user + system) of the command and the
    /// children it reaped.
    fn cmd_cpu(&self, args: &[&str], dog: &Watchdog, timeout: Duration) -> (bool, i64, Duration) {
        let child = Command::new(&self.bin)
            .arg("--root")
            .arg(&self.root)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            return (false, 0, Duration::ZERO);
        };
        let pid = child.id() as i32;
        dog.deadlines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pid, Instant::now() + timeout);
        // SAFETY: waitid/wait4 on our own child with valid out-pointers; the Child is
        // then forgotten, std never waits for it again.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            while libc::waitid(
                libc::P_PID,
                pid as u32,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            ) != 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
        }
        dog.deadlines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
        let mut status = 0;
        // SAFETY: as above.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        drop(child);
        let ok = r == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        (ok, ru.ru_maxrss, tv(ru.ru_utime) + tv(ru.ru_stime))
    }

    fn lifecycle(&self, id: &str, pid_file: &Path, b: &Bench) -> Option<Sample> {
        let bs = self.bundle.to_str()?;
        let p = pid_file.to_str()?;
        b.set_window();
        let t0 = Instant::now();
        let (ok, rss_c) = self.cmd(
            &["create", "--bundle", bs, "--pid-file", p, id],
            &b.dog,
            b.timeout,
        );
        if !ok {
            let _ = self.cmd(&["delete", "--force", id], &b.dog, b.timeout);
            return None;
        }
        let t1 = Instant::now();
        let pid: i32 = std::fs::read_to_string(pid_file)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let (ok, rss_s) = self.cmd(&["start", id], &b.dog, b.timeout);
        if !ok {
            let _ = self.cmd(&["delete", "--force", id], &b.dog, b.timeout);
            return None;
        }
        let t2 = Instant::now();
        // As subreaper we are the init's parent by now.
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        let t3 = Instant::now();
        let (ok, rss_d) = self.cmd(&["delete", id], &b.dog, b.timeout);
        let t4 = Instant::now();
        let _ = std::fs::remove_file(pid_file);
        ok.then_some(Sample {
            create: t1 - t0,
            start: t2 - t1,
            wait: t3 - t2,
            delete: t4 - t3,
            rss_kib: rss_c.max(rss_s).max(rss_d),
        })
    }

    /// A foreground `run`; returns its time, ru_maxrss and CPU time.
    fn run_fg(&self, id: &str, b: &Bench) -> Option<(Duration, i64, Duration)> {
        self.run_fg_from(id, b, true)
    }

    /// [`Runtime::run_fg`], with or without [`Bench::set_window`] first (not within a
    /// `parallel` batch).
    fn run_fg_from(&self, id: &str, b: &Bench, window: bool) -> Option<(Duration, i64, Duration)> {
        if window {
            b.set_window();
        }
        let t0 = Instant::now();
        let (ok, rss, cpu) = self.cmd_cpu(
            &["run", "--bundle", self.bundle.to_str()?, id],
            &b.dog,
            b.timeout,
        );
        let d = t0.elapsed();
        if !ok {
            let _ = self.cmd(&["delete", "--force", id], &b.dog, b.timeout);
            return None;
        }
        Some((d, rss, cpu))
    }

    /// `runs` foreground runs, `jobs` at a time; returns the batch's wall time, the
    /// number of failed runs and the CPU time of all runs.
    fn batch(&self, tag: &str, runs: usize, jobs: usize, b: &Bench) -> (Duration, usize, Duration) {
        let next = AtomicUsize::new(0);
        let failed = AtomicUsize::new(0);
        let cpu_us = AtomicUsize::new(0);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..jobs.max(1) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= runs {
                            break;
                        }
                        match self.run_fg_from(&format!("{tag}-{i}"), b, false) {
                            Some((_, _, cpu)) => {
                                cpu_us.fetch_add(cpu.as_micros() as usize, Ordering::Relaxed);
                            }
                            None => {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        (
            t0.elapsed(),
            failed.into_inner(),
            Duration::from_micros(cpu_us.into_inner() as u64),
        )
    }
}

/// What every measurement shares.
struct Bench {
    dog: Arc<Watchdog>,
    timeout: Duration,
    window: Window,
    /// The benchmark's own `cgroup.procs` in the unified hierarchy, for `open`.
    own_procs: Option<PathBuf>,
}

impl Bench {
    /// Brings the cgroup rwsem into the state `--cgroup-window` asks for (module doc).
    fn set_window(&self) {
        match self.window {
            Window::AsIs => {}
            Window::Idle => std::thread::sleep(IDLE_GAP),
            Window::Open => {
                if let Some(p) = &self.own_procs {
                    let _ = std::fs::write(p, std::process::id().to_string());
                }
            }
        }
    }
}

/// The `cgroup.procs` of this process's cgroup in the host's cgroup2 hierarchy, found
/// as siloc finds it (sys::cgroup: the mount table, then the `0::` line of
/// /proc/self/cgroup); the cgroup rwsem is one for all hierarchies.
fn own_unified_procs() -> Option<PathBuf> {
    use siloc::sys::cgroup::{hierarchies, path_in};
    let mounts = siloc::sys::mountinfo::read(None).ok()?;
    let v2 = hierarchies(&mounts).into_iter().find(|h| h.v2)?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = path_in(&own, &v2)?;
    let p = v2
        .mount_point
        .join(rel.trim_start_matches('/'))
        .join("cgroup.procs");
    p.is_file().then_some(p)
}

fn make_bundle(dir: &Path, siloc: &Path) {
    let rootfs = dir.join("rootfs");
    for d in ["bin", "proc", "sys", "dev", "tmp", "etc"] {
        std::fs::create_dir_all(rootfs.join(d)).expect("mkdir");
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("copy /bin/busybox");
    for applet in ["true", "sleep"] {
        std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).expect("symlink");
    }
    let st = Command::new(siloc)
        .args(["spec", "--bundle"])
        .arg(dir)
        .status()
        .expect("siloc spec");
    assert!(st.success(), "siloc spec failed");
    let p = dir.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
    spec["process"]["terminal"] = false.into();
    spec["process"]["args"] = serde_json::json!(["true"]);
    std::fs::write(&p, serde_json::to_vec_pretty(&spec).expect("json")).expect("write");
}

/// The order in which the runtimes take their turn in round `round`: `0..n` rotated
/// by the round number, so each runtime follows each other one equally often.
fn turns(n: usize, round: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |j| (round + j) % n)
}

fn mib(kib: i64) -> f64 {
    kib as f64 / 1024.0
}

fn ratios(what: &str, names: &[&str], v: &[f64], unit: &str) {
    for k in 1..names.len() {
        println!(
            "{what}: siloc {:.2} {unit}, {} {:.2} {unit}, ratio {:.2}",
            v[0],
            names[k],
            v[k],
            v[0] / v[k].max(f64::MIN_POSITIVE)
        );
    }
}

fn set_subreaper(on: bool) {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, on as libc::c_ulong, 0, 0, 0) };
}

fn bench_lifecycle(args: &Args, rts: &[Runtime], work: &Path, b: &Bench) {
    set_subreaper(true);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); rts.len()];
    let mut failures = vec![0usize; rts.len()];
    let pid_file = work.join("pid");
    // Warm the page cache and each runtime's first-use paths.
    for r in rts {
        let _ = r.lifecycle(&format!("warm-{}", r.name), &pid_file, b);
    }
    let t0 = Instant::now();
    for i in 0..args.n {
        for k in turns(rts.len(), i) {
            let r = &rts[k];
            match r.lifecycle(&format!("bench-{}-{i}", r.name), &pid_file, b) {
                Some(s) => samples[k].push(s),
                None => failures[k] += 1,
            }
        }
        if (i + 1) % 20 == 0 {
            eprintln!(
                "  lifecycle {}/{} rounds, {:.0?}",
                i + 1,
                args.n,
                t0.elapsed()
            );
        }
    }
    set_subreaper(false);
    println!(
        "\nlifecycle (create+start+wait+delete of `true`, n={})\n{:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        args.n,
        "runtime",
        "create ms",
        "start ms",
        "wait ms",
        "delete ms",
        "total ms",
        "RSS MiB",
        "failed"
    );
    let mut totals = Vec::new();
    let mut rss = Vec::new();
    for (k, r) in rts.iter().enumerate() {
        let s = &samples[k];
        let m = |f: fn(&Sample) -> Duration| ms(median(s.iter().map(f).collect()));
        totals.push(m(|x| x.total()));
        rss.push(mib(median(s.iter().map(|x| x.rss_kib).collect())));
        println!(
            "{:<8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8.1} {:>8}",
            r.name,
            m(|x| x.create),
            m(|x| x.start),
            m(|x| x.wait),
            m(|x| x.delete),
            totals[k],
            rss[k],
            failures[k]
        );
    }
    let names: Vec<&str> = rts.iter().map(|r| r.name.as_str()).collect();
    ratios("lifecycle median", &names, &totals, "ms");
    ratios("lifecycle peak RSS median", &names, &rss, "MiB");
}

fn bench_run(args: &Args, rts: &[Runtime], b: &Bench) {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); rts.len()];
    let mut rss: Vec<Vec<i64>> = vec![Vec::new(); rts.len()];
    let mut cpus: Vec<Vec<Duration>> = vec![Vec::new(); rts.len()];
    let mut failures = vec![0usize; rts.len()];
    for r in rts {
        let _ = r.run_fg(&format!("warm-run-{}", r.name), b);
    }
    let t0 = Instant::now();
    for i in 0..args.n {
        for k in turns(rts.len(), i) {
            let r = &rts[k];
            match r.run_fg(&format!("run-{}-{i}", r.name), b) {
                Some((d, m, c)) => {
                    times[k].push(d);
                    rss[k].push(m);
                    cpus[k].push(c);
                }
                None => failures[k] += 1,
            }
        }
        if (i + 1) % 20 == 0 {
            eprintln!("  run {}/{} rounds, {:.0?}", i + 1, args.n, t0.elapsed());
        }
    }
    println!(
        "\nforeground run of `true` (n={})\n{:<8} {:>10} {:>10} {:>10} {:>10} {:>8}",
        args.n, "runtime", "median ms", "p90 ms", "CPU ms", "RSS MiB", "failed"
    );
    let mut med = Vec::new();
    let mut mrss = Vec::new();
    let mut mcpu = Vec::new();
    for (k, r) in rts.iter().enumerate() {
        let mut t = times[k].clone();
        t.sort();
        let p90 = t.get(t.len() * 9 / 10).copied().unwrap_or_default();
        med.push(ms(median(t)));
        mrss.push(mib(median(rss[k].clone())));
        mcpu.push(ms(median(cpus[k].clone())));
        println!(
            "{:<8} {:>10.2} {:>10.2} {:>10.2} {:>10.1} {:>8}",
            r.name,
            med[k],
            ms(p90),
            mcpu[k],
            mrss[k],
            failures[k]
        );
    }
    let names: Vec<&str> = rts.iter().map(|r| r.name.as_str()).collect();
    ratios("run median", &names, &med, "ms");
    ratios("run CPU median", &names, &mcpu, "ms");
    ratios("run peak RSS median", &names, &mrss, "MiB");
}

fn bench_parallel(args: &Args, rts: &[Runtime], b: &Bench) {
    let batches = args.batches.unwrap_or((args.n / 20).max(3));
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); rts.len()];
    let mut cpus: Vec<Vec<Duration>> = vec![Vec::new(); rts.len()];
    let mut failures = vec![0usize; rts.len()];
    for i in 0..batches {
        for k in turns(rts.len(), i) {
            let r = &rts[k];
            let (d, f, c) = r.batch(&format!("par-{}-{i}", r.name), args.runs, args.jobs, b);
            times[k].push(d);
            cpus[k].push(c);
            failures[k] += f;
        }
        eprintln!("  parallel {}/{batches} batches", i + 1);
    }
    println!(
        "\n{} foreground runs, {} at a time ({batches} batches)\n{:<8} {:>10} {:>10} {:>10} {:>10} {:>8}",
        args.runs, args.jobs, "runtime", "median ms", "min ms", "max ms", "CPU ms", "failed"
    );
    let mut med = Vec::new();
    let mut mcpu = Vec::new();
    for (k, r) in rts.iter().enumerate() {
        let t = &times[k];
        med.push(ms(median(t.clone())));
        mcpu.push(ms(median(cpus[k].clone())));
        println!(
            "{:<8} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>8}",
            r.name,
            med[k],
            ms(t.iter().min().copied().unwrap_or_default()),
            ms(t.iter().max().copied().unwrap_or_default()),
            mcpu[k],
            failures[k]
        );
    }
    let names: Vec<&str> = rts.iter().map(|r| r.name.as_str()).collect();
    ratios(
        &format!("{} runs {} at a time, median batch", args.runs, args.jobs),
        &names,
        &med,
        "ms",
    );
    ratios(
        &format!("{} runs {} at a time, CPU per batch", args.runs, args.jobs),
        &names,
        &mcpu,
        "ms",
    );
}

/// First host ID and size of the peers' user namespace mapping (`--peer-userns`).
const PEER_USERNS_HOST_ID: u32 = 300_000;
const PEER_USERNS_SIZE: u32 = 65_536;

/// A copy of the bundle `src` at `dir` on the same rootfs (an absolute `root.path`)
/// whose container has a user namespace: a `user` entry in `linux.namespaces` and
/// `linux.uidMappings`/`gidMappings` of [`PEER_USERNS_SIZE`] IDs from
/// [`PEER_USERNS_HOST_ID`] (runtime-spec config-linux.md, "User namespace mappings").
fn make_userns_bundle(src: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join("config.json")).expect("read"))
            .expect("json");
    let root = Path::new(spec["root"]["path"].as_str().expect("root.path")).to_path_buf();
    spec["root"]["path"] = src.join(root).to_str().expect("utf-8 path").into();
    let linux = &mut spec["linux"];
    let ns = linux["namespaces"]
        .as_array_mut()
        .expect("linux.namespaces");
    if !ns.iter().any(|n| n["type"] == "user") {
        ns.push(serde_json::json!({"type": "user"}));
    }
    let map = serde_json::json!([{
        "containerID": 0, "hostID": PEER_USERNS_HOST_ID, "size": PEER_USERNS_SIZE
    }]);
    linux["uidMappings"] = map.clone();
    linux["gidMappings"] = map;
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec_pretty(&spec).expect("json"),
    )
    .expect("write");
}

/// A bundle beside `bundle` whose container sleeps (for `exec`), on the same rootfs.
fn make_sleep_bundle(bundle: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).expect("read"))
            .expect("json");
    spec["process"]["args"] = serde_json::json!(["sleep", "1000000"]);
    spec["root"]["path"] = bundle.join("rootfs").to_str().expect("utf-8 path").into();
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_vec_pretty(&spec).expect("json"),
    )
    .expect("write");
}

fn bench_exec(args: &Args, rts: &[Runtime], b: &Bench) {
    // One running container per runtime; a runtime whose container does not start is
    // reported and left out.
    let mut live = Vec::new();
    for (k, r) in rts.iter().enumerate() {
        // the pid: cgroups are named after ids, and other runs may be on the host
        let id = format!("exec-{}-{}", r.name, std::process::id());
        let bs = r.sleep_bundle.to_str().expect("utf-8 path");
        let (ok, _) = r.cmd(&["run", "--detach", "--bundle", bs, &id], &b.dog, b.timeout);
        if ok {
            live.push((k, id));
        } else {
            println!("note: {}: run --detach failed; no exec figures", r.name);
            let _ = r.cmd(&["delete", "--force", &id], &b.dog, b.timeout);
        }
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); rts.len()];
    let mut rss: Vec<Vec<i64>> = vec![Vec::new(); rts.len()];
    let mut cpus: Vec<Vec<Duration>> = vec![Vec::new(); rts.len()];
    let mut failures = vec![0usize; rts.len()];
    for (k, id) in &live {
        let _ = rts[*k].cmd(&["exec", id, "true"], &b.dog, b.timeout);
    }
    let t0 = Instant::now();
    for i in 0..args.n {
        for j in turns(live.len(), i) {
            let (k, id) = &live[j];
            b.set_window();
            let t = Instant::now();
            let (ok, m, c) = rts[*k].cmd_cpu(&["exec", id, "true"], &b.dog, b.timeout);
            let d = t.elapsed();
            if ok {
                times[*k].push(d);
                rss[*k].push(m);
                cpus[*k].push(c);
            } else {
                failures[*k] += 1;
            }
        }
        if (i + 1) % 20 == 0 {
            eprintln!("  exec {}/{} rounds, {:.0?}", i + 1, args.n, t0.elapsed());
        }
    }
    for (k, id) in &live {
        let _ = rts[*k].cmd(&["delete", "--force", id], &b.dog, b.timeout);
    }
    println!(
        "\nexec of `true` into a running container (n={})\n{:<8} {:>10} {:>10} {:>10} {:>10} {:>8}",
        args.n, "runtime", "median ms", "p90 ms", "CPU ms", "RSS MiB", "failed"
    );
    let mut names = Vec::new();
    let mut med = Vec::new();
    let mut mcpu = Vec::new();
    let mut mrss = Vec::new();
    for (k, _) in &live {
        let mut t = times[*k].clone();
        t.sort();
        let p90 = t.get(t.len() * 9 / 10).copied().unwrap_or_default();
        names.push(rts[*k].name.as_str());
        med.push(ms(median(t)));
        mcpu.push(ms(median(cpus[*k].clone())));
        mrss.push(mib(median(rss[*k].clone())));
        let j = med.len() - 1;
        println!(
            "{:<8} {:>10.2} {:>10.2} {:>10.2} {:>10.1} {:>8}",
            rts[*k].name,
            med[j],
            ms(p90),
            mcpu[j],
            mrss[j],
            failures[*k]
        );
    }
    // Ratios only with siloc's own figures.
    if live.first().is_some_and(|(k, _)| *k == 0) {
        ratios("exec median", &names, &med, "ms");
        ratios("exec CPU median", &names, &mcpu, "ms");
        ratios("exec peak RSS median", &names, &mrss, "MiB");
    }
}

fn main() {
    let args = Args::parse();
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bench-lifecycle: needs root");
        std::process::exit(1);
    }
    for m in &args.modes {
        if !matches!(m.as_str(), "lifecycle" | "run" | "parallel" | "exec") {
            eprintln!("bench-lifecycle: unknown mode {m:?} (lifecycle, run, parallel, exec)");
            std::process::exit(2);
        }
    }
    std::fs::create_dir_all(&args.workdir).expect("work dir parent");
    let work = tempfile::Builder::new()
        .prefix("siloc-bench-lifecycle-")
        .tempdir_in(&args.workdir)
        .expect("work dir");
    // Before any thread starts: a process with threads cannot unshare its mount
    // namespace. Declared after `work`, so it is dropped (detached) before it.
    let _pods = (args.pod_mounts > 0).then(|| {
        let m = pod_mounts::make(&work.path().join("pods"), args.pod_mounts);
        println!(
            "--pod-mounts {}: mountinfo has {} lines, {} KiB",
            args.pod_mounts,
            m.lines,
            m.bytes / 1024
        );
        m
    });
    let bundle = work.path().join("bundle");
    make_bundle(&bundle, &args.siloc);
    let sleep_bundle = work.path().join("bundle-sleep");
    make_sleep_bundle(&bundle, &sleep_bundle);
    // The peers' bundles: the same, or with a user namespace of their own.
    let (peer_bundle, peer_sleep_bundle) = if args.peer_userns {
        let (u, us) = (
            work.path().join("bundle-userns"),
            work.path().join("bundle-userns-sleep"),
        );
        make_userns_bundle(&bundle, &u);
        make_userns_bundle(&sleep_bundle, &us);
        println!(
            "--peer-userns: the peers' containers map IDs 0-{} to host IDs {PEER_USERNS_HOST_ID}-{}",
            PEER_USERNS_SIZE - 1,
            PEER_USERNS_HOST_ID + PEER_USERNS_SIZE - 1
        );
        (u, us)
    } else {
        (bundle.clone(), sleep_bundle.clone())
    };
    let siloc = std::fs::canonicalize(&args.siloc).expect("siloc binary");
    let mut runtimes = vec![Runtime {
        name: "siloc".into(),
        bin: siloc,
        root: work.path().join("root-siloc"),
        bundle: bundle.clone(),
        sleep_bundle: sleep_bundle.clone(),
    }];
    for peer in &args.peers {
        match which(peer) {
            Some(bin) => runtimes.push(Runtime {
                name: peer.clone(),
                bin,
                root: work.path().join(format!("root-{peer}")),
                bundle: peer_bundle.clone(),
                sleep_bundle: peer_sleep_bundle.clone(),
            }),
            None => println!("note: {peer} is not installed; skipped"),
        }
    }
    let own_procs = own_unified_procs();
    if args.cgroup_window == Window::Open && own_procs.is_none() {
        println!("note: no unified cgroup hierarchy here; --cgroup-window open does nothing");
    }
    if let Some(v) = clap::ValueEnum::to_possible_value(&args.cgroup_window) {
        println!(
            "--cgroup-window {} (timed create, run and exec)",
            v.get_name()
        );
    }
    let b = Bench {
        dog: Arc::new(Watchdog::default()),
        timeout: Duration::from_secs(args.timeout),
        window: args.cgroup_window,
        own_procs,
    };
    b.dog.start();
    for m in &args.modes {
        match m.as_str() {
            "lifecycle" => bench_lifecycle(&args, &runtimes, work.path(), &b),
            "run" => bench_run(&args, &runtimes, &b),
            "exec" => bench_exec(&args, &runtimes, &b),
            _ => bench_parallel(&args, &runtimes, &b),
        }
    }
    println!(
        "\nhung commands (killed after {} s): {}",
        args.timeout,
        b.dog.hung.load(Ordering::Relaxed)
    );
}
