//! One cell: a runtime, a workload, a neighbour file size and a repetition. The victim
//! runs alone (baseline); then the neighbours run alone, without any policy (what the
//! disk gives them: `neighbours.alone`); then the neighbours under the runtime's
//! policy, first beside an idle victim (a container with the victim's class doing no
//! I/O: `neighbours.idle_victim`), then beside the working victim (interference). The
//! page cache is dropped before each phase, and the disk's and the cgroups' counters
//! are read around each measured window.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::container::{BundleSpec, Container, ContainerError, Journal, cgroup_path};
use super::counters::{self, CgroupCounters, CgroupIo, Disk, DiskCounters};
use super::file::{Scenario, Workload};
use super::fio::{self, FioFigures};
use super::host;
use super::runtime::Runtime;
use crate::annotations;

/// What identifies a cell in `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CellKey {
    pub runtime: String,
    pub workload: String,
    /// Bytes each neighbour writes per loop.
    pub neighbour_size: u64,
    /// 1-based.
    pub repetition: u32,
}

/// One phase's figures: fio's, and the counters read around the victim's run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub fio: FioFigures,
    /// The target disk's counters over the victim's run (all I/O on the disk).
    pub disk: DiskCounters,
    /// The victim's cgroup statistics (`None`: none kept, see counters.rs).
    pub victim_cgroup: Option<CgroupCounters>,
    /// Each neighbour's cgroup statistics, read when the victim stopped.
    pub neighbour_cgroups: Vec<Option<CgroupCounters>>,
    /// Wall-clock seconds from the victim's start to its stop.
    pub seconds: f64,
    /// Bytes of the victim's file in the host page cache when it stopped (the cache
    /// was dropped before the phase): see [`counters::page_cache_bytes`].
    #[serde(default)]
    pub victim_file_cached: Option<u64>,
    /// siloc's I/O policy decision for the first neighbour (`io.siloc.io.policy`
    /// from `state`), under a policy runtime: proof of what was applied.
    #[serde(default)]
    pub neighbour_policy: Option<String>,
    /// siloc's I/O policy decision for the victim, under a policy runtime.
    #[serde(default)]
    pub victim_policy: Option<String>,
}

/// A window in which only the neighbours did I/O: the disk's counters over it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeighbourWindow {
    pub disk: DiskCounters,
    pub seconds: f64,
    /// siloc's decision for the idle victim (`io.siloc.io.policy`), when it has one.
    #[serde(default)]
    pub victim_policy: Option<String>,
}

impl NeighbourWindow {
    /// Bytes/s the disk wrote over the window (the neighbours, plus any other writer
    /// on the host).
    pub fn write_bps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.disk.write_bytes as f64 / self.seconds
        } else {
            0.0
        }
    }
}

impl Phase {
    /// Bytes/s the disk wrote for others than the victim while it ran: the
    /// neighbours' achieved bandwidth (plus any other writer on the host). The
    /// victim's own writes are estimated from fio's bandwidth over ramp + duration.
    pub fn others_write_bps(&self, ramp: u32, duration: u32) -> f64 {
        let victim = self.fio.write.bw_bytes * f64::from(ramp + duration);
        let others = (self.disk.write_bytes as f64 - victim).max(0.0);
        if self.seconds > 0.0 {
            others / self.seconds
        } else {
            0.0
        }
    }
}

/// A cell as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub key: CellKey,
    /// RFC 3339.
    pub started: String,
    pub seconds: f64,
    pub baseline: Option<Phase>,
    pub noise: Option<Phase>,
    /// The neighbours alone, no policy (`neighbours.alone`).
    #[serde(default)]
    pub alone: Option<NeighbourWindow>,
    /// The neighbours under the policy beside an idle victim (`neighbours.idle_victim`).
    #[serde(default)]
    pub idle: Option<NeighbourWindow>,
    /// Why the cell has no figures.
    pub error: Option<String>,
}

