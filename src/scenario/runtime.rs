//! Runtimes under test, driven through runc's command line with long flags only
//! (`run --detach`, `delete --force`: runsc rejects the short forms). Each gets a
//! private state root, so everything in it is the runner's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::file::{RuntimeEntry, RuntimeKind};
use super::image::which;

/// Errors driving a runtime; each names the runtime, the command and the container.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{runtime}: {command} {id}: {msg}")]
    Command {
        runtime: String,
        command: String,
        id: String,
        msg: String,
    },
    #[error("{runtime}: {command} {id}: no answer within {secs} s")]
    Timeout {
        runtime: String,
        command: String,
        id: String,
        secs: u64,
    },
}

/// A runtime ready to be driven.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub entry: RuntimeEntry,
    pub bin: PathBuf,
    /// Private `--root` for this runtime's containers.
    pub state_root: PathBuf,
    /// siloc's `--config`, written by the runner.
    pub config: Option<PathBuf>,
}

/// Where a scenario entry stands on this host.
#[derive(Debug, Clone)]
pub enum Resolved {
    Ready(Runtime),
    /// Not installed or not usable; the note says why, for the report.
    Skipped {
        name: String,
        note: String,
    },
}

/// Finds the entry's binary: its `path`, else the kind's default (siloc: `self_exe`).
pub fn resolve(entry: &RuntimeEntry, self_exe: &Path, state_base: &Path) -> Resolved {
    let bin = match (&entry.path, entry.kind) {
        (Some(p), _) => which(&p.to_string_lossy()),
        (None, RuntimeKind::Siloc) => Some(self_exe.to_path_buf()),
        (None, k) => which(k.default_binary()),
    };
    match bin {
        Some(bin) => Resolved::Ready(Runtime {
            entry: entry.clone(),
            bin,
            state_root: state_base.join(&entry.name),
            config: None,
        }),
        None => Resolved::Skipped {
            name: entry.name.clone(),
            note: format!(
                "not installed (no {} on PATH)",
                entry
                    .path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| entry.kind.default_binary().to_string())
            ),
        },
    }
}

