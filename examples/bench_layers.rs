//! `hack/bench-layers`: N rootfs × L layers under per-container user namespaces,
//! created concurrently and deleted, three ways:
//!
//! - `per-layer`     : each layer cloned, idmapped and attached at a temporary mount
//!   point, overlayfs mounted from those paths, temporaries unmounted (the sequence of
//!   containerd 2.0/2.1): 2L+2 mount-table changes per container;
//! - `common-parent` : the layers' common parent cloned, idmapped and attached once at
//!   a temporary mount point, overlayfs from paths below it, temporary unmounted (the
//!   sequence of containerd 2.2): 4 changes per container;
//! - `siloc`         : siloc's own assembly (src/rootfs): the common parent idmapped as
//!   a detached tree, overlayfs by `lowerdir+` fds, one attach and one detach.
//!
//! Then the whole siloc runtime: N `siloc create` of L-layer bundles with
//! `io.siloc.userns=auto`, run concurrently, then `siloc delete`, for each L, repeated
//! in rounds of alternating L order, with the ratio of the median rounds' times for the
//! largest and smallest L (target ≤ 1.05) and the mount-table changes one create+delete
//! makes (strace of the siloc process, children excluded: the container's own mounts
//! happen in its mount namespace). siloc attaches the rootfs in the private mount
//! namespace `create` runs in, so the host's table (the peak column) does not grow.
//!
//! Every mount goes under a private work directory that is removed at the end.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use siloc::rootfs::{self, OverlaySpec};
use siloc::sys::mountapi;
use siloc::userns::{IdMap, userns_with_mapping};

#[derive(Parser, Debug)]
struct Args {
    /// Containers per run
    #[arg(long, default_value_t = 100)]
    n: usize,
    /// Layer counts to try
    #[arg(long, value_delimiter = ',', default_value = "1,10,50")]
    layers: Vec<usize>,
    /// Concurrent workers (default: CPUs)
    #[arg(long)]
    jobs: Option<usize>,
    /// The siloc binary for the whole-runtime part
    #[arg(long, default_value = "target/release/siloc")]
    siloc: PathBuf,
    /// Skip the whole-runtime part
    #[arg(long)]
    skip_runtime: bool,
    /// Rounds of the whole-runtime part; each round runs every L, in alternating order,
    /// and the table shows each L's median round
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Work directory parent (on disk)
    #[arg(long, default_value = "/var/tmp")]
    workdir: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    PerLayer,
    CommonParent,
    Siloc,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::PerLayer => "per-layer",
            Way::CommonParent => "common-parent",
            Way::Siloc => "siloc",
        }
    }
}

/// One measured run.
#[derive(Debug, Clone)]
struct Row {
    what: String,
    layers: usize,
    create_s: f64,
    delete_s: f64,
    ops_per_container: f64,
    peak_mountinfo: usize,
    failed: usize,
    note: String,
}

fn mountinfo_lines() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Samples the mount table length every millisecond while alive.
struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakSampler {
    fn start() -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicUsize::new(mountinfo_lines()));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(mountinfo_lines(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        PeakSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// Runs `f(i)` for i in 0..n on `jobs` threads; returns the elapsed seconds.
fn parallel(n: usize, jobs: usize, f: impl Fn(usize) + Sync) -> f64 {
    let next = AtomicUsize::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    f(i);
                }
            });
        }
    });
    t0.elapsed().as_secs_f64()
}

/// A busybox base and `l - 1` small layers under `dir`, base first.
fn make_layers(dir: &Path, l: usize) -> Vec<PathBuf> {
    let base = dir.join("l000");
    for d in ["bin", "etc", "proc", "sys", "dev", "tmp"] {
        std::fs::create_dir_all(base.join(d)).expect("mkdir");
    }
    std::fs::copy("/bin/busybox", base.join("bin/busybox")).expect("copy /bin/busybox");
    for a in ["sh", "true", "cat", "sleep"] {
        let _ = std::os::unix::fs::symlink("busybox", base.join("bin").join(a));
    }
    let mut v = vec![base];
    for i in 1..l {
        let d = dir.join(format!("l{i:03}"));
        std::fs::create_dir_all(d.join("etc")).expect("mkdir");
        std::fs::write(d.join("etc/layer"), i.to_string()).expect("write");
        std::fs::write(d.join(format!("file{i}")), "x").expect("write");
        v.push(d);
    }
    v
}

