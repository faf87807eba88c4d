//! The victim's and the neighbours' containers: their bundles, a guard that deletes
//! each one however the run ends, and a journal that lets the next run clear what a
//! crashed run left behind.
//!
//! Labels: every id starts with [`ID_PREFIX`], carries the [`RUN_ANNOTATION`]
//! annotation, lives in a private state root, and its cgroup sits under
//! [`CGROUP_PARENT`]. The journal (`<state>/journal.jsonl`) records each container
//! before it is created.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::runtime::{Runtime, RuntimeError};

/// Prefix of every container id and work directory the runner makes.
pub const ID_PREFIX: &str = "siloc-scn-";
/// Annotation naming the run a container belongs to.
pub const RUN_ANNOTATION: &str = crate::annotations::SCENARIO_RUN;
/// cgroup parent (`linux.cgroupsPath` = `/siloc-scenario/<id>`).
pub const CGROUP_PARENT: &str = "siloc-scenario";

/// Errors of the container layer.
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error(transparent)]
    Io(#[from] crate::sys::fs::IoAt),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("{runtime}: container {id} still runs after {secs} s")]
    Overran {
        runtime: String,
        id: String,
        secs: u64,
    },
    #[error("{runtime}: container {id} vanished before it stopped")]
    Vanished { runtime: String, id: String },
    #[error("interrupted")]
    Interrupted,
}

/// What a container runs and with what.
pub struct BundleSpec<'a> {
    pub rootfs: &'a Path,
    /// Host directory bind-mounted read-write at `/work` (on the disk under test).
    pub work: &'a Path,
    pub args: Vec<String>,
    pub run_id: &'a str,
    pub annotations: Vec<(String, String)>,
}

/// `linux.cgroupsPath` of container `id`.
pub fn cgroup_path(id: &str) -> String {
    format!("/{CGROUP_PARENT}/{id}")
}

/// The config.json of a container (runtime-spec config.md): the shared read-only
/// image rootfs, `/work` bound from the disk under test, the usual namespaces and
/// mounts, and the labels above.
pub fn config_json(spec: &BundleSpec<'_>, id: &str) -> serde_json::Value {
    let caps = ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"];
    let mut annotations = serde_json::Map::new();
    annotations.insert(RUN_ANNOTATION.into(), spec.run_id.into());
    for (k, v) in &spec.annotations {
        annotations.insert(k.clone(), v.clone().into());
    }
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": spec.args,
            "env": ["PATH=/usr/bin:/bin", "HOME=/root"],
            "cwd": "/work",
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 4096, "soft": 4096}],
            "noNewPrivileges": true
        },
        "root": {"path": spec.rootfs, "readonly": true},
        "hostname": id.chars().take(63).collect::<String>(),
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/work", "type": "bind", "source": spec.work,
             "options": ["rbind", "rw"]}
        ],
        "annotations": annotations,
        "linux": {
            "cgroupsPath": cgroup_path(id),
            "resources": {"devices": [{"allow": false, "access": "rwm"}]},
            "namespaces": [
                {"type": "pid"}, {"type": "network"}, {"type": "ipc"},
                {"type": "uts"}, {"type": "mount"}
            ],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
        }
    })
}

/// One journal line: enough to delete the container without the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub bin: PathBuf,
    pub args: Vec<String>,
    pub root: PathBuf,
    pub config: Option<PathBuf>,
    pub id: String,
}

/// `<state>/journal.jsonl`: containers and directories a run made, written before
/// they exist, cleared when the run ends cleanly.
pub struct Journal {
    pub path: PathBuf,
}

/// A journal line: a container, or a directory to remove.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalLine {
    Container(JournalEntry),
    Dir(PathBuf),
}

