//! `list` and `ps`: what runs, which processes (`events` is in `events.rs`).

use std::path::Path;

use libcgroups::common::{CgroupConfig, CgroupManager, create_cgroup_manager};
use libcontainer::container::{Container, ContainerStatus};

use super::Ctx;
use super::state::{RuncState, runc_state};
use crate::engine;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    Table,
    Json,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ListArgs {
    /// Output format: table or json
    #[arg(short = 'f', long, value_enum, default_value = "table")]
    pub(crate) format: Format,
    /// Display only container ids
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
}

/// Every container under the state root, sorted by id (libcontainer's dirs; siloc's
/// own `.siloc` dir is skipped).
fn all_containers(root: &Path) -> Vec<Container> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().join("state.json").exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.starts_with('.'))
        .collect();
    ids.sort();
    ids.iter()
        .filter_map(|id| engine::load(root, id).ok())
        .collect()
}

/// `siloc list`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn list(ctx: &Ctx, a: ListArgs) -> anyhow::Result<()> {
    let states: Vec<RuncState> = all_containers(&ctx.root)
        .iter()
        .map(|c| runc_state(&ctx.root, c))
        .collect();
    let text = if a.quiet {
        states
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    } else {
        match a.format {
            // runc prints `null` for no containers; keep that for scripts written for it.
            Format::Json if states.is_empty() => "null".to_string(),
            Format::Json => serde_json::to_string(&states)?,
            Format::Table => {
                let rows: Vec<[String; 6]> = states
                    .iter()
                    .map(|s| {
                        [
                            s.id.clone(),
                            s.pid.to_string(),
                            s.status.clone(),
                            s.bundle.display().to_string(),
                            s.created.clone(),
                            "root".to_string(),
                        ]
                    })
                    .collect();
                let header =
                    ["ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"].map(String::from);
                table(&header, &rows).trim_end().to_string()
            }
        }
    };
    if text.is_empty() {
        return Ok(());
    }
    super::emit(&text)
}

/// Left-aligned columns at least 12 wide, three spaces apart (runc's tabwriter).
fn table<const N: usize>(header: &[String; N], rows: &[[String; N]]) -> String {
    let mut width = [12usize; N];
    for r in std::iter::once(header).chain(rows) {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count() + 3);
        }
    }
    let mut s = String::new();
    for r in std::iter::once(header).chain(rows) {
        let line: String = r
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// The cgroup manager (libcgroups) of container `c`, from its saved spec.
pub(super) fn cgroup_manager(
    c: &Container,
) -> anyhow::Result<libcgroups::common::AnyCgroupManager> {
    Ok(create_cgroup_manager(CgroupConfig {
        cgroup_path: c.spec()?.cgroup_path,
        systemd_cgroup: c.systemd(),
        container_name: c.id().to_string(),
    })?)
}

#[derive(clap::Args, Debug)]
pub(crate) struct PsArgs {
    /// The container id
    pub(crate) id: String,
    /// Output format: table (ps output) or json (pids)
    #[arg(short = 'f', long, value_enum, default_value = "table")]
    pub(crate) format: Format,
    /// Arguments for ps(1) (default -ef)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    ps_args: Vec<String>,
}

/// `siloc ps`: the container's processes, from its cgroup.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn ps(ctx: &Ctx, a: PsArgs) -> anyhow::Result<()> {
    let c = engine::load(&ctx.root, &a.id)?;
    let mut pids: Vec<i32> = if c.status() == ContainerStatus::Stopped {
        Vec::new()
    } else {
        cgroup_manager(&c)?
            .get_all_pids()?
            .iter()
            .map(|p| p.as_raw())
            .collect()
    };
    pids.sort_unstable();
    if a.format == Format::Json {
        return super::emit(&serde_json::to_string(&pids)?);
    }
    let args = if a.ps_args.is_empty() {
        vec!["-ef".to_string()]
    } else {
        a.ps_args
    };
    let out = std::process::Command::new("ps").args(&args).output()?;
    if !out.status.success() {
        anyhow::bail!(
            "ps {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    super::emit(filter_ps(&String::from_utf8_lossy(&out.stdout), &pids)?.trim_end())
}

/// Keeps ps(1)'s header and the lines whose PID column is one of `pids`.
fn filter_ps(text: &str, pids: &[i32]) -> anyhow::Result<String> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    let col = header
        .split_whitespace()
        .position(|h| h == "PID")
        .ok_or_else(|| anyhow::anyhow!("ps output has no PID column"))?;
    let mut s = format!("{header}\n");
    for l in lines {
        let pid = l
            .split_whitespace()
            .nth(col)
            .and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|p| pids.contains(&p)) {
            s.push_str(l);
            s.push('\n');
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ps_filter_keeps_header_and_container_pids() {
        let t = "UID PID PPID C STIME TTY TIME CMD\nroot 1 0 0 x ? 0 init\nroot 42 1 0 x ? 0 sh\n";
        assert_eq!(
            filter_ps(t, &[42]).unwrap(),
            "UID PID PPID C STIME TTY TIME CMD\nroot 42 1 0 x ? 0 sh\n"
        );
        assert!(filter_ps("USER X\n", &[1]).is_err());
    }

    #[test]
    fn table_is_runc_shaped() {
        let h = ["ID", "PID"].map(String::from);
        let t = table(&h, &[["abc".into(), "1".into()]]);
        assert_eq!(t, "ID          PID\nabc         1\n");
    }
}
