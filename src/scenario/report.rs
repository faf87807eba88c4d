//! The report of a run, rebuilt from its output directory at any time: one row per
//! workload x runtime x neighbour size (repetitions averaged), as a terminal table,
//! Markdown, CSV and JSON, plus SVG charts.
//!
//! Drop % = (1 - IOPS under noise / baseline IOPS) x 100; rise % = (p99 under noise /
//! baseline p99 - 1) x 100. p99 is fio's completion latency (clat) p99, of reads and
//! writes together for mixed workloads.
//!
//! The price of isolation: nbr kept % = what the disk wrote for the neighbours while
//! the victim ran / what it wrote with the neighbours alone (no victim, no policy)
//! x 100; idle % = what it wrote for them, under the policy, beside an idle victim /
//! alone x 100 (a work-conserving class keeps this near 100 %).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::cell::{CellResult, Phase};
use super::chart;
use super::counters::CgroupIo;
use super::file::{Scenario, Workload};
use super::price;
use super::store::{RunMeta, Store, StoreError};
use crate::units::format_size;

/// Errors writing the report files.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Files the report writes into the output directory.
pub const FILES: [&str; 7] = [
    "report.txt",
    "report.md",
    "report.csv",
    "report.json",
    "iops-drop.svg",
    "p99.svg",
    "tradeoff.svg",
];

/// The goal the trade-off chart shades (issue 18): the victim keeps at least this %
/// of its baseline IOPS while the neighbours keep at least [`GOAL_NEIGHBOUR_PCT`] of
/// what they write alone.
pub const GOAL_VICTIM_PCT: f64 = 90.0;
pub const GOAL_NEIGHBOUR_PCT: f64 = 70.0;

/// Share of fio's bytes the disk must have seen before the figures count as disk
/// figures: below it, fio measured a cache (runsc ignores O_DIRECT).
pub const DISK_SHARE_MIN: f64 = 0.5;
/// fio's bytes below which the check says nothing (too little to judge).
const CHECK_MIN_BYTES: u64 = 16 << 20;
/// Share of the bytes an O_DIRECT victim touched that may stay in the page cache
/// before its I/O counts as buffered.
pub const CACHED_SHARE_MAX: f64 = 0.25;

/// One line of the tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub workload: String,
    pub runtime: String,
    pub neighbour_size: u64,
    /// Cells with figures / cells tried.
    pub cells: usize,
    pub failed: usize,
    pub baseline_iops: f64,
    pub noise_iops: f64,
    pub iops_drop_pct: f64,
    /// µs.
    pub baseline_p99_us: f64,
    pub noise_p99_us: f64,
    pub p99_rise_pct: f64,
    /// Bytes/s.
    pub baseline_bw: f64,
    pub noise_bw: f64,
    /// Bytes/s the disk wrote for the neighbours (and anyone else) while the victim
    /// ran under noise: the price of isolation.
    pub neighbour_write_bw: f64,
    /// Lowest share of fio's bytes the disk saw in a baseline (reads or writes).
    pub disk_share: Option<f64>,
    /// Highest share of the bytes the victim touched that stayed in the host's page
    /// cache after a baseline (O_DIRECT workloads only).
    pub cached_share: Option<f64>,
    /// fio's figures did not reach the disk.
    pub not_on_disk: bool,
    /// Write limits on buffered writers under cgroup v1: flusher writeback escapes.
    pub v1_writeback: bool,
    /// noise IOPS / baseline IOPS x 100.
    pub victim_iops_kept_pct: f64,
    /// Bytes/s the disk wrote with the neighbours alone (no victim, no policy);
    /// `None`: not measured.
    pub neighbour_alone_bw: Option<f64>,
    /// Bytes/s it wrote for them under the policy beside an idle victim.
    pub neighbour_idle_bw: Option<f64>,
    /// neighbour_write_bw / neighbour_alone_bw x 100.
    pub neighbour_kept_pct: Option<f64>,
    /// neighbour_idle_bw / neighbour_alone_bw x 100.
    pub idle_share_pct: Option<f64>,
    /// Seconds one round of the neighbours' loop takes ([`neighbour_round`]); `None`
    /// without a rate.
    pub neighbour_round_secs: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub meta: RunMeta,
    pub rows: Vec<Row>,
    pub errors: Vec<String>,
    /// Per policy runtime: siloc's decision for its neighbours (`io.siloc.io.policy`).
    pub policies: std::collections::BTreeMap<String, String>,
    /// Per policy runtime: siloc's decision for its victim, when it had a class.
    pub victim_policies: std::collections::BTreeMap<String, String>,
}

/// Reads a run's directory and builds the report. Errors: missing or bad files.
pub fn load(dir: &Path) -> Result<Report, ReportError> {
    let store = Store::new(dir);
    let meta = store.meta()?;
    let cells = store.cells()?;
    Ok(build(meta, &cells))
}