impl Journal {
    /// Appends a line and syncs it: it must be on disk before the thing exists.
    pub fn add(&self, line: &JournalLine) -> Result<(), ContainerError> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(crate::sys::fs::io_at(&self.path))?;
        let mut text = serde_json::to_string(line).unwrap_or_default();
        text.push('\n');
        f.write_all(text.as_bytes())
            .map_err(crate::sys::fs::io_at(&self.path))?;
        Ok(f.sync_data().map_err(crate::sys::fs::io_at(&self.path))?)
    }

    /// Deletes every container and directory the journal names (a crashed run's
    /// leftovers), then empties it. Returns what it removed, for a log line.
    pub fn clear(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let mut removed = Vec::new();
        let lines: Vec<JournalLine> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        for line in &lines {
            if let JournalLine::Container(e) = line {
                let rt = Runtime {
                    entry: super::file::RuntimeEntry {
                        name: "leftover".into(),
                        kind: super::file::RuntimeKind::Runc,
                        path: None,
                        args: e.args.clone(),
                        policy: false,
                        victim_class: None,
                        neighbour_class: None,
                    },
                    bin: e.bin.clone(),
                    state_root: e.root.clone(),
                    config: e.config.clone(),
                };
                if rt.delete(&e.id).is_ok() {
                    removed.push(format!("container {}", e.id));
                }
                remove_cgroups(&e.id);
            }
        }
        for line in &lines {
            if let JournalLine::Dir(d) = line
                && d.exists()
            {
                let _ = std::fs::remove_dir_all(d);
                removed.push(format!("directory {}", d.display()));
            }
        }
        let _ = std::fs::remove_file(&self.path);
        removed
    }
}

