//! `check`: what this host offers for siloc's I/O classes, per whole disk (static
//! limits, io.latency targets, weights), and what is missing for each. With
//! `--enable-iocost DISK` or `--scheduler DISK=NAME` it switches that host-wide knob,
//! after a warning on stderr: the only way siloc ever does (create only warns).

use std::path::Path;

use crate::iopolicy::host;

#[derive(clap::Args, Debug)]
pub(crate) struct CheckArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    pub(crate) json: bool,
    /// HOST-WIDE: switch io.cost on for DISK (root io.cost.qos "MAJ:MIN enable=1");
    /// io.weight on cgroup v2 then takes effect, for every cgroup on the disk
    #[arg(long = "enable-iocost", value_name = "DISK")]
    pub(crate) enable_iocost: Option<String>,
    /// HOST-WIDE: set DISK's I/O scheduler (e.g. vda=bfq); bfq weights then take
    /// effect, and every process's I/O to the disk goes through it
    #[arg(long, value_name = "DISK=NAME")]
    pub(crate) scheduler: Option<String>,
}

/// `siloc check`. Errors: a knob that cannot be switched (named), JSON output.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn check(a: &CheckArgs) -> anyhow::Result<()> {
    let sysfs = Path::new("/sys");
    let cgroup_root = Path::new("/sys/fs/cgroup");
    if let Some(spec) = &a.scheduler {
        let (disk, want) = spec
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--scheduler {spec:?}: use DISK=NAME, e.g. vda=bfq"))?;
        eprintln!(
            "siloc: warning: host-wide change: every process's I/O to {disk} goes through the {want} scheduler from now on (until changed back or reboot)"
        );
        let was = host::set_scheduler(sysfs, disk, want)?;
        eprintln!("{disk}: scheduler {was} -> {want}");
    }
    if let Some(disk) = &a.enable_iocost {
        eprintln!(
            "siloc: warning: host-wide change: io.cost now paces every cgroup's I/O to {disk} with the kernel's default cost model (until disabled with \"MAJ:MIN enable=0\" in /sys/fs/cgroup/io.cost.qos)"
        );
        let line = host::enable_iocost(sysfs, cgroup_root, disk)?;
        eprintln!(
            "{}: wrote {line:?}",
            cgroup_root.join("io.cost.qos").display()
        );
    }
    let (cgroup, disks) = host::check(sysfs, cgroup_root);
    if a.json {
        let v = serde_json::json!({"cgroup": cgroup.word(), "disks": disks});
        return super::emit(&serde_json::to_string_pretty(&v)?);
    }
    let mut out = format!("cgroup I/O controller: {}\n", cgroup.word());
    for d in &disks {
        out.push_str(&format!(
            "{} ({}), scheduler {}\n",
            d.disk,
            d.dev,
            d.scheduler.as_deref().unwrap_or("-")
        ));
        for o in &d.offers {
            out.push_str(&format!(
                "  {:<8} {:<4} {}{}\n",
                o.mechanism,
                if o.available { "yes" } else { "no" },
                o.files,
                o.missing
                    .as_ref()
                    .map_or(String::new(), |m| format!(": {m}"))
            ));
        }
    }
    super::emit(out.trim_end())
}
