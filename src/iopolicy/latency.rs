//! The one place siloc writes a cgroup file itself: cgroup v2 `io.latency`.
//!
//! libcgroups 0.7 has no io.latency, and `linux.resources.unified` maps a file to one
//! value, while io.latency takes one `MAJ:MIN target=µs` line per write (kernel
//! block/blk-iolatency.c, `iolatency_set_limit`; cgroup-v2.rst "IO Latency"). So after
//! libcontainer made the container's cgroup (create, before `start` runs the user's
//! process), siloc finds that cgroup from `/proc/PID/cgroup` and writes one line per
//! disk. A failure fails the create, which then removes the container; except a
//! cgroup that has `io.max` but no `io.latency`: the kernel lacks blk-iolatency
//! (Debian's 6.1 cloud kernel), which [`super::CgroupIo::read`] cannot tell before a
//! child cgroup has io files, so the target is dropped with a warning.

use std::path::{Path, PathBuf};

use super::{CgroupIo, IoDecision};

/// Errors writing io.latency; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum LatencyError {
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: no cgroup v2 line (\"0::/…\"); io.latency needs cgroup v2")]
    NoV2 { path: PathBuf },
    #[error("io.latency: write {line:?} to {path}: {source}")]
    Write {
        path: PathBuf,
        line: String,
        source: std::io::Error,
    },
}

/// The io.latency lines for `d`: `MAJ:MIN target=µs` per disk, none without a target
/// or off cgroup v2.
pub fn lines(d: &IoDecision) -> Vec<String> {
    match (d.limits.latency, &d.cgroup) {
        (Some(us), CgroupIo::V2 { .. }) => d
            .disks
            .iter()
            .map(|(_, dev)| format!("{dev} target={us}"))
            .collect(),
        _ => Vec::new(),
    }
}

/// The cgroup v2 directory of `pid`: the `0::/path` line of `<proc>/PID/cgroup`
/// (cgroups(7)) under `cgroup_root` (normally `/sys/fs/cgroup`).
/// Errors: unreadable file, no v2 line.
pub fn cgroup_dir(proc: &Path, cgroup_root: &Path, pid: i32) -> Result<PathBuf, LatencyError> {
    let path = proc.join(pid.to_string()).join("cgroup");
    let text = std::fs::read_to_string(&path).map_err(|source| LatencyError::Read {
        path: path.clone(),
        source,
    })?;
    let rel = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or(LatencyError::NoV2 { path })?;
    Ok(cgroup_root.join(rel.trim_start_matches('/')))
}

/// Writes `d`'s io.latency lines into `dir/io.latency`, one write each. Returns the
/// lines written. Errors: [`LatencyError::Write`] naming the line.
pub fn write(dir: &Path, d: &IoDecision) -> Result<Vec<String>, LatencyError> {
    let path = dir.join("io.latency");
    let lines = lines(d);
    for line in &lines {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|source| LatencyError::Write {
                path: path.clone(),
                line: line.clone(),
                source,
            })?;
    }
    Ok(lines)
}

/// Whether `dir` is a cgroup with the io controller but no io.latency file: a
/// kernel without blk-iolatency.
pub fn kernel_lacks_it(dir: &Path) -> bool {
    dir.join("io.max").exists() && !dir.join("io.latency").exists()
}

/// Applies `d`'s io.latency to the cgroup of `pid` on this host (`/proc`,
/// `/sys/fs/cgroup`); nothing when `d` has no target. Returns a warning when the
/// kernel turned out to have no io.latency (the target is then not applied).
/// Errors: see [`cgroup_dir`], [`write`].
pub fn apply(pid: i32, d: &IoDecision) -> Result<Option<String>, LatencyError> {
    if lines(d).is_empty() {
        return Ok(None);
    }
    let dir = cgroup_dir(Path::new("/proc"), Path::new("/sys/fs/cgroup"), pid)?;
    if kernel_lacks_it(&dir) {
        let disks: Vec<String> = d.disks.iter().map(|(n, v)| format!("{n} ({v})")).collect();
        return Ok(Some(format!(
            "{}: latency target {} us not applied to {}: this kernel's cgroup v2 has no io.latency (no {} in {})",
            crate::annotations::IO_LATENCY,
            d.limits.latency.unwrap_or_default(),
            disks.join(", "),
            "io.latency",
            dir.display()
        )));
    }
    let written = write(&dir, d)?;
    tracing::info!(target: "siloc", "io.latency in {}: {}", dir.display(), written.join("; "));
    Ok(None)
}