/// The lowest share of fio's bytes the disk saw in `p`, over directions where fio
/// moved enough to judge. `None`: nothing to judge.
pub fn disk_share(p: &Phase) -> Option<f64> {
    let mut worst: Option<f64> = None;
    for (fio, disk) in [
        (p.fio.read.io_bytes, p.disk.read_bytes),
        (p.fio.write.io_bytes, p.disk.write_bytes),
    ] {
        if fio >= CHECK_MIN_BYTES {
            let share = disk as f64 / fio as f64;
            worst = Some(worst.map_or(share, |w: f64| w.min(share)));
        }
    }
    worst
}

/// The share of the bytes the victim touched (fio's bytes, at most its file) that the
/// host's page cache held after `p`. `None`: not measured or too little to judge.
pub fn cached_share(p: &Phase, file_size: u64) -> Option<f64> {
    let cached = p.victim_file_cached?;
    let touched = p.fio.total.io_bytes.min(file_size);
    (touched >= CHECK_MIN_BYTES).then(|| cached as f64 / touched as f64)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn pct_drop(base: f64, noise: f64) -> f64 {
    if base > 0.0 {
        (1.0 - noise / base) * 100.0
    } else {
        0.0
    }
}

fn pct_rise(base: f64, noise: f64) -> f64 {
    if base > 0.0 {
        (noise / base - 1.0) * 100.0
    } else {
        0.0
    }
}

/// Builds rows in the scenario's order: workloads, then runtimes, then sizes.
pub fn build(meta: RunMeta, cells: &[CellResult]) -> Report {
    let s = &meta.scenario;
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for c in cells {
        if let Some(e) = &c.error {
            errors.push(format!(
                "{} {} {} rep {}: {e}",
                c.key.runtime,
                c.key.workload,
                format_size(c.key.neighbour_size),
                c.key.repetition
            ));
        }
    }
    for w in &s.workloads {
        for r in &s.runtimes {
            for &size in &s.neighbours.sizes {
                let mine: Vec<&CellResult> = cells
                    .iter()
                    .filter(|c| {
                        c.key.workload == w.name
                            && c.key.runtime == r.name
                            && c.key.neighbour_size == size
                    })
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let ok: Vec<(&Phase, &Phase)> = mine
                    .iter()
                    .filter_map(|c| Some((c.baseline.as_ref()?, c.noise.as_ref()?)))
                    .collect();
                let windows = |f: &dyn Fn(&CellResult) -> Option<f64>| {
                    let v: Vec<f64> = mine
                        .iter()
                        .filter(|c| c.noise.is_some())
                        .filter_map(|c| f(c))
                        .collect();
                    (!v.is_empty()).then(|| mean(&v))
                };
                let alone = windows(&|c| c.alone.as_ref().map(|w| w.write_bps()));
                let idle = windows(&|c| c.idle.as_ref().map(|w| w.write_bps()));
                let share = |v: Option<f64>| match (v, alone) {
                    (Some(v), Some(a)) if a > 0.0 => Some(v / a * 100.0),
                    _ => None,
                };
                let col = |f: &dyn Fn(&Phase, &Phase) -> f64| {
                    mean(&ok.iter().map(|(b, n)| f(b, n)).collect::<Vec<_>>())
                };
                let baseline_iops = col(&|b, _| b.fio.total.iops);
                let noise_iops = col(&|_, n| n.fio.total.iops);
                let neighbour_write_bw = col(&|_, n| n.others_write_bps(s.ramp, s.duration));
                let baseline_p99_us = col(&|b, _| b.fio.total.clat_p99_us);
                let noise_p99_us = col(&|_, n| n.fio.total.clat_p99_us);
                let shares: Vec<f64> = ok.iter().filter_map(|(b, _)| disk_share(b)).collect();
                let disk_share = shares.iter().copied().reduce(f64::min);
                let cached: Vec<f64> = if w.direct {
                    ok.iter()
                        .filter_map(|(b, _)| cached_share(b, s.victim_file_size))
                        .collect()
                } else {
                    Vec::new()
                };
                let cached_share = cached.iter().copied().reduce(f64::max);
                let not_on_disk = w.direct
                    && (disk_share.is_some_and(|d| d < DISK_SHARE_MIN)
                        || cached_share.is_some_and(|c| c > CACHED_SHARE_MAX));
                rows.push(Row {
                    workload: w.name.clone(),
                    runtime: r.name.clone(),
                    neighbour_size: size,
                    cells: ok.len(),
                    failed: mine.len() - ok.len(),
                    baseline_iops,
                    noise_iops,
                    iops_drop_pct: pct_drop(baseline_iops, noise_iops),
                    baseline_p99_us,
                    noise_p99_us,
                    p99_rise_pct: pct_rise(baseline_p99_us, noise_p99_us),
                    baseline_bw: col(&|b, _| b.fio.total.bw_bytes),
                    noise_bw: col(&|_, n| n.fio.total.bw_bytes),
                    neighbour_write_bw,
                    disk_share,
                    cached_share,
                    not_on_disk,
                    v1_writeback: r.policy && meta.host.cgroup_io == CgroupIo::V1,
                    victim_iops_kept_pct: if baseline_iops > 0.0 {
                        noise_iops / baseline_iops * 100.0
                    } else {
                        0.0
                    },
                    neighbour_alone_bw: alone,
                    neighbour_idle_bw: idle,
                    neighbour_kept_pct: share((!ok.is_empty()).then_some(neighbour_write_bw)),
                    idle_share_pct: share(idle),
                    neighbour_round_secs: neighbour_round(
                        s.neighbours.count,
                        size,
                        alone.or((!ok.is_empty()).then_some(neighbour_write_bw)),
                    ),
                });
            }
        }
    }
    let mut policies = std::collections::BTreeMap::new();
    for c in cells {
        if let Some(p) = c.noise.as_ref().and_then(|n| n.neighbour_policy.as_ref()) {
            policies
                .entry(c.key.runtime.clone())
                .or_insert_with(|| p.clone());
        }
    }
    let mut victim_policies = std::collections::BTreeMap::new();
    for c in cells {
        if let Some(p) = c.noise.as_ref().and_then(|n| n.victim_policy.as_ref()) {
            victim_policies
                .entry(c.key.runtime.clone())
                .or_insert_with(|| p.clone());
        }
    }
    Report {
        meta,
        rows,
        errors,
        policies,
        victim_policies,
    }
}

/// `4446`, `12.3k` would hide digits people compare: whole numbers, no separators.
fn iops(v: f64) -> String {
    format!("{v:.0}")
}

/// µs as ms with 2-3 significant digits.
pub fn ms(us: f64) -> String {
    let m = us / 1000.0;
    if m < 10.0 {
        format!("{m:.2}")
    } else if m < 100.0 {
        format!("{m:.1}")
    } else {
        format!("{m:.0}")
    }
}

fn mbs(bps: f64) -> String {
    format!("{:.0}", bps / 1e6)
}

fn pct(p: f64) -> String {
    format!("{p:.0}%")
}

/// Note marks of a row, explained under the tables.
fn marks(r: &Row, s: &Scenario) -> String {
    let mut m = Vec::new();
    if r.not_on_disk {
        m.push("[a]");
    }
    if r.v1_writeback {
        m.push("[b]");
    }
    if r.failed > 0 {
        m.push("[c]");
    }
    if rough_neighbours(r, s).is_some() {
        m.push("[d]");
    }
    m.join(" ")
}

/// Windows shorter than this many rounds of the neighbours' write+fsync loop make
/// their figures depend on the phase each window caught.
pub const NEIGHBOUR_ROUNDS_MIN: f64 = 2.0;

/// Seconds one round of the neighbours' loop takes: all `count` files of `size` bytes
/// written and fsynced at `rate` bytes/s (what the disk wrote for them alone, else
/// under noise). `None` without neighbours or a rate.
pub fn neighbour_round(count: u32, size: u64, rate: Option<f64>) -> Option<f64> {
    let rate = rate.filter(|b| *b > 0.0 && b.is_finite())?;
    (count > 0 && size > 0).then(|| f64::from(count) * size as f64 / rate)
}

/// A row's round ([`neighbour_round`]) when the measured window (`duration`) holds
/// fewer than [`NEIGHBOUR_ROUNDS_MIN`] of them: then `nbr MB/s`, `nbr alone`, `nbr
/// kept` and `idle` depend on which part of a round (page cache filling, or the
/// fsync's flush) each window caught, and can exceed 100% on a quiet host. `None`:
/// enough rounds, or no round.
pub fn rough_neighbours(r: &Row, s: &Scenario) -> Option<f64> {
    r.neighbour_round_secs
        .filter(|round| f64::from(s.duration) < NEIGHBOUR_ROUNDS_MIN * round)
}

/// A workload's one-line description: `randrw: 4K blocks, iodepth 1, 70% reads, O_DIRECT`.
pub fn describe(w: &Workload) -> String {
    let mut d = format!(
        "{}: {} {} blocks, iodepth {}",
        w.name,
        w.rw.as_fio(),
        format_size(w.bs),
        w.iodepth
    );
    if let Some(m) = w.rwmixread {
        d.push_str(&format!(", {m}% reads"));
    }
    d.push_str(if w.direct { ", O_DIRECT" } else { ", buffered" });
    d
}

const HEADER: [&str; 14] = [
    "runtime",
    "neighbours",
    "IOPS",
    "IOPS noisy",
    "drop",
    "p99 ms",
    "p99 ms noisy",
    "rise",
    "nbr MB/s",
    "nbr alone",
    "nbr kept",
    "idle",
    "n",
    "notes",
];

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map_or("-".to_string(), f)
}