fn userns(i: usize) -> std::os::fd::OwnedFd {
    let host = 1_000_000 + (i as u32) * 65536;
    let m = [IdMap {
        container_id: 0,
        host_id: host,
        size: 65536,
    }];
    userns_with_mapping(&m, &m).expect("throwaway user namespace")
}

/// The per-container dirs: target, upper, work, and a temp dir for mount points.
fn dirs(base: &Path, i: usize) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let c = base.join(format!("c{i}"));
    let (t, u, w, m) = (
        c.join("rootfs"),
        c.join("upper"),
        c.join("work"),
        c.join("tmp"),
    );
    for d in [&t, &u, &w, &m] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    let host = 1_000_000 + (i as u32) * 65536;
    for d in [&u, &w] {
        std::os::unix::fs::chown(d, Some(host), Some(host)).expect("chown");
    }
    (t, u, w, m)
}

/// Creates one rootfs the given way; returns the mount-table changes it made.
fn create(way: Way, layers: &[PathBuf], base: &Path, i: usize) -> Result<usize, String> {
    let (target, upper, work, tmp) = dirs(base, i);
    let ns = userns(i);
    let opts = |lower: &[String]| {
        format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.iter().rev().cloned().collect::<Vec<_>>().join(":"),
            upper.display(),
            work.display()
        )
    };
    let e = |what: &str| {
        let what = what.to_string();
        move |err: nix::Error| format!("{what}: {err}")
    };
    match way {
        Way::Siloc => {
            // As siloc's prepare does: check the layers, then assemble.
            let checked = rootfs::check_layers(layers).map_err(|x| x.to_string())?;
            let spec = OverlaySpec {
                layers: &checked,
                upper: &upper,
                work: &work,
                source: "siloc-bench",
            };
            rootfs::mount_overlay(&target, &spec, Some(ns.as_fd())).map_err(|x| x.to_string())?;
            Ok(1)
        }
        Way::PerLayer => {
            let mut ops = 0;
            let mut lower = Vec::new();
            for (j, l) in layers.iter().enumerate() {
                let t = mountapi::clone_tree(l, false).map_err(e("open_tree"))?;
                mountapi::set_attr(
                    t.as_fd(),
                    mountapi::MOUNT_ATTR_IDMAP,
                    Some(ns.as_fd()),
                    false,
                )
                .map_err(e("mount_setattr"))?;
                let mp = tmp.join(j.to_string());
                std::fs::create_dir_all(&mp).map_err(|x| x.to_string())?;
                mountapi::move_mount_to(t.as_fd(), &mp).map_err(e("move_mount"))?;
                ops += 1;
                lower.push(mp.display().to_string());
            }
            let r = mount(
                Some("overlay"),
                &target,
                Some("overlay"),
                MsFlags::empty(),
                Some(opts(&lower).as_str()),
            );
            for l in &lower {
                umount2(l.as_str(), MntFlags::MNT_DETACH).map_err(e("umount"))?;
                ops += 1;
            }
            r.map_err(e("mount overlay"))?;
            Ok(ops + 1)
        }
        Way::CommonParent => {
            let parent = layers[0].parent().ok_or("layer has no parent")?;
            let t = mountapi::clone_tree(parent, false).map_err(e("open_tree"))?;
            mountapi::set_attr(
                t.as_fd(),
                mountapi::MOUNT_ATTR_IDMAP,
                Some(ns.as_fd()),
                false,
            )
            .map_err(e("mount_setattr"))?;
            mountapi::move_mount_to(t.as_fd(), &tmp).map_err(e("move_mount"))?;
            let lower: Vec<String> = layers
                .iter()
                .map(|l| {
                    tmp.join(l.file_name().unwrap_or_default())
                        .display()
                        .to_string()
                })
                .collect();
            let r = mount(
                Some("overlay"),
                &target,
                Some("overlay"),
                MsFlags::empty(),
                Some(opts(&lower).as_str()),
            );
            umount2(&tmp, MntFlags::MNT_DETACH).map_err(e("umount"))?;
            r.map_err(e("mount overlay"))?;
            Ok(3)
        }
    }
}

