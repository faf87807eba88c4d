//! `update`: change a running container's cgroup limits. As runc: the container's
//! current resources, the changes on top; the result is applied through libcgroups
//! and saved as the container's spec, so the next update starts from it.
//!
//! siloc adds `--io-max "rbps=…,wbps=…,riops=…,wiops=…"`: throttles for the whole disks
//! behind the container's writable layer and volumes (the devices siloc found at
//! create), `max` lifting a limit. A container created with an I/O policy gets its
//! `io.siloc.io.policy` annotation (`siloc state`) and its record's decision updated
//! to the limits in force ([`iopolicy::after_update`]).

use std::path::{Path, PathBuf};

use libcgroups::common::{CgroupConfig, CgroupManager, ControllerOpt, create_cgroup_manager};
use oci_spec::runtime::{LinuxResources, Spec};
use serde_json::Value;

use super::Runtime;
use crate::engine;
use crate::iopolicy;
use crate::lifecycle::{placement, record};
use crate::numa::locality::{self, DevNum};
use crate::sys;

/// Objects merge key by key; anything else (numbers, arrays) is replaced.
pub fn merge(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(b), Value::Object(t)) => {
            for (k, v) in t {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, t) => *b = t,
    }
}

/// Updates container `id`: `changes` (a partial runtime-spec `LinuxResources` JSON
/// object) merged onto its current resources, and `io_max` (siloc's `--io-max`) on its
/// disks; applied through libcgroups and saved as the container's spec.
///
/// Errors: the container is unknown, `changes` is not `LinuxResources`, `--io-max`
/// is bad or the container has no disk, libcgroups refuses, the spec cannot be saved.
pub fn update(rt: &Runtime, id: &str, changes: Value, io_max: Option<&str>) -> anyhow::Result<()> {
    let c = engine::load(&rt.root, id)?;
    let spec_path: PathBuf = {
        let p = record::dir(&rt.root, id).join("config.json");
        if p.exists() {
            p
        } else {
            c.bundle().join("config.json")
        }
    };
    // One update at a time: each starts from the limits the last one saved.
    // The same directory flock that guards the state root, here on the spec's dir.
    let _lock = record::lock_root(spec_path.parent().unwrap_or(&rt.root))?;
    let mut spec = Spec::load(&spec_path)?;
    let current = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().clone())
        .unwrap_or_default();
    let mut merged = serde_json::to_value(&current)?;
    merge(&mut merged, changes);
    let mut resources: LinuxResources = serde_json::from_value(merged)?;
    // runc's update leaves device rules alone (update.go: `SkipDevices = true`, runc
    // 1.1.5 to 1.4; on v2 the eBPF program stays the one create attached): they are
    // neither applied nor saved, so the saved spec keeps the rules in force.
    if resources.devices() != current.devices() {
        tracing::warn!(target: "siloc",
            "update: linux.resources.devices left unchanged (runc's update does not change device rules)");
        resources.set_devices(current.devices().clone());
    }
    let v2 = matches!(
        libcgroups::common::get_cgroup_setup(),
        Ok(libcgroups::common::CgroupSetup::Unified)
    );
    crate::engine::cgroup_compat::check_unified_keys(Some(&resources))?;
    // runc: unified resources need a pure cgroup v2 host (engine::cgroup_compat).
    if !v2 && resources.unified().as_ref().is_some_and(|u| !u.is_empty()) {
        return Err(crate::engine::cgroup_compat::CgroupCompatError::UnifiedOnV1.into());
    }
    let cgroup_dir = if v2 {
        c.pid()
            .and_then(|p| sys::cgroup::v2_dir_of(Path::new(sys::cgroup::ROOT), p.as_raw()))
    } else {
        None
    };
    // Limits lifted with `max`: v1 deletes a rule written as 0; v2 needs `key=max`.
    let mut lifted = Vec::new();
    let mut io_settings = Vec::new();
    if let Some(text) = io_max {
        let settings =
            iopolicy::parse_io_max(text).map_err(|e| anyhow::anyhow!("--io-max: {e}"))?;
        io_settings.clone_from(&settings);
        let disks = container_disks(rt, id)?;
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
    // Rate 0 in a throttle entry means no limit, as on v1: lifted like `--io-max max`
    // (io.max refuses `wbps=0` with ERANGE), and not kept in the saved spec.
    if let Some(mut b) = resources.block_io().clone() {
        let zeros = iopolicy::zero_rate::take_zero_rates(&mut b);
        if !zeros.is_empty() {
            resources.set_block_io(Some(b));
            lifted.extend(zeros);
        }
    }
    // Device rules were set at create (and stay, above).
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
        crate::engine::io_weight::v2_weight_without_overflow(&mut apply, dir);
    }
    // pids.limit 0 means 1, as at create (engine::cgroup_compat).
    crate::engine::cgroup_compat::fix_resources(&mut apply);
    // v1: the cpu controller in an order the kernel accepts (update_order), cpuset
    // and the rest through libcgroups; per-device blkio weights, which it ignores.
    let v1_dirs = if v2 {
        None
    } else {
        c.pid().map(|p| v1_dirs(p.as_raw()))
    };
    let v1_cpu = match (&v1_dirs, apply.cpu().clone()) {
        (Some(d), Some(cpu)) if d.cpu.is_some() => {
            apply.set_cpu(Some(super::update_order::cpuset_only(&cpu)));
            Some(cpu)
        }
        _ => None,
    };
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
    if let (Some(cpu), Some(V1Dirs { cpu: Some(dir), .. })) = (&v1_cpu, &v1_dirs) {
        super::update_order::write_v1_cpu(dir, cpu)?;
    }
    if let (
        Some(b),
        Some(V1Dirs {
            blkio: Some(dir), ..
        }),
    ) = (apply.block_io(), &v1_dirs)
    {
        crate::engine::cgroup_compat::apply_weight_devices(dir, b)?;
    }
    if v2 && !lifted.is_empty() {
        let dir = cgroup_dir
            .ok_or_else(|| anyhow::anyhow!("lift a limit: cannot find the container's cgroup"))?;
        let io_max = dir.join("io.max");
        for (key, dev) in &lifted {
            std::fs::write(&io_max, format!("{dev} {key}=max")).map_err(|e| {
                anyhow::anyhow!("lift {key} of {dev}: write {}: {e}", io_max.display())
            })?;
        }
    }
    if let Some(linux) = spec.linux_mut() {
        linux.set_resources(Some(resources));
    }
    // Atomically: `exec` and other updates read it at any time.
    let body = serde_json::to_vec_pretty(&spec)?;
    sys::fs::write_atomic(&spec_path, &body)?;
    if !io_settings.is_empty() {
        note_io_policy(rt, id, &io_settings)?;
    }
    Ok(())
}