/// Errors of a cell. [`CellError::Interrupted`] ends the run; the others are
/// recorded in the cell and the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    #[error(transparent)]
    Container(ContainerError),
    #[error(transparent)]
    Fio(#[from] fio::FioError),
    #[error(transparent)]
    Host(#[from] host::HostError),
    #[error(transparent)]
    Counters(#[from] counters::CountersError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("interrupted")]
    Interrupted,
}

impl From<ContainerError> for CellError {
    fn from(e: ContainerError) -> Self {
        match e {
            ContainerError::Interrupted => CellError::Interrupted,
            e => CellError::Container(e),
        }
    }
}

/// The phases, as the progress bar names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Baseline,
    Alone,
    Warmup,
    Idle,
    Interference,
}

impl Step {
    pub fn label(self) -> &'static str {
        match self {
            Step::Baseline => "baseline",
            Step::Alone => "neighbours alone",
            Step::Warmup => "neighbours warming up",
            Step::Idle => "neighbours beside an idle victim",
            Step::Interference => "under noise",
        }
    }
}

/// A cell's figures: the victim's two phases and the neighbours' windows.
#[derive(Debug, Clone, PartialEq)]
pub struct CellFigures {
    pub baseline: Phase,
    pub noise: Phase,
    pub alone: Option<NeighbourWindow>,
    pub idle: Option<NeighbourWindow>,
}

/// Everything a cell needs from the run.
pub struct CellCtx<'a> {
    pub scenario: &'a Scenario,
    pub rootfs: &'a Path,
    pub journal: &'a Journal,
    pub run_id: &'a str,
    /// `<target>/siloc-scn-<run>`: bundles and neighbour directories go here.
    pub run_dir: &'a Path,
    /// Holds `victim.dat`, bound at /work in the victim.
    pub victim_dir: &'a Path,
    pub disk: &'a Disk,
    pub cgroup_io: CgroupIo,
    /// True once the user asked to stop (Ctrl-C, SIGTERM).
    pub stop: &'a dyn Fn() -> bool,
    /// Called as each step starts.
    pub step: &'a dyn Fn(Step),
    /// Makes a fresh container id with the given role suffix.
    pub new_id: &'a dyn Fn(&str) -> String,
}

/// Runs one cell.
pub fn run(
    ctx: &CellCtx<'_>,
    rt: &Runtime,
    w: &Workload,
    key: &CellKey,
) -> Result<CellFigures, CellError> {
    let s = ctx.scenario;
    (ctx.step)(Step::Baseline);
    host::drop_caches()?;
    let baseline = victim_phase(ctx, rt, w, "baseline", &[])?;

    let alone = if s.neighbours.alone {
        (ctx.step)(Step::Alone);
        host::drop_caches()?;
        Some(with_neighbours(ctx, rt, key, false, |_| {
            sleep(Duration::from_secs(u64::from(s.warmup)), ctx.stop)?;
            window(ctx, None, rt)
        })?)
    } else {
        None
    };

    (ctx.step)(Step::Warmup);
    host::drop_caches()?;
    let (idle, noise) = with_neighbours(ctx, rt, key, rt.entry.policy, |neighbours| {
        sleep(Duration::from_secs(u64::from(s.warmup)), ctx.stop)?;
        let idle = if s.neighbours.idle_victim {
            (ctx.step)(Step::Idle);
            Some(idle_victim_window(ctx, rt)?)
        } else {
            None
        };
        (ctx.step)(Step::Interference);
        Ok((idle, victim_phase(ctx, rt, w, "noise", neighbours)?))
    })?;
    Ok(CellFigures {
        baseline,
        noise,
        alone,
        idle,
    })
}