fn destroy(base: &Path, i: usize) -> usize {
    let c = base.join(format!("c{i}"));
    let target = c.join("rootfs");
    let n = usize::from(umount2(&target, MntFlags::empty()).is_ok());
    let _ = std::fs::remove_dir_all(&c);
    n
}

fn run_way(way: Way, layers: &[PathBuf], base: &Path, n: usize, jobs: usize) -> Row {
    std::fs::create_dir_all(base).expect("mkdir");
    let ops = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let first_err = std::sync::Mutex::new(String::new());
    let sampler = PeakSampler::start();
    let create_s = parallel(n, jobs, |i| match create(way, layers, base, i) {
        Ok(k) => {
            ops.fetch_add(k, Ordering::Relaxed);
        }
        Err(e) => {
            failed.fetch_add(1, Ordering::Relaxed);
            let mut f = first_err.lock().unwrap_or_else(|p| p.into_inner());
            if f.is_empty() {
                *f = e;
            }
        }
    });
    let delete_s = parallel(n, jobs, |i| {
        ops.fetch_add(destroy(base, i), Ordering::Relaxed);
    });
    let peak = sampler.finish();
    let _ = std::fs::remove_dir_all(base);
    let ok = n - failed.load(Ordering::Relaxed);
    Row {
        what: way.name().to_string(),
        layers: layers.len(),
        create_s,
        delete_s,
        ops_per_container: if ok == 0 {
            0.0
        } else {
            ops.load(Ordering::Relaxed) as f64 / ok as f64
        },
        peak_mountinfo: peak,
        failed: failed.load(Ordering::Relaxed),
        note: first_err.into_inner().unwrap_or_default(),
    }
}

/// A bundle for the whole-runtime part: empty rootfs, layers, per-container userns.
fn runtime_bundle(dir: &Path, siloc: &Path, layers: &[PathBuf]) {
    std::fs::create_dir_all(dir.join("rootfs")).expect("mkdir");
    let st = Command::new(siloc)
        .args(["spec", "--bundle"])
        .arg(dir)
        .status()
        .expect("siloc spec");
    assert!(st.success());
    let p = dir.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
    spec["process"]["terminal"] = false.into();
    spec["process"]["args"] = serde_json::json!(["sleep", "1000"]);
    spec["root"]["readonly"] = false.into();
    spec["annotations"] = serde_json::json!({
        "io.siloc.userns": "auto",
        "io.siloc.rootfs.layers": serde_json::to_string(layers).expect("json"),
    });
    std::fs::write(&p, serde_json::to_vec(&spec).expect("json")).expect("write");
}

/// `siloc --root S --config C`; stderr goes to `err` (a file: the container inherits
/// siloc's stdio, and a pipe would stay open as long as the container lives).
fn siloc_cmd(siloc: &Path, state: &Path, cfg: &Path, err: &Path) -> Command {
    let mut c = Command::new(siloc);
    c.arg("--root").arg(state).arg("--config").arg(cfg);
    let f = std::fs::File::create(err).map_or(Stdio::null(), Stdio::from);
    c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(f);
    c
}

