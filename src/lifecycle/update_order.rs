//! `update` on cgroup v1: the cpu controller's files written in an order the kernel
//! accepts. libcgroups 0.7 writes shares, period, quota, burst, rt runtime, rt period,
//! idle, each once, so the kernel refuses (EINVAL) a valid change whose steps pass
//! through an invalid state:
//!
//! - a shorter period under a parent with its own limit (a pod cgroup): the old quota
//!   over the new period exceeds the parent's share (kernel `tg_cfs_schedulable_down`);
//! - a quota below the current burst (`tg_set_cfs_bandwidth`: burst ≤ quota);
//! - an rt runtime above the current rt period, or the reverse
//!   (`tg_rt_schedulable`);
//! - shares while `cpu.idle` is 1 (`sched_group_set_shares`), so once idle, every
//!   later update failed.
//!
//! runc retries a refused period after the quota (libcontainer/cgroups/fs/cpu.go);
//! siloc retries every refused write after the others until nothing moves, and leaves
//! out shares while the group stays idle (the kernel keeps an idle group at minimal
//! weight and refuses shares). The values written are libcgroups': 0 means unchanged
//! for shares, period, quota and the rt pair.

use std::path::{Path, PathBuf};

use oci_spec::runtime::LinuxCpu;

/// A write the kernel refused, or could not be made.
#[derive(Debug, thiserror::Error)]
#[error("failed to write {value} to {path}: {msg}")]
pub struct CpuWriteError {
    pub value: String,
    pub path: PathBuf,
    pub msg: String,
}

/// The v1 cpu files for `cpu`, in the preferred order (file name, value).
pub fn planned_writes(cpu: &LinuxCpu, idle_now: bool) -> Vec<(&'static str, String)> {
    let mut w: Vec<(&'static str, String)> = Vec::new();
    let nonzero_u = |v: Option<u64>| v.filter(|x| *x != 0).map(|x| x.to_string());
    let nonzero_i = |v: Option<i64>| v.filter(|x| *x != 0).map(|x| x.to_string());
    if cpu.idle() == Some(0) {
        w.push(("cpu.idle", "0".into()));
    }
    let idle_after = cpu.idle().map_or(idle_now, |i| i == 1);
    if !idle_after && let Some(s) = nonzero_u(cpu.shares()) {
        w.push(("cpu.shares", s));
    }
    if let Some(b) = cpu.burst() {
        w.push(("cpu.cfs_burst_us", b.to_string()));
    }
    if let Some(p) = nonzero_u(cpu.period()) {
        w.push(("cpu.cfs_period_us", p));
    }
    if let Some(q) = nonzero_i(cpu.quota()) {
        w.push(("cpu.cfs_quota_us", q));
    }
    if let Some(p) = nonzero_u(cpu.realtime_period()) {
        w.push(("cpu.rt_period_us", p));
    }
    if let Some(r) = nonzero_i(cpu.realtime_runtime()) {
        w.push(("cpu.rt_runtime_us", r));
    }
    if let Some(i) = cpu.idle().filter(|i| *i != 0) {
        w.push(("cpu.idle", i.to_string()));
    }
    w
}

/// Writes `cpu` into v1 cpu cgroup `dir`: [`planned_writes`], each write the kernel
/// refuses with EINVAL retried after the others succeed, until all are written or a
/// round writes nothing.
///
/// Errors: [`CpuWriteError`] for a write other than EINVAL, or the first write still
/// refused when nothing more moves.
pub fn write_v1_cpu(dir: &Path, cpu: &LinuxCpu) -> Result<(), CpuWriteError> {
    let idle_now = std::fs::read_to_string(dir.join("cpu.idle")).is_ok_and(|s| s.trim() == "1");
    let mut pending = planned_writes(cpu, idle_now);
    loop {
        let mut refused = Vec::new();
        let before = pending.len();
        for (file, value) in pending {
            let path = dir.join(file);
            match std::fs::write(&path, &value) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    refused.push((file, value, e));
                }
                Err(e) => {
                    return Err(CpuWriteError {
                        value,
                        path,
                        msg: e.to_string(),
                    });
                }
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        if refused.len() == before {
            let (file, value, e) = refused.swap_remove(0);
            return Err(CpuWriteError {
                value,
                path: dir.join(file),
                msg: e.to_string(),
            });
        }
        pending = refused.into_iter().map(|(f, v, _)| (f, v)).collect();
    }
}

/// `cpu` with only what the v1 cpuset controller takes (cpus, mems), for libcgroups.
pub fn cpuset_only(cpu: &LinuxCpu) -> LinuxCpu {
    let mut c = LinuxCpu::default();
    c.set_cpus(cpu.cpus().clone());
    c.set_mems(cpu.mems().clone());
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cpu(v: serde_json::Value) -> LinuxCpu {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn idle_off_first_on_last_and_no_shares_while_idle() {
        let files = |c: &LinuxCpu, idle_now| {
            planned_writes(c, idle_now)
                .into_iter()
                .map(|(f, _)| f)
                .collect::<Vec<_>>()
        };
        let on = cpu(json!({"shares": 512, "idle": 1, "quota": 1000}));
        assert_eq!(files(&on, false), ["cpu.cfs_quota_us", "cpu.idle"]);
        let off = cpu(json!({"shares": 512, "idle": 0}));
        assert_eq!(files(&off, true), ["cpu.idle", "cpu.shares"]);
        let stays = cpu(json!({"shares": 512}));
        assert!(files(&stays, true).is_empty());
        assert_eq!(files(&stays, false), ["cpu.shares"]);
    }

    #[test]
    fn zero_means_unchanged_and_burst_zero_is_written() {
        let c = cpu(json!({"shares": 0, "period": 0, "quota": 0, "burst": 0}));
        assert_eq!(
            planned_writes(&c, false),
            vec![("cpu.cfs_burst_us", "0".to_string())]
        );
    }

    #[test]
    fn writes_land_in_files_of_a_plain_directory() {
        let d = tempfile::tempdir().unwrap();
        write_v1_cpu(
            d.path(),
            &cpu(json!({"period": 50000, "quota": 25000, "realtimePeriod": 900000})),
        )
        .unwrap();
        let read = |f: &str| std::fs::read_to_string(d.path().join(f)).unwrap();
        assert_eq!(read("cpu.cfs_period_us"), "50000");
        assert_eq!(read("cpu.cfs_quota_us"), "25000");
        assert_eq!(read("cpu.rt_period_us"), "900000");
    }
}
