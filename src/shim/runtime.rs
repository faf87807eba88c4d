//! siloc's runc command line, as containerd's runc shim calls runc: global `--root`,
//! `--log FILE --log-format json` (the bundle's log.json), `--systemd-cgroup`; the
//! commands `create --bundle --pid-file [--console-socket] [--no-pivot]`, `start`,
//! `state`, `kill [--all]`, `delete [--force]`, `exec --process --detach --pid-file`,
//! `ps --format json`, `update --resources -`, `pause`, `resume`.
//!
//! A failed command's error is the message of the last `"level":"error"` line siloc
//! wrote to the log during that command (runc's convention, which containerd's runc
//! shim reads too), else its stderr.

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Result, ShimError};

/// How the shim reaches siloc for one container.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Siloc {
    /// The siloc binary (runtime option BinaryName; default `siloc` next to the shim,
    /// else on PATH).
    pub binary: PathBuf,
    /// siloc's state root: runtime option Root (default /run/containerd/siloc) joined
    /// with the containerd namespace, as the runc shim does.
    pub root: PathBuf,
    /// The log siloc writes JSON lines to (`<bundle>/log.json`).
    pub log: PathBuf,
    /// runtime option SystemdCgroup.
    pub systemd: bool,
    /// `--debug` for siloc (the shim runs with containerd's `-debug`).
    #[serde(default)]
    pub debug: bool,
}

/// The stdio a command's process gets; `None` is /dev/null (or a pipe the shim reads,
/// for commands whose output it parses).
#[derive(Default)]
pub struct ChildStdio {
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<OwnedFd>,
    pub stderr: Option<OwnedFd>,
}

impl Siloc {
    fn command(&self) -> Command {
        let mut c = Command::new(&self.binary);
        c.arg("--root")
            .arg(&self.root)
            .arg("--log")
            .arg(&self.log)
            .args(["--log-format", "json"]);
        if self.systemd {
            c.arg("--systemd-cgroup");
        }
        if self.debug {
            c.arg("--debug");
        }
        // siloc (and so the container) starts with an empty signal mask, not the
        // shim's, which blocks SIGPIPE (main.rs `block_sigpipe`); a mask survives
        // execve(2). pthread_sigmask is async-signal-safe (signal-safety(7)).
        // SAFETY: the closure only calls pthread_sigmask, safe between fork and exec.
        unsafe {
            c.pre_exec(|| {
                nix::sys::signal::pthread_sigmask(
                    nix::sys::signal::SigmaskHow::SIG_SETMASK,
                    Some(&nix::sys::signal::SigSet::empty()),
                    None,
                )
                .map_err(std::io::Error::from)
            });
        }
        c
    }

    /// Runs `siloc <global flags> ARGS`, its stdin fed `input`; returns its stdout.
    ///
    /// Errors: [`ShimError::SilocMissing`] when it cannot start, [`ShimError::Siloc`]
    /// with siloc's own message when it exits non-zero.
    pub fn run(&self, args: &[OsString], input: Option<&[u8]>) -> Result<Vec<u8>> {
        self.run_with(args, input, None)
    }

