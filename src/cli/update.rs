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
use std::path::PathBuf;

use libcgroups::common::{CgroupConfig, CgroupManager, ControllerOpt, create_cgroup_manager};
use oci_spec::runtime::{LinuxResources, Spec};
use serde_json::{Value, json};

use super::Ctx;
use crate::locality::{self, DevNum};
use crate::{engine, iopolicy, placement, record};

#[derive(clap::Args, Debug, Default)]
pub struct UpdateArgs {
    /// The container id
    pub id: String,
    /// LinuxResources JSON file, or - for stdin
    #[arg(short = 'r', long)]
    pub resources: Option<String>,
    /// Block I/O weight (cgroup v2 io.weight / v1 blkio.weight)
    #[arg(long = "blkio-weight")]
    pub blkio_weight: Option<u16>,
    /// CPU CFS period in µs
    #[arg(long = "cpu-period")]
    pub cpu_period: Option<u64>,
    /// CPU CFS quota in µs
    #[arg(long = "cpu-quota")]
    pub cpu_quota: Option<i64>,
    /// CPU shares (relative weight)
    #[arg(long = "cpu-share")]
    pub cpu_share: Option<u64>,
    /// CPU realtime period in µs
    #[arg(long = "cpu-rt-period")]
    pub cpu_rt_period: Option<u64>,
    /// CPU realtime runtime in µs
    #[arg(long = "cpu-rt-runtime")]
    pub cpu_rt_runtime: Option<i64>,
    /// CPUs allowed (cpuset), e.g. 0-3,8
    #[arg(long = "cpuset-cpus")]
    pub cpuset_cpus: Option<String>,
    /// Memory nodes allowed (cpuset), e.g. 0
    #[arg(long = "cpuset-mems")]
    pub cpuset_mems: Option<String>,
    /// Memory limit in bytes (K/M/G suffixes)
    #[arg(long)]
    pub memory: Option<String>,
    /// Memory reservation (soft limit) in bytes
    #[arg(long = "memory-reservation")]
    pub memory_reservation: Option<String>,
    /// Memory plus swap limit in bytes (-1 for unlimited)
    #[arg(long = "memory-swap")]
    pub memory_swap: Option<String>,
    /// Maximum number of pids (-1 for unlimited)
    #[arg(long = "pids-limit")]
    pub pids_limit: Option<i64>,
    /// Throttles for the container's disks: rbps=…,wbps=… (bytes/s, K/M/G),
    /// riops=…,wiops=… (IOPS); max lifts a limit (siloc)
    #[arg(long = "io-max", value_name = "LIMITS")]
    pub io_max: Option<String>,
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

/// Objects merge key by key; anything else (numbers, arrays) is replaced.
fn merge(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, v) in t {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, t) => *b = t,
    }
}

