//! A whole run: lock, clear a crashed run's leftovers, build the image, check each
//! runtime, lay out the victim's file, then the cells one at a time, each appended to
//! `results.jsonl` as it finishes; at the end (or on Ctrl-C) everything made is
//! removed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::cell::{self, CellCtx, CellError, CellKey, CellResult};
use super::container::{
    self, BundleSpec, Container, ContainerError, ID_PREFIX, Journal, JournalLine,
};
use super::file::{ClassLimits, RuntimeKind, Scenario};
use super::host::{self, HostFacts};
use super::image;
use super::progress::{Progress, human};
use super::runtime::{self, Resolved, Runtime};
use super::store::{RunMeta, Skipped, Store, StoreError};
use crate::units::format_size;

/// Errors that stop a run before or between cells; each names what is at fault.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    File(#[from] super::file::ScenarioFileError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Image(#[from] image::ImageError),
    #[error(transparent)]
    Host(#[from] host::HostError),
    #[error(transparent)]
    Container(#[from] ContainerError),
    #[error("{path}: {msg}")]
    Path { path: PathBuf, msg: String },
    #[error("{0}")]
    Usage(String),
    #[error("no runtime of the scenario can run here: {0}")]
    NoRuntime(String),
    #[error("interrupted after {done} of {total} cells; `siloc scenario run --resume --out {}` continues", out.display())]
    Interrupted {
        done: usize,
        total: usize,
        out: PathBuf,
    },
}

fn path_err(path: &Path, msg: impl std::fmt::Display) -> RunError {
    RunError::Path {
        path: path.to_path_buf(),
        msg: msg.to_string(),
    }
}

/// What `siloc scenario run` was asked.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub file: Option<PathBuf>,
    pub quick: bool,
    pub out: Option<PathBuf>,
    pub resume: bool,
    /// Only these runtimes of the scenario (by name).
    pub only: Option<Vec<String>>,
    /// Private state: lock, journal, the runtimes' state roots.
    pub state_base: PathBuf,
    /// Where the scenario image is kept (`<data_root>/scenario/image`).
    pub image_dir: PathBuf,
    /// This siloc binary: the `siloc` runtime kind's default.
    pub self_exe: PathBuf,
}

/// The output directory of a finished run.
pub struct RunOutcome {
    pub out: PathBuf,
    pub cells: usize,
    pub failed: usize,
}

/// Prefix of default output directories (`siloc-scenario-20261130-131500`).
pub const OUT_PREFIX: &str = "siloc-scenario-";

/// The scenario this invocation means: its file or the built-in one, `--quick`
/// applied, restricted to `only`.
pub fn scenario_of(opts: &RunOptions) -> Result<Scenario, RunError> {
    let mut s = match &opts.file {
        Some(f) => Scenario::load(f, opts.quick)?,
        None => Scenario::builtin(opts.quick)?,
    };
    if let Some(only) = &opts.only {
        for name in only {
            if !s.runtimes.iter().any(|r| &r.name == name) {
                let known: Vec<&str> = s.runtimes.iter().map(|r| r.name.as_str()).collect();
                return Err(RunError::Usage(format!(
                    "--runtime {name}: the scenario has no such runtime (it has {})",
                    known.join(", ")
                )));
            }
        }
        s.runtimes.retain(|r| only.contains(&r.name));
    }
    Ok(s)
}

/// The output directory: `--out`, else a new timestamped one; with `--resume` and no
/// `--out`, the newest unfinished-or-not `siloc-scenario-*` in the current directory.
fn out_dir(opts: &RunOptions) -> Result<PathBuf, RunError> {
    if let Some(o) = &opts.out {
        return Ok(o.clone());
    }
    if opts.resume {
        let mut runs: Vec<PathBuf> = std::fs::read_dir(".")
            .map_err(|e| path_err(Path::new("."), e))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(OUT_PREFIX))
                    && p.join(super::store::RUN_FILE).exists()
            })
            .collect();
        runs.sort();
        return runs.pop().ok_or_else(|| {
            RunError::Usage(format!(
                "--resume: no {OUT_PREFIX}* directory here; name one with --out"
            ))
        });
    }
    Ok(PathBuf::from(format!(
        "{OUT_PREFIX}{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S")
    )))
}