impl Runtime {
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    /// `BIN [args] --root R [--config C] <rest>`, in its own process group (a Ctrl-C
    /// at the terminal reaches the runner, which then cleans up, not the runtime).
    pub fn command(&self, rest: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(&self.entry.args).arg("--root").arg(&self.state_root);
        if let Some(cfg) = &self.config {
            c.arg("--config").arg(cfg);
        }
        c.args(rest).stdin(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        c
    }

    fn fail(&self, command: &str, id: &str, msg: String) -> RuntimeError {
        RuntimeError::Command {
            runtime: self.entry.name.clone(),
            command: command.to_string(),
            id: id.to_string(),
            msg,
        }
    }

    /// `run --detach --bundle B ID`; the container's stdio and the runtime's own
    /// messages go to `log`. Errors carry the log's last lines.
    pub fn run_detached(&self, bundle: &Path, id: &str, log: &Path) -> Result<(), RuntimeError> {
        std::fs::create_dir_all(&self.state_root).map_err(|e| {
            self.fail(
                "run",
                id,
                format!("state root {}: {e}", self.state_root.display()),
            )
        })?;
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| self.fail("run", id, format!("{}: {e}", log.display())))
        };
        let mut c = self.command(&["run", "--detach", "--bundle", &bundle.to_string_lossy(), id]);
        c.stdout(open()?).stderr(open()?);
        let status = wait(c, Duration::from_secs(120)).map_err(|e| self.map(e, "run", id))?;
        if !status.status.success() {
            let tail = tail(log, 5);
            return Err(self.fail("run --detach", id, format!("{}: {tail}", status.status)));
        }
        Ok(())
    }

    /// The container's status from `state ID` (`created`, `running`, `stopped`, ...);
    /// `None` when the runtime does not know the container.
    pub fn status(&self, id: &str) -> Result<Option<String>, RuntimeError> {
        Ok(self
            .state(id)?
            .and_then(|v| v["status"].as_str().map(str::to_string)))
    }

    /// `state ID` as JSON; `None` when the runtime does not know the container.
    pub fn state(&self, id: &str) -> Result<Option<serde_json::Value>, RuntimeError> {
        let mut c = self.command(&["state", id]);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = wait(c, Duration::from_secs(30)).map_err(|e| self.map(e, "state", id))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("does not exist")
                || err.contains("not found")
                || err.contains("No such")
            {
                return Ok(None);
            }
            return Err(self.fail("state", id, err.trim().to_string()));
        }
        serde_json::from_slice(&out.stdout)
            .map(Some)
            .map_err(|e| self.fail("state", id, format!("not JSON: {e}")))
    }

    /// `delete --force ID`. Errors: the runtime's message.
    pub fn delete(&self, id: &str) -> Result<(), RuntimeError> {
        let mut c = self.command(&["delete", "--force", id]);
        c.stdout(Stdio::null()).stderr(Stdio::piped());
        let out = wait(c, Duration::from_secs(60)).map_err(|e| self.map(e, "delete", id))?;
        if !out.status.success() {
            return Err(self.fail(
                "delete --force",
                id,
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
        Ok(())
    }

    fn map(&self, e: WaitError, command: &str, id: &str) -> RuntimeError {
        match e {
            WaitError::Spawn(e) => self.fail(command, id, format!("{}: {e}", self.bin.display())),
            WaitError::Timeout(secs) => RuntimeError::Timeout {
                runtime: self.entry.name.clone(),
                command: command.to_string(),
                id: id.to_string(),
                secs,
            },
        }
    }
}

enum WaitError {
    Spawn(std::io::Error),
    Timeout(u64),
}

/// Runs `c` to completion within `limit`, killing it past that. Output is collected
/// from pipes the caller set (small: state JSON, error lines).
fn wait(mut c: Command, limit: Duration) -> Result<Output, WaitError> {
    let mut child = c.spawn().map_err(WaitError::Spawn)?;
    let end = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return child.wait_with_output().map_err(WaitError::Spawn),
            Ok(None) if Instant::now() >= end => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(WaitError::Timeout(limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(WaitError::Spawn(e)),
        }
    }
}

/// The last `n` non-empty lines of a log file, joined, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: RuntimeKind, path: Option<&str>) -> RuntimeEntry {
        RuntimeEntry {
            name: "x".into(),
            kind,
            path: path.map(PathBuf::from),
            args: vec!["--network=none".into()],
            policy: false,
            victim_class: None,
            neighbour_class: None,
        }
    }

    #[test]
    fn missing_runtimes_are_skipped_with_a_note() {
        let r = resolve(
            &entry(RuntimeKind::Runc, Some("no-such-runtime-siloc")),
            Path::new("/x"),
            Path::new("/run/s"),
        );
        match r {
            Resolved::Skipped { note, .. } => {
                assert!(note.contains("no-such-runtime-siloc"), "{note}")
            }
            Resolved::Ready(_) => panic!("resolved a missing runtime"),
        }
    }

    #[test]
    fn siloc_is_this_binary_and_commands_use_long_flags() {
        let Resolved::Ready(mut rt) = resolve(
            &entry(RuntimeKind::Siloc, None),
            Path::new("/usr/bin/true"),
            Path::new("/run/s"),
        ) else {
            panic!("siloc not resolved");
        };
        assert_eq!(rt.bin, PathBuf::from("/usr/bin/true"));
        assert_eq!(rt.state_root, PathBuf::from("/run/s/x"));
        rt.config = Some(PathBuf::from("/tmp/c.toml"));
        let c = rt.command(&["delete", "--force", "id1"]);
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--network=none",
                "--root",
                "/run/s/x",
                "--config",
                "/tmp/c.toml",
                "delete",
                "--force",
                "id1"
            ]
        );
    }

    #[test]
    fn tail_joins_last_lines() {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), "a\n\nb\nc\n").unwrap();
        assert_eq!(tail(f.path(), 2), "b | c");
    }
}
