//! siloc's per-container record: the plan and what `prepare` has done so far, kept
//! under the state root so `delete` (also `delete --force` after a crashed `create`)
//! can undo exactly that.
//!
//! Layout under the state root (`--root`, default `/run/siloc`):
//! ```text
//! <root>/<id>/                         libcontainer's container dir (state.json, ...)
//! <root>/.siloc/containers/<id>/       siloc's dir for the container
//!     record.json                      this record
//!     config.json                      the final spec handed to libcontainer
//! ```
//! The host ID ranges are not here: one table for the host, whatever the state root
//! (`userns::idpool`, `[userns] pool_dir`).
//! Every creation and removal under `<root>/.siloc` happens under an exclusive
//! `flock(2)` on the state root directory itself. Once the last container is deleted,
//! the state root holds only the empty `.siloc/containers` (kept, as runc keeps its
//! state root: making it again for every container cost two directory blocks).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lifecycle::placement::Target;
use crate::lifecycle::plan::Plan;
use crate::sys::fs::{IoAt, io_at, write_atomic};
use crate::sys::lock::{self, Lock, Mode};
use crate::userns::idpool::Range;

/// What `prepare` did, step by step. Each field is written *before* its step acts, so
/// undo also covers a step that a crash interrupted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepared {
    /// The host ID range (also held in the ID pool table).
    pub range: Option<Range>,
    /// Directories siloc made and removes on delete (ephemeral upper/work, work dir of
    /// a persistent upper).
    pub made_dirs: Vec<PathBuf>,
    /// A mount siloc attached at the rootfs path.
    pub mount: Option<RootfsMount>,
    /// How the overlay was assembled (reported in the `io.siloc.rootfs.assembly`
    /// annotation): layers, detached trees, idmapped, mounts attached, mount path.
    #[serde(default)]
    pub assembly: Option<String>,
    /// The devices found and the NUMA and I/O decisions (nothing to undo).
    #[serde(default)]
    pub placement: Option<crate::lifecycle::placement::Placement>,
}

/// The one mount siloc attaches, and how to recognise it in mountinfo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RootfsMount {
    /// overlayfs whose mountinfo source is `source`.
    Overlay { source: String },
    /// An idmapped bind of the rootfs onto itself.
    IdmapBind,
}

/// The record of one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    /// The bundle the caller gave (what `siloc state` reports).
    pub bundle: PathBuf,
    /// Absolute root.path.
    pub rootfs: PathBuf,
    pub plan: Plan,
    pub prepared: Prepared,
}

/// Errors reading or writing a record; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("container with id exists: {0}")]
    Exists(String),
    #[error(transparent)]
    Io(#[from] IoAt),
    #[error("{path}: {msg}")]
    Corrupt { path: PathBuf, msg: String },
}

/// siloc's directory for container `id` under state root `root`.
pub fn dir(root: &Path, id: &str) -> PathBuf {
    root.join(".siloc").join("containers").join(id)
}

/// Takes the exclusive flock on directory `root` (created if missing), waiting for
/// it. Errors name the directory.
pub fn lock_root(root: &Path) -> Result<Lock, RecordError> {
    Ok(lock::lock_dir(root, Mode::Exclusive).map_err(io_at(root))?)
}

impl Record {
    /// What placement reads of this record.
    pub fn target(&self) -> Target<'_> {
        Target {
            id: &self.id,
            bundle: &self.bundle,
            rootfs: &self.rootfs,
            plan: &self.plan,
        }
    }

    /// Claims the id: creates the record's directory (failing if it exists, which is
    /// how two `create`s of one id are told apart) and writes the record.
    pub fn create_new(&self, root: &Path) -> Result<(), RecordError> {
        let _lock = lock_root(root)?;
        let d = dir(root, &self.id);
        if let Some(parent) = d.parent() {
            std::fs::create_dir_all(parent).map_err(io_at(parent))?;
        }
        match std::fs::create_dir(&d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(RecordError::Exists(self.id.clone()));
            }
            Err(e) => return Err(io_at(&d)(e).into()),
        }
        // Before anything else exists: a `delete` that sees the record sees the marker.
        let marker = d.join(CREATING);
        std::fs::write(
            &marker,
            creator_tag(std::process::id() as i32).unwrap_or_default(),
        )
        .map_err(io_at(&marker))?;
        self.save(root)
    }

    /// Writes the record atomically (temp file, then rename).
    pub fn save(&self, root: &Path) -> Result<(), RecordError> {
        let d = dir(root, &self.id);
        let path = d.join("record.json");
        let body = serde_json::to_vec_pretty(self).map_err(|e| RecordError::Corrupt {
            path: path.clone(),
            msg: e.to_string(),
        })?;
        Ok(write_atomic(&path, &body)?)
    }

    /// Reads container `id`'s record, `None` when there is none.
    pub fn load(root: &Path, id: &str) -> Result<Option<Record>, RecordError> {
        let path = dir(root, id).join("record.json");
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| RecordError::Corrupt {
                    path,
                    msg: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_at(&path)(e).into()),
        }
    }
}

