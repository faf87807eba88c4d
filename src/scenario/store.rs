//! The results of a run in its output directory: `run.json` (the scenario as run,
//! the host, the runtimes skipped) and `results.jsonl` (one cell per line, appended
//! and synced as each cell finishes, so a crash loses at most the cell in progress
//! and `--resume` continues from the lines present).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cell::{CellKey, CellResult};
use super::file::Scenario;
use super::host::HostFacts;

/// File names inside the output directory.
pub const RUN_FILE: &str = "run.json";
pub const RESULTS_FILE: &str = "results.jsonl";

/// Errors reading or writing the output directory; each names the file (and line).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Io(#[from] crate::sys::fs::IoAt),
    #[error("{path}: line {line}: {msg}")]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{path}: no {RUN_FILE}: not the output directory of a scenario run")]
    NotARun { path: PathBuf },
}

/// A runtime the run did not measure, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    pub name: String,
    pub note: String,
}

/// `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMeta {
    pub siloc_version: String,
    /// RFC 3339, when the output directory was started.
    pub started: String,
    pub scenario: Scenario,
    pub host: HostFacts,
    pub skipped: Vec<Skipped>,
}

/// The output directory of one run.
pub struct Store {
    pub dir: PathBuf,
}

impl Store {
    pub fn new(dir: &Path) -> Store {
        Store {
            dir: dir.to_path_buf(),
        }
    }

    pub fn results_path(&self) -> PathBuf {
        self.dir.join(RESULTS_FILE)
    }

    /// Reads `run.json`. Errors: [`StoreError::NotARun`] when it is missing.
    pub fn meta(&self) -> Result<RunMeta, StoreError> {
        let p = self.dir.join(RUN_FILE);
        if !p.exists() {
            return Err(StoreError::NotARun {
                path: self.dir.clone(),
            });
        }
        let text = std::fs::read_to_string(&p).map_err(crate::sys::fs::io_at(&p))?;
        serde_json::from_str(&text).map_err(|e| StoreError::Parse {
            path: p.clone(),
            line: e.line(),
            msg: e.to_string(),
        })
    }

    /// Writes `run.json` (through a temporary file and a rename).
    pub fn write_meta(&self, meta: &RunMeta) -> Result<(), StoreError> {
        std::fs::create_dir_all(&self.dir).map_err(crate::sys::fs::io_at(&self.dir))?;
        let p = self.dir.join(RUN_FILE);
        let text = serde_json::to_string_pretty(meta).unwrap_or_default();
        Ok(crate::sys::fs::write_atomic(&p, text.as_bytes())?)
    }

    /// Every cell in `results.jsonl`, in file order. A last line cut short by a crash
    /// is ignored; any other bad line is an error naming it.
    pub fn cells(&self) -> Result<Vec<CellResult>, StoreError> {
        let p = self.results_path();
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(crate::sys::fs::io_at(&p)(e).into()),
        };
        let complete = text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        let mut cells = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<CellResult>(line) {
                Ok(c) => cells.push(c),
                Err(_) if i + 1 == lines.len() && !complete => {}
                Err(e) => {
                    return Err(StoreError::Parse {
                        path: p.clone(),
                        line: i + 1,
                        msg: e.to_string(),
                    });
                }
            }
        }
        Ok(cells)
    }

    /// Appends one cell and syncs the file.
    pub fn append(&self, cell: &CellResult) -> Result<(), StoreError> {
        let p = self.results_path();
        // A line cut short by a crash would glue onto this one: cut it off first.
        if let Ok(bytes) = std::fs::read(&p)
            && !bytes.is_empty()
            && !bytes.ends_with(b"\n")
        {
            let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(crate::sys::fs::io_at(&p))?;
            f.set_len(keep as u64).map_err(crate::sys::fs::io_at(&p))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map_err(crate::sys::fs::io_at(&p))?;
        let mut line = serde_json::to_string(cell).unwrap_or_default();
        line.push('\n');
        f.write_all(line.as_bytes())
            .map_err(crate::sys::fs::io_at(&p))?;
        Ok(f.sync_data().map_err(crate::sys::fs::io_at(&p))?)
    }

    /// Keys of the cells that finished without error: `--resume` skips these.
    pub fn done(&self) -> Result<Vec<CellKey>, StoreError> {
        Ok(self
            .cells()?
            .into_iter()
            .filter(|c| c.error.is_none())
            .map(|c| c.key)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(rep: u32, error: Option<&str>) -> CellResult {
        CellResult {
            key: CellKey {
                runtime: "runc".into(),
                workload: "randrw".into(),
                neighbour_size: 1 << 30,
                repetition: rep,
            },
            started: "2026-11-30T00:00:00Z".into(),
            seconds: 1.0,
            baseline: None,
            noise: None,
            alone: None,
            idle: None,
            error: error.map(str::to_string),
        }
    }

    #[test]
    fn append_resume_and_torn_lines() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::new(t.path());
        assert!(s.cells().unwrap().is_empty());
        s.append(&cell(1, None)).unwrap();
        s.append(&cell(2, Some("runc: run failed"))).unwrap();
        assert_eq!(s.cells().unwrap().len(), 2);
        assert_eq!(s.done().unwrap(), vec![cell(1, None).key]);
        // A crash in the middle of a line: ignored, and the next append starts afresh.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(s.results_path())
            .unwrap();
        f.write_all(b"{\"key\":{\"runt").unwrap();
        assert_eq!(s.cells().unwrap().len(), 2);
        s.append(&cell(3, None)).unwrap();
        assert_eq!(s.cells().unwrap().len(), 3);
        // A bad line in the middle is an error that names it.
        std::fs::write(s.results_path(), "junk\n{}\n").unwrap();
        let e = s.cells().unwrap_err().to_string();
        assert!(e.contains("results.jsonl: line 1"), "{e}");
    }

    #[test]
    fn missing_run_file_is_named() {
        let t = tempfile::tempdir().unwrap();
        let e = Store::new(t.path()).meta().unwrap_err();
        assert!(matches!(e, StoreError::NotARun { .. }));
    }
}