/// Mount-table changes of one `siloc create` + `siloc delete` in the host namespace.
fn runtime_ops(siloc: &Path, state: &Path, cfg: &Path, bundle: &Path) -> Option<usize> {
    let trace = |args: &[&str], out: &Path| {
        Command::new("strace")
            .args(["-qq", "-e", "trace=mount,umount2,move_mount,fsmount", "-o"])
            .arg(out)
            .arg(siloc)
            .arg("--root")
            .arg(state)
            .arg("--config")
            .arg(cfg)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .ok()
            .filter(|s| s.success())
    };
    let out = state.with_extension("strace");
    let b = bundle.to_str()?;
    trace(&["create", "--bundle", b, "ops-probe"], &out)?;
    // Only move_mount, mount and umount2 change a mount table; a detached fsmount
    // does not until it is moved, nor does a mount(2) that only sets propagation.
    let count = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                ["mount(", "umount2(", "move_mount("]
                    .iter()
                    .any(|c| l.starts_with(c))
                    && !l.contains("= -1")
                    && !propagation_only(l)
            })
            .count()
    };
    let created = count(&out);
    trace(&["delete", "--force", "ops-probe"], &out)?;
    let deleted = count(&out);
    let _ = std::fs::remove_file(&out);
    Some(created + deleted)
}

/// Whether a strace line is `mount(NULL, path, NULL, MS_SLAVE|MS_PRIVATE|…, NULL)`:
/// a propagation change, which adds or removes no mount.
fn propagation_only(line: &str) -> bool {
    let Some(flags) = line
        .strip_prefix("mount(NULL, ")
        .and_then(|r| r.split_once(", NULL, "))
        .and_then(|(_, r)| r.split_once(','))
        .map(|(f, _)| f)
    else {
        return false;
    };
    flags.split('|').all(|f| {
        [
            "MS_SLAVE",
            "MS_PRIVATE",
            "MS_SHARED",
            "MS_UNBINDABLE",
            "MS_REC",
        ]
        .contains(&f.trim())
    })
}

fn run_runtime(args: &Args, work: &Path, l: usize, layers: &[PathBuf], jobs: usize) -> Row {
    let state = work.join(format!("state-{l}"));
    let cfg = work.join("siloc.toml");
    let bundle_root = work.join(format!("bundles-{l}"));
    for i in 0..=args.n {
        runtime_bundle(&bundle_root.join(i.to_string()), &args.siloc, layers);
    }
    let ids: Vec<String> = (0..args.n).map(|i| format!("bench-{l}-{i}")).collect();
    let failed = AtomicUsize::new(0);
    let note = std::sync::Mutex::new(String::new());
    let sampler = PeakSampler::start();
    let err_file = |i: usize| bundle_root.join(format!("{i}.err"));
    let create_s = parallel(args.n, jobs, |i| {
        let st = siloc_cmd(&args.siloc, &state, &cfg, &err_file(i))
            .arg("create")
            .arg("--bundle")
            .arg(bundle_root.join(i.to_string()))
            .arg(&ids[i])
            .status();
        if !st.is_ok_and(|s| s.success()) {
            failed.fetch_add(1, Ordering::Relaxed);
            let mut n = note.lock().unwrap_or_else(|p| p.into_inner());
            *n = std::fs::read_to_string(err_file(i))
                .unwrap_or_default()
                .trim()
                .to_string();
        }
    });
    let delete_s = parallel(args.n, jobs, |i| {
        let _ = siloc_cmd(&args.siloc, &state, &cfg, &err_file(i))
            .args(["delete", "--force", &ids[i]])
            .status();
    });
    let peak = sampler.finish();
    let ops = runtime_ops(
        &args.siloc,
        &state,
        &cfg,
        &bundle_root.join(args.n.to_string()),
    );
    let _ = std::fs::remove_dir_all(&bundle_root);
    Row {
        what: "siloc runtime".into(),
        layers: l,
        create_s,
        delete_s,
        ops_per_container: ops.map_or(f64::NAN, |o| o as f64),
        peak_mountinfo: peak,
        failed: failed.load(Ordering::Relaxed),
        note: note.into_inner().unwrap_or_default(),
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "\n{:<15} {:>6} {:>10} {:>10} {:>10} {:>16} {:>14} {:>7}",
        "way",
        "layers",
        "create s",
        "delete s",
        "total s",
        "mount ops/ctr",
        "peak mountinfo",
        "failed"
    );
    for r in rows {
        println!(
            "{:<15} {:>6} {:>10.3} {:>10.3} {:>10.3} {:>16.1} {:>14} {:>7}",
            r.what,
            r.layers,
            r.create_s,
            r.delete_s,
            r.create_s + r.delete_s,
            r.ops_per_container,
            r.peak_mountinfo,
            r.failed
        );
    }
    for r in rows.iter().filter(|r| r.failed > 0) {
        println!("  {} L={}: {}", r.what, r.layers, r.note);
    }
}