/// The marker file of a `create` in progress: `<pid> <start time>` of the siloc
/// process that runs it. `create` removes it when it returns the container; a crashed
/// `create` leaves it behind with a dead pid.
const CREATING: &str = "creating";

/// `<pid> <start time>` of process `pid` (start time in clock ticks since boot, field
/// 22 of proc_pid_stat(5)), which tells a live process from a later one with its pid.
fn creator_tag(pid: i32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields after the
    // last ')' are fixed. Start time is the 20th of them.
    let after = &stat[stat.rfind(')')? + 1..];
    let start = after.split_whitespace().nth(19)?;
    Some(format!("{pid} {start}"))
}

/// Says `create` of container `id` has finished (its record stays).
pub fn creation_done(root: &Path, id: &str) {
    let _ = std::fs::remove_file(dir(root, id).join(CREATING));
}

/// The pid of the siloc process still creating container `id`, if one is alive.
pub fn creator(root: &Path, id: &str) -> Option<i32> {
    let tag = std::fs::read_to_string(dir(root, id).join(CREATING)).ok()?;
    let pid: i32 = tag.split_whitespace().next()?.parse().ok()?;
    (creator_tag(pid).as_deref() == Some(tag.trim())).then_some(pid)
}

/// The ids of the containers that have a record under `root` (none when the state
/// root does not exist).
pub fn list(root: &Path) -> Result<Vec<String>, RecordError> {
    let base = root.join(".siloc").join("containers");
    let rd = match std::fs::read_dir(&base) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_at(&base)(e).into()),
    };
    let mut ids = Vec::new();
    for e in rd {
        ids.push(
            e.map_err(io_at(&base))?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    ids.sort();
    Ok(ids)
}

/// Removes state root `root` when no container is left in it: siloc's empty
/// `.siloc/containers` and `.siloc` first, then the root itself. For a caller that made
/// the state root for its own runs (the scenario runner); best effort, a root still in
/// use stays.
pub fn remove_empty_root(root: &Path) {
    let base = root.join(".siloc");
    let _ = std::fs::remove_dir(base.join("containers"));
    let _ = std::fs::remove_dir(&base);
    let _ = std::fs::remove_dir(root);
}

/// Removes siloc's directory for container `id` (no error if it is gone).
pub fn remove(root: &Path, id: &str) -> Result<(), RecordError> {
    let _lock = lock_root(root)?;
    let d = dir(root, id);
    let r = match std::fs::remove_dir_all(&d) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_at(&d)(e).into()),
    };
    // `<root>/.siloc/containers` stays, as the state root itself does: removing and
    // making it again around every container cost two directory blocks, and on a state
    // root mounted with `discard` (ext4 here) each freed block is a synchronous discard.
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::plan::{RootfsPlan, UsernsPlan};

    #[test]
    fn a_dead_or_reused_pid_is_no_creator() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir(d.path(), "c")).unwrap();
        let marker = dir(d.path(), "c").join(CREATING);
        // pid 1 is alive, but not with this start time
        std::fs::write(&marker, "1 18446744073709551615").unwrap();
        assert_eq!(creator(d.path(), "c"), None);
        std::fs::write(&marker, "garbage").unwrap();
        assert_eq!(creator(d.path(), "c"), None);
        std::fs::write(&marker, creator_tag(1).unwrap()).unwrap();
        assert_eq!(creator(d.path(), "c"), Some(1));
    }

    #[test]
    fn create_save_load_remove() {
        let d = tempfile::tempdir().unwrap();
        let r = Record {
            id: "c1".into(),
            bundle: "/b".into(),
            rootfs: "/b/rootfs".into(),
            plan: Plan {
                userns: UsernsPlan::Auto { size: 10 },
                rootfs: RootfsPlan::IdmapBind,
                numa: Default::default(),
                io: Default::default(),
                volumes: Vec::new(),
            },
            prepared: Prepared::default(),
        };
        r.create_new(d.path()).unwrap();
        assert!(matches!(
            r.create_new(d.path()),
            Err(RecordError::Exists(_))
        ));
        let mut r2 = r.clone();
        r2.prepared.mount = Some(RootfsMount::IdmapBind);
        r2.save(d.path()).unwrap();
        assert_eq!(Record::load(d.path(), "c1").unwrap(), Some(r2));
        // the creating process (this one) is alive until creation is done
        assert_eq!(creator(d.path(), "c1"), Some(std::process::id() as i32));
        creation_done(d.path(), "c1");
        assert_eq!(creator(d.path(), "c1"), None);
        remove(d.path(), "c1").unwrap();
        remove(d.path(), "c1").unwrap();
        assert_eq!(Record::load(d.path(), "c1").unwrap(), None);
        // nothing of siloc's is left in the state root but the empty records dir
        let left: Vec<_> = walk(d.path());
        assert_eq!(left, [".siloc", ".siloc/containers"]);
    }

    fn walk(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(dir) = todo.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let rel = e.path().strip_prefix(root).unwrap().display().to_string();
                out.push(rel);
                if e.path().is_dir() {
                    todo.push(e.path());
                }
            }
        }
        out.sort();
        out
    }
}