/// After `--io-max` `settings` were applied: the record's I/O decision and the
/// `io.siloc.io.policy` annotation of container `c`'s state say the limits in force
/// ([`iopolicy::after_update::after_io_max`]). A container created without an I/O
/// policy has neither, and gets none. Called with the update lock held; the state is
/// loaded afresh, so what other commands saved in it since is kept.
///
/// Errors: the record or libcontainer's state cannot be read or saved.
fn note_io_policy(
    rt: &Runtime,
    id: &str,
    settings: &[(iopolicy::IoKey, Option<u64>)],
) -> anyhow::Result<()> {
    let Some(mut rec) = record::Record::load(&rt.root, id)? else {
        return Ok(());
    };
    let Some(d) = rec.prepared.placement.as_mut().and_then(|p| p.io.as_mut()) else {
        return Ok(());
    };
    let mut c = engine::load(&rt.root, id)?;
    let mut annotations = c.state.annotations.clone().unwrap_or_default();
    let old = annotations.get(crate::annotations::OUT_IO_POLICY).cloned();
    let (new, text) = iopolicy::after_update::after_io_max(d, old.as_deref(), settings);
    *d = new;
    rec.save(&rt.root)?;
    annotations.insert(crate::annotations::OUT_IO_POLICY.to_string(), text);
    c.set_annotations(Some(annotations));
    c.save()?;
    Ok(())
}

/// A running container's v1 cpu and blkio directories.
struct V1Dirs {
    cpu: Option<PathBuf>,
    blkio: Option<PathBuf>,
}

/// The v1 cpu and blkio cgroup directories of process `pid`.
fn v1_dirs(pid: i32) -> V1Dirs {
    use crate::sys::cgroup::{hierarchies, path_in};
    let mounts = sys::cgroup_mounts::read().unwrap_or_default();
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let all = hierarchies(&mounts);
    let dir = |ctl: &str| {
        let h = all
            .iter()
            .find(|h| !h.v2 && h.controllers.iter().any(|c| c == ctl))?;
        let rel = path_in(&own, h)?;
        Some(h.mount_point.join(rel.trim_start_matches('/')))
    };
    V1Dirs {
        cpu: dir("cpu"),
        blkio: dir("blkio"),
    }
}

/// The whole disks behind container `id`'s writable layer and volumes: those found
/// at create, else looked up now.
fn container_disks(rt: &Runtime, id: &str) -> anyhow::Result<Vec<(String, DevNum)>> {
    let rec = record::Record::load(&rt.root, id)?
        .ok_or_else(|| anyhow::anyhow!("--io-max: container {id} was not created by siloc"))?;
    let disks = match &rec.prepared.placement {
        Some(p) => p.disks(),
        None => {
            let src = placement::HostSources::system();
            let r = locality::Resolver {
                sysfs: src.sysfs,
                lookup: src.lookup,
            };
            let mut paths = vec![placement::writable_path(rec.target(), &rt.config.data_root)];
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_keeps_untouched_fields() {
        let mut base = json!({"memory":{"limit":1,"swap":2},"pids":{"limit":5}});
        merge(&mut base, json!({"memory":{"limit":9}}));
        assert_eq!(
            base,
            json!({"memory":{"limit":9,"swap":2},"pids":{"limit":5}})
        );
    }
}