/// The JSON object the single flags stand for.
fn flags_json(a: &UpdateArgs) -> anyhow::Result<Value> {
    let mut v = json!({});
    // {"a":{"b":val}} for path ["a","b"], merged into the result.
    let mut set = |path: &[&str], val: Value| {
        let nested = path.iter().rev().fold(val, |acc, k| json!({ *k: acc }));
        merge(&mut v, nested);
    };
    if let Some(w) = a.blkio_weight {
        set(&["blockIO", "weight"], json!(w));
    }
    let cpu = [
        ("period", a.cpu_period.map(|x| json!(x))),
        ("quota", a.cpu_quota.map(|x| json!(x))),
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

/// `siloc update`.
pub fn update(ctx: &Ctx, a: UpdateArgs) -> anyhow::Result<()> {
    let c = engine::load(&ctx.root, &a.id)?;
    let spec_path: PathBuf = {
        let p = record::dir(&ctx.root, &a.id).join("config.json");
        if p.exists() {
            p
        } else {
            c.bundle().join("config.json")
        }
    };
    // Input first (stdin may take its time), then one update at a time: each starts
    // from the limits the last one saved.
    let from_file = a.resources.as_deref().map(read_resources).transpose()?;
    let flags = flags_json(&a)?;
    // The same directory flock that guards the state root, here on the spec's dir.
    let _lock = record::lock_root(spec_path.parent().unwrap_or(&ctx.root))?;
    let mut spec = Spec::load(&spec_path)?;
    let current = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().clone())
        .unwrap_or_default();
    let mut merged = serde_json::to_value(&current)?;
    if let Some(v) = from_file {
        merge(&mut merged, v);
    }
    merge(&mut merged, flags);
    let mut resources: LinuxResources = serde_json::from_value(merged)?;
    let v2 = matches!(
        libcgroups::common::get_cgroup_setup(),
        Ok(libcgroups::common::CgroupSetup::Unified)
    );
    let cgroup_dir = if v2 { v2_cgroup_dir(&c) } else { None };
    // Limits lifted with `max`: v1 deletes a rule written as 0; v2 needs `key=max`.
    let mut lifted = Vec::new();
    if let Some(text) = &a.io_max {
        let settings =
            iopolicy::parse_io_max(text).map_err(|e| anyhow::anyhow!("--io-max: {e}"))?;
        let disks = container_disks(ctx, &a.id)?;
        let mut b = resources.block_io().clone().unwrap_or_default();
        for (key, rate) in &settings {
            for (_, dev) in &disks {
                iopolicy::set_limit(&mut b, *key, *dev, *rate);
                if rate.is_none() {
                    lifted.push((*key, *dev));
                }
            }
        }
        resources.set_block_io(Some(b));
    }
    // Device rules were set at create; rewriting them on a live container gains nothing.
    let mut apply = resources.clone();
    apply.set_devices(None);
    if !v2 && !lifted.is_empty() {
        let mut b = apply.block_io().clone().unwrap_or_default();
        for (key, dev) in &lifted {
            iopolicy::set_limit(&mut b, *key, *dev, Some(0));
        }
        apply.set_block_io(Some(b));
    }
    if let Some(dir) = &cgroup_dir {
        v2_weight_without_overflow(&mut apply, dir);
    }
    let manager = create_cgroup_manager(CgroupConfig {
        cgroup_path: c.spec()?.cgroup_path,
        systemd_cgroup: c.systemd(),
        container_name: c.id().to_string(),
    })?;
    manager.apply(&ControllerOpt {
        resources: &apply,
        disable_oom_killer: false,
        oom_score_adj: None,
        freezer_state: None,
    })?;
    if v2 && !lifted.is_empty() {
        let dir = cgroup_dir
            .ok_or_else(|| anyhow::anyhow!("--io-max: cannot find the container's cgroup"))?;
        let io_max = dir.join("io.max");
        for (key, dev) in &lifted {
            std::fs::write(&io_max, format!("{dev} {key}=max"))
                .map_err(|e| anyhow::anyhow!("--io-max: write {}: {e}", io_max.display()))?;
        }
    }
    if let Some(linux) = spec.linux_mut() {
        linux.set_resources(Some(resources));
    }
    // Atomically: `exec` and other updates read it at any time.
    let mut tmp = spec_path.clone().into_os_string();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    spec.save(&tmp)?;
    std::fs::rename(&tmp, &spec_path)
        .map_err(|e| anyhow::anyhow!("save {}: {e}", spec_path.display()))?;
    Ok(())
}

/// The whole disks behind container `id`'s writable layer and volumes: those found
/// at create, else looked up now.
fn container_disks(ctx: &Ctx, id: &str) -> anyhow::Result<Vec<(String, DevNum)>> {
    let rec = record::Record::load(&ctx.root, id)?
        .ok_or_else(|| anyhow::anyhow!("--io-max: container {id} was not created by siloc"))?;
    let disks = match &rec.prepared.placement {
        Some(p) => p.disks(),
        None => {
            let rt = ctx.runtime()?;
            let src = placement::HostSources::system();
            let r = locality::Resolver {
                sysfs: src.sysfs,
                lookup: src.lookup,
            };
            let mut paths = vec![placement::writable_path(&rec, &rt.config.data_root)];
            paths.extend(rec.plan.volumes.iter().map(|v| rec.bundle.join(v)));
            let mut disks: Vec<(String, DevNum)> = Vec::new();
            for p in paths {
                if let Some(d) = r.resolve(&p)?
                    && !disks.iter().any(|(_, x)| *x == d.dev)
                {
                    disks.push((d.disk, d.dev));
                }
            }
            disks
        }
    };
    if disks.is_empty() {
        anyhow::bail!(
            "--io-max: container {id} has no block device behind its writable layer or volumes"
        );
    }
    Ok(disks)
}

/// The cgroup v2 directory of a running container, from its init's /proc/PID/cgroup
/// (right for both cgroup drivers).
fn v2_cgroup_dir(c: &libcontainer::container::Container) -> Option<PathBuf> {
    let pid = c.pid()?;
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let rel = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(PathBuf::from("/sys/fs/cgroup").join(rel.trim_start_matches('/')))
}

/// libcgroups 0.7 scales `blockIO.weight` to io.weight in u16 arithmetic, which
/// overflows above 16. Where bfq's io.bfq.weight (which takes the weight unscaled) is
/// absent, hand io.weight the value scaled as runc does, through `unified`.
fn v2_weight_without_overflow(apply: &mut LinuxResources, dir: &std::path::Path) {
    let Some(w) = apply.block_io().as_ref().and_then(|b| b.weight()) else {
        return;
    };
    if dir.join("io.bfq.weight").exists() || w == 0 {
        return;
    }
    let scaled = 1 + (u64::from(w).saturating_sub(10)) * 9999 / 990;
    let mut u = apply.unified().clone().unwrap_or_default();
    u.entry("io.weight".into())
        .or_insert_with(|| format!("default {scaled}"));
    apply.set_unified(Some(u));
    if let Some(mut b) = apply.block_io().clone() {
        b.set_weight(None);
        apply.set_block_io(Some(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_resources_json() {
        let a = UpdateArgs {
            blkio_weight: Some(300),
            cpu_quota: Some(50000),
            cpuset_cpus: Some("0-1".into()),
            memory: Some("64M".into()),
            memory_swap: Some("-1".into()),
            pids_limit: Some(10),
            ..Default::default()
        };
        let v = flags_json(&a).unwrap();
        assert_eq!(v["blockIO"]["weight"], 300);
        assert_eq!(v["cpu"]["quota"], 50000);
        assert_eq!(v["cpu"]["cpus"], "0-1");
        assert_eq!(v["memory"]["limit"], 64 << 20);
        assert_eq!(v["memory"]["swap"], -1);
        assert_eq!(v["pids"]["limit"], 10);
        let r: LinuxResources = serde_json::from_value(v).unwrap();
        assert_eq!(r.pids().as_ref().unwrap().limit(), 10);
    }

    #[test]
    fn merge_keeps_untouched_fields() {
        let mut base = json!({"memory":{"limit":1,"swap":2},"pids":{"limit":5}});
        merge(&mut base, json!({"memory":{"limit":9}}));
        assert_eq!(
            base,
            json!({"memory":{"limit":9,"swap":2},"pids":{"limit":5}})
        );
    }

    #[test]
    fn bad_memory_names_the_flag() {
        let e = mem("memory", &Some("lots".into())).unwrap_err();
        assert!(e.to_string().contains("--memory"));
    }

    #[test]
    fn v2_weight_goes_through_unified_without_bfq() {
        let d = tempfile::tempdir().unwrap();
        let mut r: LinuxResources =
            serde_json::from_value(json!({"blockIO":{"weight":500}})).unwrap();
        v2_weight_without_overflow(&mut r, d.path());
        assert_eq!(r.block_io().as_ref().unwrap().weight(), None);
        // runc's scaling: 1 + (500 - 10) * 9999 / 990
        assert_eq!(r.unified().as_ref().unwrap()["io.weight"], "default 4950");
        std::fs::write(d.path().join("io.bfq.weight"), "").unwrap();
        let mut r: LinuxResources =
            serde_json::from_value(json!({"blockIO":{"weight":500}})).unwrap();
        v2_weight_without_overflow(&mut r, d.path());
        assert_eq!(r.block_io().as_ref().unwrap().weight(), Some(500));
    }
}
