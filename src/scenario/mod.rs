//! The disk-isolation scenario runner (DESIGN.md item 5): `siloc scenario run`
//! measures a victim container's IOPS and latency alone and beside noisy neighbours,
//! for any runc-compatible runtime, and reports the degradation.
//!
//! - [`file`]: scenario files (TOML, built-in default, `--quick`)
//! - [`image`]: the scenario image (host fio + its libraries + static busybox)
//! - [`runtime`]: driving a runtime through runc's command line
//! - [`container`]: bundles, container guards, the leftover journal
//! - [`fio`]: fio's command line and JSON output
//! - [`counters`], [`host`]: /proc/diskstats, cgroup I/O statistics, host facts
//! - [`cell`]: one cell (baseline, then interference)
//! - [`run`], [`store`], [`progress`]: the whole run, results.jsonl, the progress bar
//! - [`report`], [`chart`], [`price`]: tables (terminal, Markdown, CSV, JSON) and SVG
//!   charts (bars, the isolation trade-off, p99 on a log axis)

pub mod cell;
pub mod chart;
pub mod container;
pub mod counters;
pub mod file;
pub mod fio;
pub mod host;
pub mod image;
pub mod price;
pub mod progress;
pub mod report;
pub mod run;
pub mod runtime;
pub mod store;