/// Starts the neighbours (with the runtime's neighbour class when `policy`), runs
/// `f` beside them, then removes them and their files, whatever `f` returned.
fn with_neighbours<T>(
    ctx: &CellCtx<'_>,
    rt: &Runtime,
    key: &CellKey,
    policy: bool,
    f: impl FnOnce(&[Container<'_>]) -> Result<T, CellError>,
) -> Result<T, CellError> {
    let mut neighbours = Vec::new();
    let mut dirs = Vec::new();
    let result = (|| {
        for n in 1..=ctx.scenario.neighbours.count {
            let id = (ctx.new_id)(&format!("n{n}"));
            let dir = ctx.run_dir.join(&id);
            let work = dir.join("work");
            std::fs::create_dir_all(&work).map_err(|source| CellError::Io {
                path: work.clone(),
                source,
            })?;
            dirs.push(dir.clone());
            let spec = BundleSpec {
                rootfs: ctx.rootfs,
                work: &work,
                args: neighbour_args(ctx.scenario, key.neighbour_size),
                run_id: ctx.run_id,
                annotations: if policy {
                    neighbour_annotations(rt)
                } else {
                    Vec::new()
                },
            };
            neighbours.push(Container::start(
                rt,
                ctx.journal,
                &dir.join("bundle"),
                &spec,
                &id,
            )?);
        }
        f(&neighbours)
    })();
    // Neighbours go first, then their files: deleting a file drops its dirty pages.
    drop(neighbours);
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    result
}

/// The disk's counters over `duration` seconds while only the neighbours work.
fn window(
    ctx: &CellCtx<'_>,
    idle: Option<&Container<'_>>,
    rt: &Runtime,
) -> Result<NeighbourWindow, CellError> {
    let before = counters::read_disk(Path::new("/"), ctx.disk)?;
    let t0 = Instant::now();
    sleep(
        Duration::from_secs(u64::from(ctx.scenario.duration)),
        ctx.stop,
    )?;
    let seconds = t0.elapsed().as_secs_f64();
    let after = counters::read_disk(Path::new("/"), ctx.disk)?;
    let victim_policy = idle.and_then(|c| policy_of(rt, &c.id));
    Ok(NeighbourWindow {
        disk: after.since(&before),
        seconds,
        victim_policy,
    })
}

/// An idle victim (the victim's annotations, `sleep`) beside the running neighbours,
/// and the neighbours' window while it idles.
fn idle_victim_window(ctx: &CellCtx<'_>, rt: &Runtime) -> Result<NeighbourWindow, CellError> {
    let id = (ctx.new_id)("idle");
    let dir = ctx.run_dir.join(&id);
    let work = dir.join("work");
    std::fs::create_dir_all(&work).map_err(|source| CellError::Io {
        path: work.clone(),
        source,
    })?;
    let result = (|| {
        let spec = BundleSpec {
            rootfs: ctx.rootfs,
            work: &work,
            args: vec!["sleep".into(), "100000".into()],
            run_id: ctx.run_id,
            annotations: victim_annotations(ctx.scenario, rt),
        };
        let c = Container::start(rt, ctx.journal, &dir.join("bundle"), &spec, &id)?;
        window(ctx, Some(&c), rt)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// siloc's `io.siloc.io.policy` for container `id`, under a policy runtime.
fn policy_of(rt: &Runtime, id: &str) -> Option<String> {
    if !rt.entry.policy {
        return None;
    }
    rt.state(id).ok().flatten().and_then(|v| {
        v["annotations"][annotations::OUT_IO_POLICY]
            .as_str()
            .map(str::to_string)
    })
}

/// The neighbours' loop: `dd` over one large file, fsynced at the end, forever.
pub fn neighbour_args(s: &Scenario, size: u64) -> Vec<String> {
    let bs = s.neighbours.bs;
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "while :; do dd if=/dev/zero of=/work/fill bs={bs} count={} conv=fsync 2>/dev/null; done",
            size / bs
        ),
    ]
}

/// Annotations of a neighbour under a policy runtime: its neighbour class, if any.
fn neighbour_annotations(rt: &Runtime) -> Vec<(String, String)> {
    match (&rt.entry.neighbour_class, rt.entry.policy) {
        (Some(c), true) => vec![(annotations::IO_CLASS.to_string(), c.clone())],
        _ => Vec::new(),
    }
}

/// Annotations of the victim under a policy runtime: node placement, and its class.
fn victim_annotations(s: &Scenario, rt: &Runtime) -> Vec<(String, String)> {
    if !rt.entry.policy {
        return Vec::new();
    }
    let mut a = vec![(annotations::NUMA.to_string(), s.policy.victim_numa.clone())];
    if let Some(c) = &rt.entry.victim_class {
        a.push((annotations::IO_CLASS.to_string(), c.clone()));
    }
    a
}

/// Runs the victim once and reads the counters around it.
fn victim_phase(
    ctx: &CellCtx<'_>,
    rt: &Runtime,
    w: &Workload,
    phase: &str,
    neighbours: &[Container<'_>],
) -> Result<Phase, CellError> {
    let s = ctx.scenario;
    let out_name = format!("{phase}.json");
    let out_host = ctx.victim_dir.join(&out_name);
    let _ = std::fs::remove_file(&out_host);
    let id = (ctx.new_id)("v");
    let spec = BundleSpec {
        rootfs: ctx.rootfs,
        work: ctx.victim_dir,
        args: fio::args(s, w, &format!("/work/{out_name}")),
        run_id: ctx.run_id,
        annotations: victim_annotations(s, rt),
    };
    let before = counters::read_disk(Path::new("/"), ctx.disk)?;
    let t0 = Instant::now();
    let victim = Container::start(rt, ctx.journal, &ctx.run_dir.join(&id), &spec, &id)?;
    let limit = Duration::from_secs(u64::from(s.ramp + s.duration) + 120);
    victim.wait_stopped(limit, ctx.stop)?;
    let seconds = t0.elapsed().as_secs_f64();
    let after = counters::read_disk(Path::new("/"), ctx.disk)?;
    let victim_file_cached = counters::page_cache_bytes(&ctx.victim_dir.join("victim.dat"));
    let victim_cgroup =
        counters::read_cgroup(Path::new("/"), ctx.cgroup_io, &cgroup_path(&id), ctx.disk);
    let neighbour_cgroups = neighbours
        .iter()
        .map(|n| {
            counters::read_cgroup(Path::new("/"), ctx.cgroup_io, &cgroup_path(&n.id), ctx.disk)
        })
        .collect();
    let neighbour_policy = neighbours.first().and_then(|n| policy_of(rt, &n.id));
    let victim_policy = policy_of(rt, &id);
    let text = std::fs::read_to_string(&out_host).unwrap_or_default();
    let log = victim.log.clone();
    drop(victim);
    let _ = std::fs::remove_dir_all(ctx.run_dir.join(&id));
    let _ = std::fs::remove_file(&out_host);
    let what = format!("{} {} {phase}", rt.name(), w.name);
    let fio = fio::parse(&text, &what).map_err(|e| match e {
        fio::FioError::NoJson { what, .. } => fio::FioError::NoJson {
            what,
            head: super::runtime::tail(&log, 3),
        },
        e => e,
    })?;
    Ok(Phase {
        fio,
        disk: after.since(&before),
        victim_cgroup,
        neighbour_cgroups,
        seconds,
        victim_file_cached,
        neighbour_policy,
        victim_policy,
    })
}

/// Sleeps `d`, waking early with [`CellError::Interrupted`] when `stop` says so.
pub fn sleep(d: Duration, stop: &dyn Fn() -> bool) -> Result<(), CellError> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop() {
            return Err(CellError::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(100).min(end - Instant::now()));
    }
    if stop() {
        return Err(CellError::Interrupted);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_loop_dd_with_fsync() {
        let s = Scenario::builtin(true).unwrap();
        let a = neighbour_args(&s, 4 << 30);
        assert_eq!(a[..2], ["sh".to_string(), "-c".to_string()]);
        assert!(
            a[2].contains("bs=1048576 count=4096 conv=fsync"),
            "{}",
            a[2]
        );
        assert!(a[2].starts_with("while :; do dd"));
    }

    #[test]
    fn others_bandwidth_subtracts_the_victim() {
        let mut p = Phase {
            fio: FioFigures::default(),
            disk: DiskCounters {
                write_bytes: 1000,
                ..Default::default()
            },
            victim_cgroup: None,
            neighbour_cgroups: vec![],
            seconds: 10.0,
            victim_file_cached: None,
            neighbour_policy: None,
            victim_policy: None,
        };
        assert_eq!(p.others_write_bps(1, 9), 100.0);
        p.fio.write.bw_bytes = 50.0;
        assert_eq!(p.others_write_bps(1, 9), 50.0);
        p.fio.write.bw_bytes = 500.0;
        assert_eq!(p.others_write_bps(1, 9), 0.0);
    }

    #[test]
    fn sleep_stops_when_asked() {
        let t = Instant::now();
        assert!(matches!(
            sleep(Duration::from_secs(5), &|| true),
            Err(CellError::Interrupted)
        ));
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(sleep(Duration::from_millis(10), &|| false).is_ok());
    }
}