fn cells_of(r: &Row, s: &Scenario) -> [String; 14] {
    [
        r.runtime.clone(),
        format!("{}x{}", s.neighbours.count, format_size(r.neighbour_size)),
        iops(r.baseline_iops),
        iops(r.noise_iops),
        pct(r.iops_drop_pct),
        ms(r.baseline_p99_us),
        ms(r.noise_p99_us),
        pct(r.p99_rise_pct),
        mbs(r.neighbour_write_bw),
        opt(r.neighbour_alone_bw, mbs),
        opt(r.neighbour_kept_pct, pct),
        opt(r.idle_share_pct, pct),
        r.cells.to_string(),
        marks(r, s),
    ]
}

impl Report {
    fn workload_rows<'a>(&'a self, w: &str) -> Vec<&'a Row> {
        self.rows.iter().filter(|r| r.workload == w).collect()
    }

    fn host_line(&self) -> String {
        let h = &self.meta.host;
        let s = &self.meta.scenario;
        format!(
            "host: kernel {}, {} CPUs, {} memory, disk {} ({}), cgroup I/O {}; victim file {}, {} s measured after {} s ramp, {} s neighbour warm-up, {} repetition(s){}",
            h.kernel,
            h.cpus,
            format_size_round(h.mem_total),
            h.disk.name,
            h.scheduler.as_deref().unwrap_or("?"),
            match h.cgroup_io {
                CgroupIo::V1 => "v1",
                CgroupIo::V2 => "v2",
                CgroupIo::None => "none",
            },
            format_size(s.victim_file_size),
            s.duration,
            s.ramp,
            s.warmup,
            s.repetitions,
            if s.quick { " (--quick)" } else { "" }
        )
    }

    fn legend(&self) -> Vec<String> {
        let mut l = vec![
            "drop: IOPS lost under noise; rise: p99 completion latency gained; nbr MB/s: what the disk wrote for the neighbours while the victim ran (the price of isolation); nbr alone: what it wrote for them alone, no victim, no policy; nbr kept: nbr MB/s / nbr alone; idle: what it wrote for them under the policy beside an idle victim / nbr alone (a work-conserving class keeps it near 100%); n: repetitions averaged".to_string(),
        ];
        if self.rows.iter().any(|r| r.not_on_disk) {
            l.push(format!(
                "[a] fio's O_DIRECT I/O did not reach the disk as such: in the baseline the disk saw less than {:.0}% of the bytes fio reported, or more than {:.0}% of what the victim touched stayed in the host's page cache. These figures measure the page cache, not disk isolation (runsc ignores O_DIRECT)",
                DISK_SHARE_MIN * 100.0,
                CACHED_SHARE_MAX * 100.0
            ));
        }
        if self.rows.iter().any(|r| r.v1_writeback) {
            l.push("[b] cgroup v1: buffered writeback is charged to the root cgroup, so the neighbours' write limit holds only for the I/O their fsync issues, not for the flusher's writeback".to_string());
        }
        if self.rows.iter().any(|r| r.failed > 0) {
            l.push("[c] some repetitions failed; see the errors below".to_string());
        }
        let s = &self.meta.scenario;
        if let Some(round) = self
            .rows
            .iter()
            .filter_map(|r| rough_neighbours(r, s))
            .reduce(f64::max)
        {
            l.push(format!(
                "[d] rough neighbour figures: each window ({} s) holds fewer than {NEIGHBOUR_ROUNDS_MIN:.0} rounds of the neighbours' write+fsync loop (up to {round:.0} s a round at their alone rate, else their rate under noise), so nbr MB/s, nbr alone, nbr kept and idle depend on which part of a round each window caught (page cache filling or the fsync's flush) and can exceed 100% on a quiet host; a duration of at least two rounds averages them",
                s.duration
            ));
        }
        for (name, p) in &self.policies {
            l.push(format!("{name}: neighbours ran with {p}"));
        }
        for (name, p) in &self.victim_policies {
            l.push(format!("{name}: the victim ran with {p}"));
        }
        for sk in &self.meta.skipped {
            l.push(format!("skipped {}: {}", sk.name, sk.note));
        }
        for e in &self.errors {
            l.push(format!("error: {e}"));
        }
        l
    }

    /// The terminal tables.
    pub fn text(&self) -> String {
        let s = &self.meta.scenario;
        let mut out = String::new();
        for w in &s.workloads {
            let rows = self.workload_rows(&w.name);
            if rows.is_empty() {
                continue;
            }
            out.push_str(&describe(w));
            out.push('\n');
            let body: Vec<[String; 14]> = rows.iter().map(|r| cells_of(r, s)).collect();
            let mut width = HEADER.map(str::len);
            for b in &body {
                for (i, c) in b.iter().enumerate() {
                    width[i] = width[i].max(c.chars().count());
                }
            }
            let line = |cols: &[String]| {
                let mut l = String::from(" ");
                for (i, c) in cols.iter().enumerate() {
                    let pad = width[i] - c.chars().count();
                    if i < 2 || i == HEADER.len() - 1 {
                        l.push_str(&format!(" {c}{}", " ".repeat(pad)));
                    } else {
                        l.push_str(&format!(" {}{c}", " ".repeat(pad)));
                    }
                }
                l.trim_end().to_string() + "\n"
            };
            out.push_str(&line(&HEADER.map(String::from)));
            for b in &body {
                out.push_str(&line(b));
            }
            out.push('\n');
        }
        out.push_str(&self.host_line());
        out.push('\n');
        for l in self.legend() {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }

    /// The tables in Markdown.
    pub fn markdown(&self) -> String {
        let s = &self.meta.scenario;
        let mut out = String::from("# Disk-isolation scenario\n\n");
        out.push_str(&self.host_line());
        out.push_str("\n\n");
        for w in &s.workloads {
            let rows = self.workload_rows(&w.name);
            if rows.is_empty() {
                continue;
            }
            out.push_str(&format!("## {}\n\n", describe(w)));
            out.push_str(&format!("| {} |\n", HEADER.join(" | ")));
            out.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
            for r in rows {
                out.push_str(&format!("| {} |\n", cells_of(r, s).join(" | ")));
            }
            out.push('\n');
        }
        for l in self.legend() {
            out.push_str(&format!("- {l}\n"));
        }
        out
    }

    /// One CSV line per row, raw numbers (IOPS, µs, bytes/s).
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "workload,runtime,neighbours,neighbour_size_bytes,cells,failed,baseline_iops,noise_iops,iops_drop_pct,baseline_p99_us,noise_p99_us,p99_rise_pct,baseline_bw_bytes,noise_bw_bytes,neighbour_write_bw_bytes,disk_share,cached_share,not_on_disk,cgroup_v1_writeback,victim_iops_kept_pct,neighbour_alone_bw_bytes,neighbour_idle_bw_bytes,neighbour_kept_pct,idle_share_pct,neighbour_round_s,rough_neighbours\n",
        );
        for r in &self.rows {
            let fields = [
                csv_field(&r.workload),
                csv_field(&r.runtime),
                self.meta.scenario.neighbours.count.to_string(),
                r.neighbour_size.to_string(),
                r.cells.to_string(),
                r.failed.to_string(),
                format!("{:.1}", r.baseline_iops),
                format!("{:.1}", r.noise_iops),
                format!("{:.1}", r.iops_drop_pct),
                format!("{:.1}", r.baseline_p99_us),
                format!("{:.1}", r.noise_p99_us),
                format!("{:.1}", r.p99_rise_pct),
                format!("{:.0}", r.baseline_bw),
                format!("{:.0}", r.noise_bw),
                format!("{:.0}", r.neighbour_write_bw),
                r.disk_share.map(|d| format!("{d:.3}")).unwrap_or_default(),
                r.cached_share
                    .map(|d| format!("{d:.3}"))
                    .unwrap_or_default(),
                r.not_on_disk.to_string(),
                r.v1_writeback.to_string(),
                format!("{:.1}", r.victim_iops_kept_pct),
                r.neighbour_alone_bw
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_default(),
                r.neighbour_idle_bw
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_default(),
                r.neighbour_kept_pct
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_default(),
                r.idle_share_pct
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_default(),
                r.neighbour_round_secs
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_default(),
                rough_neighbours(r, &self.meta.scenario)
                    .is_some()
                    .to_string(),
            ];
            out.push_str(&fields.join(","));
            out.push('\n');
        }
        out
    }

    /// The report as JSON: run metadata, rows, errors.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The three charts: (IOPS drop bars, p99 in ms on a log axis with baseline
    /// beside noisy, the isolation trade-off scatter), grouped by runtime.
    pub fn charts(&self) -> (String, String, String) {
        let s = &self.meta.scenario;
        let groups: Vec<String> = s
            .runtimes
            .iter()
            .filter(|r| self.rows.iter().any(|x| x.runtime == r.name))
            .map(|r| r.name.clone())
            .collect();
        let row = |g: &str, w: &str, size: u64| {
            self.rows.iter().find(|r| {
                r.runtime == g && r.workload == w && r.neighbour_size == size && r.cells > 0
            })
        };
        let mut drop = Vec::new();
        let mut p99 = Vec::new();
        let mut labels = Vec::new();
        for w in &s.workloads {
            for &size in &s.neighbours.sizes {
                let d: Vec<Option<chart::Bar>> = groups
                    .iter()
                    .map(|g| {
                        row(g, &w.name, size).map(|r| chart::Bar {
                            value: r.iops_drop_pct,
                            mark: r.not_on_disk.then(|| "a".to_string()),
                        })
                    })
                    .collect();
                if d.iter().all(Option::is_none) {
                    continue;
                }
                let label = if s.neighbours.sizes.len() > 1 {
                    format!("{} · {}x{}", w.name, s.neighbours.count, format_size(size))
                } else {
                    w.name.clone()
                };
                let colour = labels.len();
                let ms_of = |f: fn(&Row) -> f64| -> Vec<Option<f64>> {
                    groups
                        .iter()
                        .map(|g| row(g, &w.name, size).map(|r| f(r) / 1000.0))
                        .collect()
                };
                p99.push((
                    format!("{label} baseline"),
                    colour,
                    true,
                    ms_of(|r| r.baseline_p99_us),
                ));
                p99.push((
                    format!("{label} noisy"),
                    colour,
                    false,
                    ms_of(|r| r.noise_p99_us),
                ));
                drop.push((label.clone(), d));
                labels.push((label, w.name.clone(), size));
            }
        }
        let mut notes = vec![format!(
            "{} neighbours x {} each, looping dd conv=fsync; victim: fio, {} s",
            s.neighbours.count,
            s.neighbours
                .sizes
                .iter()
                .map(|z| format_size(*z))
                .collect::<Vec<_>>()
                .join("/"),
            s.duration
        )];
        if self.rows.iter().any(|r| r.not_on_disk) {
            notes.push(
                "a (pale): fio's I/O did not reach the disk (page cache figures)".to_string(),
            );
        }
        let mut points = Vec::new();
        let mut without = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            for (li, (label, w, size)) in labels.iter().enumerate() {
                let Some(r) = row(g, w, *size) else { continue };
                match r.neighbour_kept_pct {
                    Some(x) if !r.not_on_disk => points.push(price::Point {
                        x,
                        y: r.victim_iops_kept_pct,
                        runtime: gi,
                        workload: li,
                        // shown as 0 in the table's whole MB/s
                        hollow: r.neighbour_write_bw < 0.5e6,
                    }),
                    Some(_) => without.push(format!("{g} {label} (page cache figures)")),
                    None => without.push(format!("{g} {label} (neighbours alone not measured)")),
                }
            }
        }
        let mut tnotes = vec![format!(
            "goal (shaded): victim >= {GOAL_VICTIM_PCT:.0}% of its baseline IOPS, neighbours >= {GOAL_NEIGHBOUR_PCT:.0}% of what they write alone"
        )];
        tnotes.push(notes[0].clone());
        if points.iter().any(|p| p.hollow) {
            tnotes.push("hollow: the neighbours' share under noise is below what the disk counters resolve (nbr MB/s 0), not shown to be nothing".to_string());
        }
        if points
            .iter()
            .any(|p| p.x > price::AXIS_MAX_PCT || p.y > price::AXIS_MAX_PCT)
        {
            tnotes.push(
                "x N% / y N% beside a point: its figure, beyond the axis's 200% end".to_string(),
            );
        }
        if self.rows.iter().any(|r| rough_neighbours(r, s).is_some()) {
            tnotes.push("[d] in the tables: rough neighbour figures (windows shorter than two rounds of their write+fsync loop)".to_string());
        }
        if !without.is_empty() {
            tnotes.push(format!("no point: {}", without.join(", ")));
        }
        for sk in &self.meta.skipped {
            tnotes.push(format!("skipped {}: {}", sk.name, sk.note));
        }
        let label_names: Vec<String> = labels.iter().map(|l| l.0.clone()).collect();
        (
            chart::grouped_bars(
                "IOPS drop under noisy neighbours",
                "drop %",
                &groups,
                &drop,
                &notes,
            ),
            price::log_bars(
                "p99 completion latency, baseline (pale) and beside noisy neighbours",
                "p99 ms (log scale)",
                &groups,
                &p99,
                &notes,
            ),
            price::tradeoff(
                "The price of isolation: victim IOPS kept vs neighbour throughput kept",
                &groups,
                &label_names,
                &points,
                (GOAL_NEIGHBOUR_PCT, GOAL_VICTIM_PCT),
                &tnotes,
            ),
        )
    }

    /// Writes every format into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), ReportError> {
        let (drop, p99, tradeoff) = self.charts();
        for (name, text) in FILES.iter().zip([
            self.text(),
            self.markdown(),
            self.csv(),
            self.json(),
            drop,
            p99,
            tradeoff,
        ]) {
            let p = dir.join(name);
            std::fs::write(&p, text).map_err(|source| ReportError::Io {
                path: p.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Memory as people say it (`24G`, rounded).
fn format_size_round(b: u64) -> String {
    format!("{:.0}G", b as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::cell::CellKey;
    use crate::scenario::counters::{Disk, DiskCounters};
    use crate::scenario::fio::{Direction, FioFigures};
    use crate::scenario::host::HostFacts;

    fn phase(iops: f64, p99: f64, fio_w: u64, disk_w: u64) -> Phase {
        let d = Direction {
            iops,
            clat_p99_us: p99,
            io_bytes: fio_w,
            bw_bytes: fio_w as f64 / 10.0,
            ..Default::default()
        };
        Phase {
            fio: FioFigures {
                write: d.clone(),
                total: d,
                ..Default::default()
            },
            disk: DiskCounters {
                write_bytes: disk_w,
                ..Default::default()
            },
            victim_cgroup: None,
            neighbour_cgroups: vec![],
            seconds: 10.0,
            victim_file_cached: Some(0),
            neighbour_policy: None,
            victim_policy: None,
        }
    }

    fn window(bytes_per_s: u64) -> Option<crate::scenario::cell::NeighbourWindow> {
        Some(crate::scenario::cell::NeighbourWindow {
            disk: DiskCounters {
                write_bytes: bytes_per_s * 10,
                ..Default::default()
            },
            seconds: 10.0,
            victim_policy: None,
        })
    }

    fn report(cgroup_io: CgroupIo) -> Report {
        let mut s = Scenario::builtin(true).unwrap();
        s.runtimes
            .retain(|r| ["siloc-policy", "runc", "crun", "runsc"].contains(&r.name.as_str()));
        s.duration = 9;
        s.ramp = 1;
        let meta = RunMeta {
            siloc_version: "0".into(),
            started: "t".into(),
            scenario: s,
            host: HostFacts {
                kernel: "6.18".into(),
                cpus: 2,
                mem_total: 24 << 30,
                cgroup_io,
                disk: Disk {
                    name: "vda".into(),
                    major: 254,
                    minor: 0,
                },
                scheduler: Some("mq-deadline".into()),
            },
            skipped: vec![super::super::store::Skipped {
                name: "youki".into(),
                note: "not installed".into(),
            }],
        };
        let cell = |rt: &str, wl: &str, rep: u32, b: Phase, n: Phase| CellResult {
            key: CellKey {
                runtime: rt.into(),
                workload: wl.into(),
                neighbour_size: 4 << 30,
                repetition: rep,
            },
            started: "t".into(),
            seconds: 30.0,
            baseline: Some(b),
            noise: Some(n),
            // the neighbours alone: 400 MB/s; beside an idle victim: the same
            alone: window(400_000_000),
            idle: window(400_000_000),
            error: None,
        };
        let g = 1 << 30;
        let cells = vec![
            cell(
                "runc",
                "randrw",
                1,
                phase(4000.0, 250.0, g, g),
                phase(200.0, 41_000.0, g / 20, 3 * g),
            ),
            cell(
                "siloc-policy",
                "randrw",
                1,
                phase(4000.0, 250.0, g, g),
                Phase {
                    neighbour_policy: Some("class=noisy cgroup=v1 wbps=52428800".into()),
                    ..phase(3000.0, 500.0, g, g)
                },
            ),
            cell(
                "runsc",
                "randrw",
                1,
                phase(90_000.0, 20.0, 20 * g, 0),
                phase(80_000.0, 30.0, 20 * g, 0),
            ),
            // The disk saw the bytes (readahead), yet the file stayed cached: buffered.
            cell(
                "crun",
                "randrw",
                1,
                Phase {
                    victim_file_cached: Some(g / 2),
                    ..phase(4000.0, 250.0, g, 2 * g)
                },
                phase(1000.0, 900.0, g, g),
            ),
            CellResult {
                error: Some("runc: run --detach: boom".into()),
                baseline: None,
                noise: None,
                ..cell(
                    "runc",
                    "seqread",
                    1,
                    phase(0.0, 0.0, 0, 0),
                    phase(0.0, 0.0, 0, 0),
                )
            },
        ];
        build(meta, &cells)
    }

    #[test]
    fn rows_compute_drop_rise_and_flags() {
        let r = report(CgroupIo::V1);
        let runc = r
            .rows
            .iter()
            .find(|x| x.runtime == "runc" && x.workload == "randrw")
            .unwrap();
        assert!((runc.iops_drop_pct - 95.0).abs() < 1e-9);
        assert!((runc.p99_rise_pct - 16300.0).abs() < 1e-6);
        assert!(!runc.not_on_disk && !runc.v1_writeback);
        // 3 GiB written by the disk in 10 s, the victim's own ~1 GiB/10 s x 10 s out.
        assert!(
            (runc.neighbour_write_bw - (3.0 * 1073741824.0 - 1073741824.0 / 20.0) / 10.0).abs()
                < 1.0
        );
        assert!((runc.victim_iops_kept_pct - 5.0).abs() < 1e-9);
        assert_eq!(runc.neighbour_alone_bw, Some(400e6));
        assert_eq!(runc.idle_share_pct, Some(100.0));
        let kept = runc.neighbour_write_bw / 400e6 * 100.0;
        assert!((runc.neighbour_kept_pct.unwrap() - kept).abs() < 1e-9);
        let runsc = r.rows.iter().find(|x| x.runtime == "runsc").unwrap();
        assert!(runsc.not_on_disk && runsc.disk_share == Some(0.0));
        let crun = r.rows.iter().find(|x| x.runtime == "crun").unwrap();
        assert!(crun.not_on_disk && crun.disk_share == Some(2.0) && crun.cached_share == Some(0.5));
        assert_eq!(runc.cached_share, Some(0.0));
        let policy = r.rows.iter().find(|x| x.runtime == "siloc-policy").unwrap();
        assert!(policy.v1_writeback);
        assert!(!report(CgroupIo::V2).rows.iter().any(|x| x.v1_writeback));
        let failed = r.rows.iter().find(|x| x.workload == "seqread").unwrap();
        assert_eq!((failed.cells, failed.failed), (0, 1));
        assert_eq!(r.errors.len(), 1);
    }

    #[test]
    fn formats_carry_rows_and_notes() {
        let r = report(CgroupIo::V1);
        let t = r.text();
        assert!(
            t.contains("randrw: randrw 4K blocks, iodepth 1, 70% reads, O_DIRECT"),
            "{t}"
        );
        let runc_line = t
            .lines()
            .find(|l| l.trim_start().starts_with("runc ") && l.contains("4000"))
            .unwrap();
        assert!(
            runc_line.contains(" 95%") && runc_line.contains("41.0") && runc_line.contains("0.25"),
            "{runc_line}"
        );
        // nbr MB/s, nbr alone, nbr kept, idle
        assert!(
            runc_line.contains(" 317 ")
                && runc_line.contains(" 400 ")
                && runc_line.contains(" 79% ")
                && runc_line.contains(" 100% "),
            "{runc_line}"
        );
        assert!(t.contains("[a] fio's O_DIRECT I/O did not reach the disk"));
        assert!(t.contains("[b] cgroup v1"));
        // 9 s windows, 2 x 4G rounds of 21 s at 400 MB/s alone
        assert!(runc_line.ends_with("[d]"), "{runc_line}");
        assert!(t.contains("[d] rough neighbour figures: each window (9 s)"));
        assert!(t.contains("skipped youki: not installed"));
        assert!(
            t.contains("siloc-policy: neighbours ran with class=noisy cgroup=v1 wbps=52428800")
        );
        assert!(t.contains("error: runc seqread 4G rep 1: runc: run --detach: boom"));
        let md = r.markdown();
        assert!(
            md.contains("| runtime | neighbours |")
                && md.contains("| runc | 2x4G | 4000 | 200 | 95% |"),
            "{md}"
        );
        assert!(md.contains("| nbr alone | nbr kept | idle |"), "{md}");
        let csv = r.csv();
        assert!(
            csv.lines()
                .next()
                .unwrap()
                .ends_with(",idle_share_pct,neighbour_round_s,rough_neighbours")
        );
        assert_eq!(csv.lines().count(), 1 + r.rows.len());
        assert!(
            csv.lines().nth(1).unwrap().split(',').count()
                == csv.lines().next().unwrap().split(',').count()
        );
        let json: serde_json::Value = serde_json::from_str(&r.json()).unwrap();
        assert_eq!(json["rows"].as_array().unwrap().len(), r.rows.len());
        let (drop, p99, tradeoff) = r.charts();
        assert!(drop.starts_with("<svg") && drop.contains("runc") && drop.contains("randrw"));
        assert!(p99.contains("p99 ms (log scale)") && p99.contains("randrw noisy"));
        // runc: victim kept 5%, neighbours (3 GiB - victim) / 10 s of 400 MB/s alone
        assert!(
            tradeoff.contains("runc randrw: victim 5%, neighbours 79%"),
            "{tradeoff}"
        );
        // runsc and crun measured the page cache: no point, said so
        assert!(
            tradeoff.contains("runsc randrw (page cache figures)"),
            "{tradeoff}"
        );
    }

    #[test]
    fn neighbour_figures_are_rough_below_two_rounds_a_window() {
        let mut r = report(CgroupIo::V2).rows[0].clone();
        let mut s = Scenario::builtin(true).unwrap();
        r.neighbour_round_secs = neighbour_round(2, 4 << 30, Some(400e6));
        s.duration = 60; // rounds of 21.5 s: 2.8 a window
        assert_eq!(rough_neighbours(&r, &s), None);
        s.duration = 8; // --quick
        let round = rough_neighbours(&r, &s).unwrap();
        assert!((round - 21.47).abs() < 0.01, "{round}");
        assert!(cells_of(&r, &s)[13].contains("[d]"));
        r.neighbour_round_secs = None;
        assert_eq!(rough_neighbours(&r, &s), None, "no rate");
        assert_eq!(neighbour_round(2, 4 << 30, None), None);
        assert_eq!(neighbour_round(0, 4 << 30, Some(1e6)), None);
        assert_eq!(neighbour_round(2, 4 << 30, Some(0.0)), None);
    }

    #[test]
    fn percent_signs_read_naturally() {
        let mut r = report(CgroupIo::V2).rows[0].clone();
        r.iops_drop_pct = -12.0; // IOPS rose under noise
        let s = Scenario::builtin(true).unwrap();
        assert_eq!(cells_of(&r, &s)[4], "-12%");
        r.iops_drop_pct = 40.0;
        assert_eq!(cells_of(&r, &s)[4], "40%");
        assert_eq!(ms(250.0), "0.25");
        assert_eq!(ms(41_000.0), "41.0");
        assert_eq!(ms(123_456.0), "123");
    }
}