/// Holds the run locks while alive; on drop removes the lock file and the state
/// directory when nothing else is left in it (like the runtimes' own state roots).
struct Lock {
    path: PathBuf,
    _state: crate::sys::lock::Lock,
    _target: crate::sys::lock::Lock,
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Unlinked while still locked: a run waiting on the old file sees the path
        // changed and takes the new one (see `lock`).
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Takes `<state>/lock` and the target directory itself (flock, released when the
/// run's process ends; the target keeps no file of it): two runs on one state root
/// would clear each other's containers as leftovers, and two on one target each
/// other's work directories.
fn lock(state_base: &Path, target: &Path) -> Result<Lock, RunError> {
    use std::os::unix::fs::MetadataExt;
    let take = |file: std::fs::File, p: &Path, msg: &str| {
        crate::sys::lock::lock_file(file, crate::sys::lock::Mode::TryExclusive)
            .map_err(|_| path_err(p, msg))
    };
    // The target first: failing there must not leave a lock file behind.
    std::fs::create_dir_all(target).map_err(|e| path_err(target, e))?;
    let dir = std::fs::File::open(target).map_err(|e| path_err(target, e))?;
    let target = take(
        dir,
        target,
        "another scenario run uses this target; wait for it to finish or pick another \
         scenario.target",
    )?;
    let p = state_base.join("lock");
    let state = loop {
        std::fs::create_dir_all(state_base).map_err(|e| path_err(state_base, e))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&p)
            .map_err(|e| path_err(&p, e))?;
        let flock = take(
            file,
            &p,
            "another scenario run holds this lock; wait for it to finish",
        )?;
        // The previous holder may have unlinked the file between our open and flock.
        let ours = flock.file().metadata().map_err(|e| path_err(&p, e))?.ino();
        if std::fs::metadata(&p).is_ok_and(|m| m.ino() == ours) {
            break flock;
        }
    };
    Ok(Lock {
        path: p,
        _state: state,
        _target: target,
    })
}

/// Removes what a crashed run left: journaled containers and directories, and work
/// directories under the target recognised by their prefix.
fn clear_leftovers(journal: &Journal, target: &Path, progress: &dyn Fn(&str)) {
    for what in journal.clear() {
        progress(&format!("removed leftover {what}"));
    }
    if let Ok(rd) = std::fs::read_dir(target) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(ID_PREFIX) && e.path().is_dir() {
                let _ = std::fs::remove_dir_all(e.path());
                progress(&format!(
                    "removed leftover directory {}",
                    e.path().display()
                ));
            }
        }
    }
}

/// The siloc host config the runner hands a siloc runtime: data root inside the run
/// directory (on the disk under test) and, for a policy runtime, the I/O classes.
pub fn siloc_config(
    data_root: &Path,
    classes: Option<&std::collections::BTreeMap<String, ClassLimits>>,
) -> String {
    let mut t = format!(
        "# written by siloc scenario run\ndata_root = {:?}\n",
        data_root.to_string_lossy()
    );
    for (name, c) in classes.into_iter().flatten() {
        t.push_str(&format!("\n[io.class.{name}]\n"));
        if let Some(v) = c.rbps {
            t.push_str(&format!("rbps = {:?}\n", format_size(v.0)));
        }
        if let Some(v) = c.wbps {
            t.push_str(&format!("wbps = {:?}\n", format_size(v.0)));
        }
        if let Some(v) = c.riops {
            t.push_str(&format!("riops = {v}\n"));
        }
        if let Some(v) = c.wiops {
            t.push_str(&format!("wiops = {v}\n"));
        }
        if let Some(v) = c.weight {
            t.push_str(&format!("weight = {v}\n"));
        }
        if let Some(v) = &c.latency_target {
            t.push_str(&format!("latency_target = {v:?}\n"));
        }
    }
    t
}