    /// As [`Siloc::run`]; with `stdio`, the process gets those fds instead of pipes
    /// (create and exec: they become the container process's stdio) and its output is
    /// not read.
    pub fn run_with(
        &self,
        args: &[OsString],
        input: Option<&[u8]>,
        stdio: Option<ChildStdio>,
    ) -> Result<Vec<u8>> {
        let name = args
            .first()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_default();
        let log_start = std::fs::metadata(&self.log).map_or(0, |m| m.len());
        let mut cmd = self.command();
        cmd.args(args);
        let piped = stdio.is_none();
        match stdio {
            Some(s) => {
                let f = |fd: Option<OwnedFd>| fd.map_or_else(Stdio::null, Stdio::from);
                cmd.stdin(f(s.stdin))
                    .stdout(f(s.stdout))
                    .stderr(f(s.stderr));
            }
            None => {
                cmd.stdin(if input.is_some() {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            }
        }
        crate::exits::start();
        let mut child = cmd.spawn().map_err(|source| ShimError::SilocMissing {
            path: self.binary.clone(),
            source,
        })?;
        // The container may have inherited our copies through `cmd`: drop them now.
        drop(cmd);
        let pid = child.id() as i32;
        if let (Some(mut w), Some(data)) = (child.stdin.take(), input) {
            let _ = w.write_all(data);
        }
        let reader = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut buf);
                }
                buf
            })
        };
        let out = reader(
            child
                .stdout
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let err = reader(
            child
                .stderr
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let status = crate::exits::wait(pid);
        let out = out.join().unwrap_or_default();
        let err = err.join().unwrap_or_default();
        let lines = log_lines(&self.log, log_start);
        // siloc's warnings (an io.siloc.io.weight the device cannot take, ...) reach
        // containerd's log only through ours: containerd reads siloc's log on failure.
        for msg in messages(&lines, "warning") {
            log::warn!("siloc {name}: {msg}");
        }
        if status != 0 {
            if log::log_enabled!(log::Level::Debug)
                && let Ok(text) = std::fs::read(&self.log)
            {
                let from = (log_start as usize).min(text.len());
                log::debug!(
                    "siloc {name} log: {}",
                    String::from_utf8_lossy(&text[from..])
                );
            }
            let msg = messages(&lines, "error").next_back().unwrap_or_else(|| {
                let e = String::from_utf8_lossy(&err).trim().to_string();
                if e.is_empty() && !piped {
                    "no error in siloc's log".to_string()
                } else {
                    e
                }
            });
            return Err(ShimError::Siloc {
                cmd: name,
                status,
                msg,
            });
        }
        Ok(out)
    }

    /// `siloc state ID` as JSON.
    pub fn state(&self, id: &str) -> Result<serde_json::Value> {
        let out = self.run(&["state".into(), id.into()], None)?;
        serde_json::from_slice(&out).map_err(|e| ShimError::Siloc {
            cmd: "state".into(),
            status: 0,
            msg: format!("unreadable output: {e}"),
        })
    }

    /// `siloc delete [--force] ID`.
    pub fn delete(&self, id: &str, force: bool) -> Result<()> {
        let mut a: Vec<OsString> = vec!["delete".into()];
        if force {
            a.push("--force".into());
        }
        a.push(id.into());
        self.run(&a, None).map(|_| ())
    }

    /// `siloc ps --format json ID`: the container's pids.
    pub fn ps(&self, id: &str) -> Result<Vec<u32>> {
        let out = self.run(
            &["ps".into(), "--format".into(), "json".into(), id.into()],
            None,
        )?;
        serde_json::from_slice::<Option<Vec<u32>>>(&out)
            .map(Option::unwrap_or_default)
            .map_err(|e| ShimError::Siloc {
                cmd: "ps".into(),
                status: 0,
                msg: format!("unreadable output: {e}"),
            })
    }
}

/// The JSON lines siloc appended to `log` after byte `from` (none when it cannot be
/// read).
fn log_lines(log: &Path, from: u64) -> Vec<serde_json::Value> {
    let mut text = String::new();
    let read = std::fs::File::open(log).and_then(|mut f| {
        f.seek(SeekFrom::Start(from))?;
        f.read_to_string(&mut text)
    });
    if read.is_err() {
        return Vec::new();
    }
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The messages of `lines` at `level` (runc's words: `error`, `warning`), in order.
fn messages<'a>(
    lines: &'a [serde_json::Value],
    level: &'a str,
) -> impl DoubleEndedIterator<Item = String> + 'a {
    lines
        .iter()
        .filter(move |v| v["level"] == level)
        .filter_map(|v| v["msg"].as_str().map(str::to_string))
}

/// The siloc binary: `name` if it has a `/`, else `name` next to the shim's own binary,
/// else on PATH.
pub fn find_binary(name: &str) -> PathBuf {
    if name.contains('/') {
        return PathBuf::from(name);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        let p = dir.join(name);
        if p.is_file() {
            return p;
        }
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Writes `data` to `path` (mode 0600: config.json holds the process's environment)
/// through a temp file and rename (readers never see half).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    siloc::sys::fs::write_atomic_mode(path, data, 0o600).map_err(|e| ShimError::Io {
        path: e.path,
        source: e.source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_is_the_last_error_line_after_the_start() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log.json");
        std::fs::write(&log, "{\"level\":\"error\",\"msg\":\"old\"}\n").unwrap();
        let start = std::fs::metadata(&log).unwrap().len();
        let last = |l: &[serde_json::Value]| messages(l, "error").next_back();
        assert_eq!(last(&log_lines(&log, start)), None);
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        writeln!(f, "{{\"level\":\"info\",\"msg\":\"x\"}}").unwrap();
        writeln!(f, "{{\"level\":\"warning\",\"msg\":\"w1\"}}").unwrap();
        writeln!(f, "not json").unwrap();
        writeln!(f, "{{\"level\":\"error\",\"msg\":\"new\"}}").unwrap();
        writeln!(f, "{{\"level\":\"warning\",\"msg\":\"w2\"}}").unwrap();
        let lines = log_lines(&log, start);
        assert_eq!(last(&lines).as_deref(), Some("new"));
        // the warnings the shim passes on to containerd's log, in order
        let w: Vec<String> = messages(&lines, "warning").collect();
        assert_eq!(w, ["w1", "w2"]);
        assert!(log_lines(&d.path().join("none"), 0).is_empty());
    }
}