/// Removes the cgroup directories of container `id` that its runtime left (a crash
/// between create and delete, or a delete that returned while the cgroup was still
/// busy), in every mounted hierarchy. A v1 cgroup stays busy (rmdir EBUSY) until its
/// killed tasks are released, which a writer in throttled writeback delays: so EBUSY is
/// retried for up to [`CGROUP_PATIENCE`], then left with a warning.
pub fn remove_cgroups(id: &str) {
    let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    let mut roots: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    roots.push(PathBuf::from("/sys/fs/cgroup"));
    let mut busy: Vec<PathBuf> = roots
        .into_iter()
        .map(|root| root.join(CGROUP_PARENT).join(id))
        .filter(|dir| dir.is_dir())
        .collect();
    let end = Instant::now() + CGROUP_PATIENCE;
    loop {
        busy.retain(|dir| {
            std::fs::remove_dir(dir).is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
        });
        if busy.is_empty() {
            return;
        }
        if Instant::now() >= end {
            for dir in &busy {
                tracing::warn!(target: "siloc", "cgroup {} still busy; left", dir.display());
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long [`remove_cgroups`] retries a busy cgroup.
const CGROUP_PATIENCE: Duration = Duration::from_secs(30);

/// Removes the empty [`CGROUP_PARENT`] directories (another run may still use one:
/// then rmdir fails and it stays).
pub fn remove_cgroup_parents() {
    let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    let mut roots: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
    roots.push(PathBuf::from("/sys/fs/cgroup"));
    for root in roots {
        let _ = std::fs::remove_dir(root.join(CGROUP_PARENT));
    }
}

/// A live container; dropping it deletes it (`delete --force`) and its cgroups.
pub struct Container<'a> {
    pub rt: &'a Runtime,
    pub id: String,
    pub log: PathBuf,
}

impl<'a> Container<'a> {
    /// Writes the bundle under `bundle_dir`, journals the container, and runs it
    /// detached. Errors: the runtime's message (the guard deletes what it made).
    pub fn start(
        rt: &'a Runtime,
        journal: &Journal,
        bundle_dir: &Path,
        spec: &BundleSpec<'_>,
        id: &str,
    ) -> Result<Container<'a>, ContainerError> {
        std::fs::create_dir_all(bundle_dir).map_err(crate::sys::fs::io_at(bundle_dir))?;
        let cfg = bundle_dir.join("config.json");
        let text = serde_json::to_vec_pretty(&config_json(spec, id)).unwrap_or_default();
        std::fs::write(&cfg, text).map_err(crate::sys::fs::io_at(&cfg))?;
        journal.add(&JournalLine::Container(JournalEntry {
            bin: rt.bin.clone(),
            args: rt.entry.args.clone(),
            root: rt.state_root.clone(),
            config: rt.config.clone(),
            id: id.to_string(),
        }))?;
        let c = Container {
            rt,
            id: id.to_string(),
            log: bundle_dir.join("container.log"),
        };
        rt.run_detached(bundle_dir, id, &c.log)?;
        Ok(c)
    }

    /// Waits until the container stopped, at most `limit`; checks `stop` between
    /// polls and returns [`ContainerError::Interrupted`] when it says so.
    pub fn wait_stopped(
        &self,
        limit: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), ContainerError> {
        let end = Instant::now() + limit;
        loop {
            if stop() {
                return Err(ContainerError::Interrupted);
            }
            match self.rt.status(&self.id)? {
                Some(s) if s == "stopped" => return Ok(()),
                Some(_) => {}
                None => {
                    return Err(ContainerError::Vanished {
                        runtime: self.rt.name().to_string(),
                        id: self.id.clone(),
                    });
                }
            }
            if Instant::now() >= end {
                return Err(ContainerError::Overran {
                    runtime: self.rt.name().to_string(),
                    id: self.id.clone(),
                    secs: limit.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// How long a delete may keep failing before the runner gives up on it: a killed
/// writer stuck in throttled writeback leaves its cgroup busy until its I/O drains.
const DELETE_PATIENCE: Duration = Duration::from_secs(120);

impl Drop for Container<'_> {
    /// Deletes the container, retrying while the runtime cannot (busy cgroup), so the
    /// next phase does not start beside a neighbour that is still writing.
    fn drop(&mut self) {
        let end = Instant::now() + DELETE_PATIENCE;
        loop {
            match self.rt.delete(&self.id) {
                Ok(()) => break,
                Err(e) if Instant::now() >= end => {
                    tracing::warn!(target: "siloc", "{e}");
                    break;
                }
                Err(e) => {
                    tracing::debug!(target: "siloc", "{e}; retrying");
                    std::thread::sleep(Duration::from_secs(1));
                    // Gone in the meantime (the failed attempt finished the job).
                    if matches!(self.rt.status(&self.id), Ok(None)) {
                        break;
                    }
                }
            }
        }
        remove_cgroups(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_carries_labels_and_work_mount() {
        let spec = BundleSpec {
            rootfs: Path::new("/img/rootfs"),
            work: Path::new("/var/lib/siloc/scenario/siloc-scn-1/victim"),
            args: vec!["fio".into(), "--name=x".into()],
            run_id: "r1",
            annotations: vec![("io.siloc.numa".into(), "auto".into())],
        };
        let v = config_json(&spec, "siloc-scn-r1-v");
        assert_eq!(v["linux"]["cgroupsPath"], "/siloc-scenario/siloc-scn-r1-v");
        assert_eq!(v["annotations"][RUN_ANNOTATION], "r1");
        assert_eq!(v["annotations"]["io.siloc.numa"], "auto");
        assert_eq!(v["root"]["readonly"], true);
        let work = v["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["destination"] == "/work")
            .unwrap();
        assert_eq!(work["source"], "/var/lib/siloc/scenario/siloc-scn-1/victim");
        assert_eq!(v["process"]["args"][0], "fio");
        let parsed: oci_spec::runtime::Spec = serde_json::from_value(v).unwrap();
        assert!(parsed.linux().is_some());
    }

    #[test]
    fn journal_round_trips_and_clears_dirs() {
        let t = tempfile::tempdir().unwrap();
        let j = Journal {
            path: t.path().join("journal.jsonl"),
        };
        let d = t.path().join("siloc-scn-x");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        j.add(&JournalLine::Dir(d.clone())).unwrap();
        let removed = j.clear();
        assert!(!d.exists());
        assert_eq!(removed.len(), 1);
        assert!(!j.path.exists());
    }
}