/// Writes the victim's file: `size` bytes of non-repeating data, synced, so reads hit
/// real blocks (a sparse file would read holes without touching the disk).
fn lay_out(path: &Path, size: u64, stop: &dyn Fn() -> bool) -> Result<(), RunError> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).map_err(|e| path_err(path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut left = size;
    while left > 0 {
        if stop() {
            return Err(RunError::Usage(
                "interrupted while laying out the victim's file".into(),
            ));
        }
        for chunk in buf.chunks_exact_mut(8) {
            // xorshift64: cheap bytes no filesystem or disk can dedupe or compress.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n]).map_err(|e| path_err(path, e))?;
        left -= n as u64;
    }
    f.sync_all().map_err(|e| path_err(path, e))
}

/// Seconds one cell is expected to take (for the progress bar's first estimate).
fn cell_estimate(s: &Scenario) -> f64 {
    let alone = if s.neighbours.alone {
        s.warmup + s.duration
    } else {
        0
    };
    let idle = if s.neighbours.idle_victim {
        s.duration
    } else {
        0
    };
    // Plus the set-up of the cell's 7 containers, 3 syncs and the neighbours' files:
    // 12 s a cell measured (`--quick`, 2026-12-07: 839 s for 15 cells of 44 s phases).
    f64::from(2 * (s.ramp + s.duration) + s.warmup + alone + idle) + CELL_SETUP_SECS
}

/// Seconds a cell spends outside its measured phases (see [`cell_estimate`]).
const CELL_SETUP_SECS: f64 = 12.0;

/// What the classes of policy runtime `entry` need on the target's disk that this
/// host does not offer (`iopolicy::host::unmet`), as one note; `None`: all applies.
/// Such a runtime is skipped, so the report says why instead of showing a figure.
pub fn unmet_classes(
    s: &Scenario,
    entry: &super::file::RuntimeEntry,
    cgroup: &crate::iopolicy::CgroupIo,
    disk: &str,
    dev: crate::numa::locality::DevNum,
    sched: Option<&crate::iopolicy::Scheduler>,
) -> Option<String> {
    if !entry.policy {
        return None;
    }
    let mut notes = Vec::new();
    for (role, class) in [
        ("victim", &entry.victim_class),
        ("neighbour", &entry.neighbour_class),
    ] {
        let Some(c) = class else { continue };
        let Some(limits) = s.policy.classes.get(c).map(ClassLimits::limits) else {
            continue;
        };
        for m in crate::iopolicy::host::unmet(&limits, cgroup, disk, dev, sched) {
            notes.push(format!("{role} class {c}: {m}"));
        }
    }
    (!notes.is_empty()).then(|| format!("this host cannot apply it: {}", notes.join("; ")))
}

/// Runs the scenario. Errors stop the run; a failing cell is recorded and the run
/// goes on (a runtime whose first cells all fail is dropped with a note).
pub fn run(opts: &RunOptions) -> Result<RunOutcome, RunError> {
    let stop_flag = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop_flag))
            .map_err(|e| RunError::Usage(format!("install signal handler: {e}")))?;
    }
    let stop = move || stop_flag.load(Ordering::Relaxed);

    let out = out_dir(opts)?;
    let store = Store::new(&out);
    let wanted = scenario_of(opts)?;
    if !nix::unistd::geteuid().is_root() {
        return Err(RunError::Usage(
            "siloc scenario run needs root: it runs containers and drops the page cache".into(),
        ));
    }
    let (scenario, started) = if opts.resume {
        let meta = store.meta()?;
        if (opts.file.is_some() || opts.quick || opts.only.is_some()) && wanted != meta.scenario {
            return Err(RunError::Usage(format!(
                "--resume: the scenario given differs from the one {} was started with; \
                 drop the file and flags to continue it, or start a new --out",
                out.display()
            )));
        }
        (meta.scenario, meta.started)
    } else {
        if !store.cells()?.is_empty() {
            return Err(path_err(
                &out,
                "holds results of an earlier run: pass --resume to continue it, or another --out",
            ));
        }
        (wanted, chrono::Utc::now().to_rfc3339())
    };

    let _lock = lock(&opts.state_base, &scenario.target)?;
    let journal = Journal {
        path: opts.state_base.join("journal.jsonl"),
    };
    let early = |line: &str| tracing::warn!(target: "siloc", "{line}");
    clear_leftovers(&journal, &scenario.target, &early);

    let result = run_locked(opts, &scenario, &store, &started, &journal, &stop);
    // However the run ended: remove what it made.
    for what in journal.clear() {
        tracing::debug!(target: "siloc", "removed {what}");
    }
    container::remove_cgroup_parents();
    // The runtimes' state roots, when their runtimes left them empty.
    let rt_base = opts.state_base.join("rt");
    if let Ok(rd) = std::fs::read_dir(&rt_base) {
        for e in rd.flatten() {
            crate::lifecycle::record::remove_empty_root(&e.path());
        }
    }
    let _ = std::fs::remove_dir(&rt_base);
    result
}

