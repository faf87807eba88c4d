//! `update`: change a running container's cgroup limits (runc's flags, or
//! `--resources FILE|-` with a runtime-spec `LinuxResources` JSON object).
//!
//! As runc: the container's current resources, then the file on top, then single
//! flags on top of that; the result is applied through libcgroups and saved as the
//! container's spec, so the next `update` starts from it.
//!
//! siloc adds `--io-max "rbps=…,wbps=…,riops=…,wiops=…"`: throttles for the whole disks
//! behind the container's writable layer and volumes (the devices siloc found at
//! create), `max` lifting a limit.

use std::io::Read;

use oci_spec::runtime::LinuxResources;
use serde_json::{Value, json};

use super::Ctx;
use crate::lifecycle::update;

#[derive(clap::Args, Debug, Default)]
pub(crate) struct UpdateArgs {
    /// The container id
    pub(crate) id: String,
    /// LinuxResources JSON file, or - for stdin
    #[arg(short = 'r', long)]
    pub(crate) resources: Option<String>,
    /// Block I/O weight (cgroup v2 io.weight / v1 blkio.weight)
    #[arg(long = "blkio-weight")]
    blkio_weight: Option<u16>,
    /// CPU CFS period in µs
    #[arg(long = "cpu-period")]
    cpu_period: Option<u64>,
    /// CPU CFS quota in µs
    #[arg(long = "cpu-quota", allow_hyphen_values = true)]
    cpu_quota: Option<i64>,
    /// CPU CFS burst in µs (cpu.cfs_burst_us / cpu.max.burst, Linux 5.14+; as runc)
    #[arg(long = "cpu-burst")]
    cpu_burst: Option<u64>,
    /// CPU shares (relative weight)
    #[arg(long = "cpu-share")]
    cpu_share: Option<u64>,
    /// CPU realtime period in µs
    #[arg(long = "cpu-rt-period")]
    cpu_rt_period: Option<u64>,
    /// CPU realtime runtime in µs
    #[arg(long = "cpu-rt-runtime", allow_hyphen_values = true)]
    cpu_rt_runtime: Option<i64>,
    /// CPUs allowed (cpuset), e.g. 0-3,8
    #[arg(long = "cpuset-cpus")]
    cpuset_cpus: Option<String>,
    /// Memory nodes allowed (cpuset), e.g. 0
    #[arg(long = "cpuset-mems")]
    cpuset_mems: Option<String>,
    /// Memory limit in bytes (K/M/G suffixes; -1 for unlimited)
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) memory: Option<String>,
    /// Memory reservation (soft limit) in bytes
    #[arg(long = "memory-reservation", allow_hyphen_values = true)]
    memory_reservation: Option<String>,
    /// Memory plus swap limit in bytes (-1 for unlimited)
    #[arg(long = "memory-swap", allow_hyphen_values = true)]
    memory_swap: Option<String>,
    /// Maximum number of pids (-1 for unlimited)
    #[arg(long = "pids-limit", allow_hyphen_values = true)]
    pids_limit: Option<i64>,
    /// Throttles for the container's disks: rbps=…,wbps=… (bytes/s, K/M/G),
    /// riops=…,wiops=… (IOPS); max lifts a limit (siloc)
    #[arg(long = "io-max", value_name = "LIMITS")]
    pub(crate) io_max: Option<String>,
}

/// `-1` or a size with K/M/G suffix. Errors name the flag.
fn mem(flag: &str, v: &Option<String>) -> anyhow::Result<Option<i64>> {
    match v.as_deref() {
        None => Ok(None),
        Some("-1") => Ok(Some(-1)),
        Some(t) => {
            let b = crate::units::parse_size(t).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))?;
            Ok(Some(
                i64::try_from(b).map_err(|_| anyhow::anyhow!("--{flag}: too large"))?,
            ))
        }
    }
}