fn main() {
    let args = Args::parse();
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bench-layers: needs root (it mounts)");
        std::process::exit(1);
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let work = tempfile::Builder::new()
        .prefix("siloc-bench-layers-")
        .tempdir_in(&args.workdir)
        .expect("work dir");
    let cfg = format!(
        "data_root = {:?}\n",
        work.path().join("data").display().to_string()
    );
    std::fs::write(work.path().join("siloc.toml"), cfg).expect("config");
    println!(
        "bench-layers: N={} rootfs per run, L in {:?}, {} workers, base mount table {} lines",
        args.n,
        args.layers,
        jobs,
        mountinfo_lines()
    );
    let mut rows = Vec::new();
    let mut layer_sets = Vec::new();
    for &l in &args.layers {
        let layers = make_layers(&work.path().join(format!("layers-{l}")), l);
        for way in [Way::PerLayer, Way::CommonParent, Way::Siloc] {
            eprintln!("  L={l:<4} {:<14} ...", way.name());
            rows.push(run_way(
                way,
                &layers,
                &work.path().join(format!("run-{l}")),
                args.n,
                jobs,
            ));
        }
        layer_sets.push((l, layers));
    }
    let mut rounds: Vec<(usize, Vec<f64>)> = Vec::new();
    if !args.skip_runtime {
        let mut runs: Vec<(usize, Vec<Row>)> =
            layer_sets.iter().map(|(l, _)| (*l, Vec::new())).collect();
        for round in 0..args.rounds.max(1) {
            // Alternate the order: whatever drifts over a run (page cache, dying
            // cgroups, other load) must not land on one L only.
            let mut order: Vec<usize> = (0..layer_sets.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for k in order {
                let (l, layers) = &layer_sets[k];
                eprintln!(
                    "  L={l:<4} siloc runtime  round {}/{} ...",
                    round + 1,
                    args.rounds.max(1)
                );
                runs[k]
                    .1
                    .push(run_runtime(&args, work.path(), *l, layers, jobs));
            }
        }
        for (l, mut v) in runs {
            v.sort_by(|a, b| (a.create_s + a.delete_s).total_cmp(&(b.create_s + b.delete_s)));
            rounds.push((l, v.iter().map(|r| r.create_s + r.delete_s).collect()));
            let mid = v.len() / 2;
            rows.push(v.swap_remove(mid));
        }
    }
    print_table(&rows);
    for (l, totals) in &rounds {
        let t: Vec<String> = totals.iter().map(|t| format!("{t:.3}")).collect();
        println!(
            "siloc runtime L={l}: rounds (sorted, total s) {}",
            t.join(", ")
        );
    }
    println!();
    let total = |what: &str, l: usize| {
        rows.iter()
            .find(|r| r.what == what && r.layers == l && r.failed == 0)
            .map(|r| r.create_s + r.delete_s)
    };
    for &l in &args.layers {
        for peer in ["per-layer", "common-parent"] {
            if let (Some(s), Some(p)) = (total("siloc", l), total(peer, l)) {
                println!(
                    "rootfs create+delete, L={l}: siloc {s:.3} s, {peer} {p:.3} s, ratio {:.2}",
                    s / p
                );
            }
        }
    }
    let (lo, hi) = (args.layers.iter().min(), args.layers.iter().max());
    if let (Some(&lo), Some(&hi)) = (lo, hi)
        && let (Some(a), Some(b)) = (total("siloc runtime", lo), total("siloc runtime", hi))
    {
        println!(
            "siloc runtime create+delete of {} containers (median of {} rounds): L={hi} {b:.3} s, L={lo} {a:.3} s, ratio {:.2} (target <= 1.05)",
            args.n,
            args.rounds.max(1),
            b / a
        );
    }
}