fn run_locked(
    opts: &RunOptions,
    scenario: &Scenario,
    store: &Store,
    started: &str,
    journal: &Journal,
    stop: &dyn Fn() -> bool,
) -> Result<RunOutcome, RunError> {
    let s = scenario;
    std::fs::create_dir_all(&s.target).map_err(|e| path_err(&s.target, e))?;
    let facts: HostFacts = host::facts(&s.target)?;

    let fio = image::which("fio").ok_or_else(|| image::ImageError::Missing {
        tool: "fio".into(),
        hint: "apt-get install fio".into(),
    })?;
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| image::ImageError::Missing {
            tool: "busybox".into(),
            hint: "apt-get install busybox-static".into(),
        })?;
    let image = image::ensure(&opts.image_dir, &fio, &busybox)?;

    // Space: the victim's file and every neighbour's largest file at once.
    let largest = s.neighbours.sizes.iter().copied().max().unwrap_or(0);
    let need = s.victim_file_size + u64::from(s.neighbours.count) * largest;
    let free = host::free_bytes(&s.target)?;
    if free < need + need / 10 {
        return Err(path_err(
            &s.target,
            format!(
                "{} free, the scenario needs about {} (victim file + {} neighbours x {})",
                format_size_approx(free),
                format_size_approx(need + need / 10),
                s.neighbours.count,
                format_size(largest)
            ),
        ));
    }

    let run_id = format!(
        "{:x}{:04x}",
        chrono::Utc::now().timestamp() & 0xffff_ffff,
        std::process::id() & 0xffff
    );
    let run_dir = s.target.join(format!("{ID_PREFIX}{run_id}"));
    journal.add(&JournalLine::Dir(run_dir.clone()))?;
    let victim_dir = run_dir.join("victim");
    std::fs::create_dir_all(&victim_dir).map_err(|e| path_err(&victim_dir, e))?;
    let seq = AtomicU32::new(0);
    let new_id = |role: &str| {
        format!(
            "{ID_PREFIX}{run_id}-{}-{role}",
            seq.fetch_add(1, Ordering::Relaxed)
        )
    };

    // Runtimes: resolve, give siloc its config, and check each runs the image.
    let plain_cfg = run_dir.join("siloc.toml");
    let policy_cfg = run_dir.join("siloc-policy.toml");
    let data_root = run_dir.join("siloc-data");
    let write = |p: &Path, t: String| std::fs::write(p, t).map_err(|e| path_err(p, e));
    write(&plain_cfg, siloc_config(&data_root, None))?;
    write(
        &policy_cfg,
        siloc_config(&data_root, Some(&s.policy.classes)),
    )?;
    let mut ready: Vec<Runtime> = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    let host_cgroup = crate::iopolicy::CgroupIo::read(Path::new("/sys/fs/cgroup"));
    let host_sched = crate::iopolicy::read_scheduler(Path::new("/sys"), &facts.disk.name);
    let target_dev = crate::numa::locality::DevNum::new(
        u32::try_from(facts.disk.major).unwrap_or(u32::MAX),
        u32::try_from(facts.disk.minor).unwrap_or(u32::MAX),
    );
    for entry in &s.runtimes {
        if let Some(note) = unmet_classes(
            s,
            entry,
            &host_cgroup,
            &facts.disk.name,
            target_dev,
            host_sched.as_ref(),
        ) {
            skipped.push(Skipped {
                name: entry.name.clone(),
                note,
            });
            continue;
        }
        match runtime::resolve(entry, &opts.self_exe, &opts.state_base.join("rt")) {
            Resolved::Skipped { name, note } => skipped.push(Skipped { name, note }),
            Resolved::Ready(mut rt) => {
                if rt.entry.kind == RuntimeKind::Siloc {
                    rt.config = Some(if rt.entry.policy {
                        policy_cfg.clone()
                    } else {
                        plain_cfg.clone()
                    });
                }
                if rt.entry.kind == RuntimeKind::Crun {
                    match host::ensure_hugetlb_for_crun() {
                        Ok(true) => tracing::warn!(target: "siloc",
                            "mounted the cgroup v1 hugetlb hierarchy at /sys/fs/cgroup/hugetlb: crun 1.8 needs it on this hybrid host (it stays mounted)"),
                        Ok(false) => {}
                        Err(e) => tracing::warn!(target: "siloc", "crun may fail: {e}"),
                    }
                }
                match smoke_check(
                    &rt,
                    journal,
                    &image.rootfs,
                    &run_dir,
                    &run_id,
                    &new_id,
                    stop,
                ) {
                    Ok(()) => ready.push(rt),
                    Err(ContainerError::Interrupted) => {
                        return Err(RunError::Interrupted {
                            done: 0,
                            total: s.cell_count(),
                            out: store.dir.clone(),
                        });
                    }
                    Err(e) => skipped.push(Skipped {
                        name: entry.name.clone(),
                        note: format!("cannot run the scenario image: {e}"),
                    }),
                }
            }
        }
    }
    for sk in &skipped {
        tracing::warn!(target: "siloc", "runtime {} skipped: {}", sk.name, sk.note);
    }
    store.write_meta(&RunMeta {
        siloc_version: env!("CARGO_PKG_VERSION").to_string(),
        started: started.to_string(),
        scenario: s.clone(),
        host: facts.clone(),
        skipped: skipped.clone(),
    })?;
    if ready.is_empty() {
        let notes: Vec<String> = skipped
            .iter()
            .map(|k| format!("{}: {}", k.name, k.note))
            .collect();
        return Err(RunError::NoRuntime(notes.join("; ")));
    }

    // Cells in the order that spreads drift evenly: repetition, size, workload, runtime.
    let done = store.done()?;
    let mut todo: Vec<CellKey> = Vec::new();
    for rep in 1..=s.repetitions {
        for &size in &s.neighbours.sizes {
            for w in &s.workloads {
                for rt in &ready {
                    let key = CellKey {
                        runtime: rt.name().to_string(),
                        workload: w.name.clone(),
                        neighbour_size: size,
                        repetition: rep,
                    };
                    if !done.contains(&key) {
                        todo.push(key);
                    }
                }
            }
        }
    }
    let total = todo.len();
    let progress = Progress::new(done.len(), done.len() + total, cell_estimate(s));
    if !done.is_empty() {
        progress.println(&format!(
            "resuming: {} cells done, {total} to go",
            done.len()
        ));
    }
    progress.println(&format!(
        "{total} cells, about {} (runtimes: {})",
        human(Duration::from_secs_f64(total as f64 * cell_estimate(s))),
        ready
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let victim_file = victim_dir.join("victim.dat");
    progress.step(&format!(
        "laying out the victim's {} file",
        format_size(s.victim_file_size)
    ));
    if let Err(e) = lay_out(&victim_file, s.victim_file_size, stop) {
        progress.finish();
        if stop() {
            return Err(RunError::Interrupted {
                done: 0,
                total,
                out: store.dir.clone(),
            });
        }
        return Err(e);
    }

    let mut failed = 0;
    let mut failures_in_a_row: std::collections::HashMap<String, usize> = Default::default();
    let mut dropped: Vec<String> = Vec::new();
    for (i, key) in todo.iter().enumerate() {
        if dropped.contains(&key.runtime) {
            continue;
        }
        let Some(rt) = ready.iter().find(|r| r.name() == key.runtime) else {
            continue;
        };
        let Some(w) = s.workloads.iter().find(|w| w.name == key.workload) else {
            continue;
        };
        progress.cell(&format!(
            "{} · {} · {} neighbours x {} · rep {}",
            key.runtime,
            key.workload,
            s.neighbours.count,
            format_size(key.neighbour_size),
            key.repetition
        ));
        let step = |st: cell::Step| progress.step(st.label());
        let ctx = CellCtx {
            scenario: s,
            rootfs: &image.rootfs,
            journal,
            run_id: &run_id,
            run_dir: &run_dir,
            victim_dir: &victim_dir,
            disk: &facts.disk,
            cgroup_io: facts.cgroup_io,
            stop,
            step: &step,
            new_id: &new_id,
        };
        let t0 = Instant::now();
        let started = chrono::Utc::now().to_rfc3339();
        let outcome = cell::run(&ctx, rt, w, key);
        let (figures, error) = match outcome {
            Ok(f) => (Some(f), None),
            Err(CellError::Interrupted) => {
                progress.finish();
                return Err(RunError::Interrupted {
                    done: done.len() + i,
                    total: done.len() + total,
                    out: store.dir.clone(),
                });
            }
            Err(e) => {
                if stop() {
                    progress.finish();
                    return Err(RunError::Interrupted {
                        done: done.len() + i,
                        total: done.len() + total,
                        out: store.dir.clone(),
                    });
                }
                progress.println(&format!("cell failed: {e}"));
                (None, Some(e.to_string()))
            }
        };
        let streak = failures_in_a_row.entry(key.runtime.clone()).or_default();
        if error.is_some() {
            failed += 1;
            *streak += 1;
            if *streak >= 2 {
                dropped.push(key.runtime.clone());
                progress.println(&format!(
                    "runtime {} failed twice in a row: its remaining cells are skipped",
                    key.runtime
                ));
            }
        } else {
            *streak = 0;
        }
        store.append(&CellResult {
            key: key.clone(),
            started,
            seconds: t0.elapsed().as_secs_f64(),
            baseline: figures.as_ref().map(|f| f.baseline.clone()),
            noise: figures.as_ref().map(|f| f.noise.clone()),
            alone: figures.as_ref().and_then(|f| f.alone.clone()),
            idle: figures.as_ref().and_then(|f| f.idle.clone()),
            error,
        })?;
        progress.finish_cell();
    }
    progress.finish();
    Ok(RunOutcome {
        out: store.dir.clone(),
        cells: total,
        failed,
    })
}

/// Runs `fio --version` in the scenario image under `rt`: proves the runtime, the
/// image and the labels work before any cell counts on them.
fn smoke_check(
    rt: &Runtime,
    journal: &Journal,
    rootfs: &Path,
    run_dir: &Path,
    run_id: &str,
    new_id: &dyn Fn(&str) -> String,
    stop: &dyn Fn() -> bool,
) -> Result<(), ContainerError> {
    let id = new_id("check");
    let dir = run_dir.join(&id);
    let work = dir.join("work");
    std::fs::create_dir_all(&work).map_err(crate::sys::fs::io_at(&work))?;
    let spec = BundleSpec {
        rootfs,
        work: &work,
        args: vec![
            "sh".into(),
            "-c".into(),
            "fio --version > /work/version".into(),
        ],
        run_id,
        annotations: Vec::new(),
    };
    let result = (|| {
        let c = Container::start(rt, journal, &dir.join("bundle"), &spec, &id)?;
        c.wait_stopped(Duration::from_secs(60), stop)?;
        let v = std::fs::read_to_string(work.join("version")).unwrap_or_default();
        if !v.starts_with("fio-") {
            return Err(ContainerError::Io(crate::sys::fs::IoAt {
                path: work.join("version"),
                source: std::io::Error::other(format!(
                    "fio did not run in the container: {}",
                    runtime::tail(&c.log, 3)
                )),
            }));
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Bytes as `76.0G`: for messages about space, where exactness does not matter.
fn format_size_approx(b: u64) -> String {
    let g = b as f64 / f64::from(1u32 << 30);
    if g >= 1.0 {
        format!("{g:.1}G")
    } else {
        format!("{:.0}M", b as f64 / f64::from(1u32 << 20))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_on_the_same_target_is_refused_whatever_its_state_root() {
        // Two runs with their own state roots on one target: the second one's start
        // removed the first one's siloc-scn-* directory as a crashed run's leftover.
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target");
        let first = lock(&d.path().join("state-a"), &target).unwrap();
        let busy = target.join(format!("{ID_PREFIX}running"));
        std::fs::create_dir_all(&busy).unwrap();
        let e = lock(&d.path().join("state-b"), &target)
            .err()
            .expect("a second run on the same target was let in");
        assert!(e.to_string().contains(&target.display().to_string()), "{e}");
        assert!(busy.is_dir());
        drop(first);
        lock(&d.path().join("state-b"), &target).unwrap();
    }

    #[test]
    fn siloc_config_parses_as_host_config() {
        let s = Scenario::builtin(false).unwrap();
        let text = siloc_config(
            Path::new("/var/lib/siloc/scenario/x/siloc-data"),
            Some(&s.policy.classes),
        );
        let cfg = crate::config::HostConfig::parse(&text, Path::new("gen.toml")).unwrap();
        assert_eq!(
            cfg.io.class["noisy"]
                .wbps
                .as_ref()
                .unwrap()
                .bytes()
                .unwrap(),
            50 << 20
        );
        assert_eq!(
            cfg.data_root,
            PathBuf::from("/var/lib/siloc/scenario/x/siloc-data")
        );
        let plain = siloc_config(Path::new("/d"), None);
        assert!(
            crate::config::HostConfig::parse(&plain, Path::new("p.toml"))
                .unwrap()
                .io
                .class
                .is_empty()
        );
    }

    #[test]
    fn only_restricts_and_names_unknown_runtimes() {
        let mut o = RunOptions {
            file: None,
            quick: true,
            out: None,
            resume: false,
            only: Some(vec!["runc".into(), "siloc".into()]),
            state_base: PathBuf::from("/run/x"),
            image_dir: PathBuf::from("/x"),
            self_exe: PathBuf::from("/x"),
        };
        let s = scenario_of(&o).unwrap();
        let names: Vec<&str> = s.runtimes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["siloc", "runc"]);
        o.only = Some(vec!["kata".into()]);
        let e = scenario_of(&o).unwrap_err().to_string();
        assert!(e.contains("kata") && e.contains("runsc"), "{e}");
    }

    #[test]
    fn a_second_run_on_the_same_state_root_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let held = lock(t.path(), &t.path().join("target-a")).unwrap();
        let e = lock(t.path(), &t.path().join("target-b"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("another scenario run"), "{e}");
        drop(held);
        assert!(lock(t.path(), &t.path().join("target-b")).is_ok());
    }

    #[test]
    fn layout_writes_real_data() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("v.dat");
        lay_out(&p, 3 << 20, &|| false).unwrap();
        let data = std::fs::read(&p).unwrap();
        assert_eq!(data.len(), 3 << 20);
        assert_ne!(&data[..4096], &data[4096..8192]);
    }
}