/// The JSON object the single flags stand for.
fn flags_json(a: &UpdateArgs) -> anyhow::Result<Value> {
    let mut v = json!({});
    // {"a":{"b":val}} for path ["a","b"], merged into the result.
    let mut set = |path: &[&str], val: Value| {
        let nested = path.iter().rev().fold(val, |acc, k| json!({ *k: acc }));
        update::merge(&mut v, nested);
    };
    if let Some(w) = a.blkio_weight {
        set(&["blockIO", "weight"], json!(w));
    }
    let cpu = [
        ("period", a.cpu_period.map(|x| json!(x))),
        ("quota", a.cpu_quota.map(|x| json!(x))),
        ("burst", a.cpu_burst.map(|x| json!(x))),
        ("shares", a.cpu_share.map(|x| json!(x))),
        ("realtimePeriod", a.cpu_rt_period.map(|x| json!(x))),
        ("realtimeRuntime", a.cpu_rt_runtime.map(|x| json!(x))),
        ("cpus", a.cpuset_cpus.clone().map(Value::from)),
        ("mems", a.cpuset_mems.clone().map(Value::from)),
    ];
    for (k, val) in cpu {
        if let Some(val) = val {
            set(&["cpu", k], val);
        }
    }
    for (k, flag, val) in [
        ("limit", "memory", &a.memory),
        ("reservation", "memory-reservation", &a.memory_reservation),
        ("swap", "memory-swap", &a.memory_swap),
    ] {
        if let Some(n) = mem(flag, val)? {
            set(&["memory", k], json!(n));
        }
    }
    if let Some(p) = a.pids_limit {
        set(&["pids", "limit"], json!(p));
    }
    Ok(v)
}

fn read_resources(src: &str) -> anyhow::Result<Value> {
    let mut text = String::new();
    if src == "-" {
        std::io::stdin().read_to_string(&mut text)?;
    } else {
        text =
            std::fs::read_to_string(src).map_err(|e| anyhow::anyhow!("--resources {src}: {e}"))?;
    }
    let v: Value =
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("--resources {src}: {e}"))?;
    // Validate the shape now, so the error names the field.
    let de = &mut serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize::<_, LinuxResources>(de)
        .map_err(|e| anyhow::anyhow!("--resources {src}: field {}: {}", e.path(), e.inner()))?;
    Ok(v)
}

/// `siloc update`: the file, then the single flags on top, handed to
/// [`update::update`].
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn update(ctx: &Ctx, a: UpdateArgs) -> anyhow::Result<()> {
    // Input first (stdin may take its time).
    let from_file = a.resources.as_deref().map(read_resources).transpose()?;
    let mut changes = from_file.unwrap_or_else(|| json!({}));
    update::merge(&mut changes, flags_json(&a)?);
    let rt = ctx.runtime()?;
    // libcgroups makes a missing cgroup dir when it writes one: after a concurrent
    // delete, not during it (lifecycle::container_lock).
    let _lock = crate::lifecycle::container_lock::hold(&ctx.root, &a.id);
    update::update(&rt, &a.id, changes, a.io_max.as_deref())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_resources_json() {
        let a = UpdateArgs {
            blkio_weight: Some(300),
            cpu_quota: Some(50000),
            cpu_burst: Some(20000),
            cpuset_cpus: Some("0-1".into()),
            memory: Some("64M".into()),
            memory_swap: Some("-1".into()),
            pids_limit: Some(10),
            ..Default::default()
        };
        let v = flags_json(&a).unwrap();
        assert_eq!(v["blockIO"]["weight"], 300);
        assert_eq!(v["cpu"]["quota"], 50000);
        assert_eq!(v["cpu"]["burst"], 20000);
        assert_eq!(v["cpu"]["cpus"], "0-1");
        assert_eq!(v["memory"]["limit"], 64 << 20);
        assert_eq!(v["memory"]["swap"], -1);
        assert_eq!(v["pids"]["limit"], 10);
        let r: LinuxResources = serde_json::from_value(v).unwrap();
        assert_eq!(r.pids().as_ref().unwrap().limit(), 10);
    }

    #[test]
    fn bad_memory_names_the_flag() {
        let e = mem("memory", &Some("lots".into())).unwrap_err();
        assert!(e.to_string().contains("--memory"));
    }
}
