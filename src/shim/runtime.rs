//! siloc's runc command line, as containerd's runc shim calls runc: global `--root`,
//! `--log FILE --log-format json` (the bundle's log.json), `--systemd-cgroup`; the
//! commands `create --bundle --pid-file [--console-socket] [--no-pivot]`, `start`,
//! `state`, `kill [--all]`, `delete [--force]`, `exec --process --detach --pid-file`,
//! `ps --format json`, `update --resources -`, `pause`, `resume`.
//!
//! A failed command's error is the message of the last `"level":"error"` line siloc
//! wrote to its log (runc's convention, which containerd's runc shim reads too), else
//! its stderr. Each command logs to a file of its own ([`CallLog`]) whose lines are
//! then appended to the bundle's log.json, so two commands for one container that
//! overlap (a `state` during an `exec`, two exec probes) never take each other's error
//! or warnings, as a byte window of the shared log.json could.

use std::ffi::OsString;
use std::io::{Read, Write};
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
    fn command(&self, log: &Path) -> Command {
        let mut c = Command::new(&self.binary);
        c.arg("--root")
            .arg(&self.root)
            .arg("--log")
            .arg(log)
            .args(["--log-format", "json"]);
        if self.systemd {
            c.arg("--systemd-cgroup");
        }
        if self.debug {
            c.arg("--debug");
        }
        // The shim's own cwd is the bundle containerd started it in, the sandbox's,
        // which containerd removes with the sandbox's task while the pod's app
        // containers live on; libcontainer's exec reads its cwd (getcwd(3)) and
        // failed there with "failed to get cwd". Every path given is absolute.
        c.current_dir("/");
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
        let call_log = CallLog::new(&self.log);
        let mut cmd = self.command(&call_log.path);
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
        let text = call_log.finish(&self.log);
        let lines = log_lines(&text);
        // siloc's warnings (an io.siloc.io.weight the device cannot take, ...) reach
        // containerd's log only through ours: containerd reads siloc's log on failure.
        for msg in messages(&lines, "warning") {
            log::warn!("siloc {name}: {msg}");
        }
        if status != 0 {
            log::debug!("siloc {name} log: {}", String::from_utf8_lossy(&text));
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

/// The log file of one siloc command: `.log.json.<shim pid>.<n>` beside the bundle's
/// log.json. A process that outlives the command (a created container's init before
/// `start`, a detached exec's process before its execve) can still write to the file
/// after [`CallLog::finish`] removed it; those lines are lost, as runc's are (runc's
/// init closes its log pipe before it waits for `start` or execs).
struct CallLog {
    path: PathBuf,
}

impl CallLog {
    fn new(log: &Path) -> CallLog {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = log.file_name().map(|f| f.to_string_lossy().into_owned());
        let name = format!(
            ".{}.{}.{n}",
            name.as_deref().unwrap_or("log.json"),
            std::process::id()
        );
        let path = log.with_file_name(name);
        // Empty, not a file a crashed shim with this pid left: siloc appends to it.
        let _ = std::fs::File::create(&path);
        CallLog { path }
    }

    /// What the command logged (empty when it logged nothing), appended to `log` in
    /// one write (O_APPEND: lines of commands finishing together do not interleave;
    /// a last line cut short gets its newline); the file is removed. `log` is created
    /// even when empty, as siloc's `--log` would.
    fn finish(self, log: &Path) -> Vec<u8> {
        let mut text = std::fs::read(&self.path).unwrap_or_default();
        if text.last().is_some_and(|&b| b != b'\n') {
            text.push(b'\n');
        }
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(&text));
        if let Err(e) = appended
            && log.parent().is_some_and(Path::exists)
        {
            log::warn!("{}: {e}", log.display());
        }
        text
    }
}

impl Drop for CallLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The JSON lines of a log text (lines that are not JSON are skipped).
fn log_lines(text: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(text)
        .lines()
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
    fn a_call_log_is_read_appended_to_the_bundle_log_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("log.json");
        std::fs::write(&log, "{\"level\":\"error\",\"msg\":\"old\"}\n").unwrap();
        let (a, b) = (CallLog::new(&log), CallLog::new(&log));
        assert_ne!(a.path, b.path, "two calls, two files");
        assert_eq!(a.path.parent(), Some(d.path()));
        assert_eq!(std::fs::read(&a.path).unwrap(), b"", "made empty at once");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&a.path)
            .unwrap();
        writeln!(f, "{{\"level\":\"info\",\"msg\":\"x\"}}").unwrap();
        writeln!(f, "{{\"level\":\"warning\",\"msg\":\"w1\"}}").unwrap();
        writeln!(f, "not json").unwrap();
        writeln!(f, "{{\"level\":\"error\",\"msg\":\"new\"}}").unwrap();
        write!(f, "{{\"level\":\"warning\",\"msg\":\"w2\"}}").unwrap();
        let path = a.path.clone();
        let lines = log_lines(&a.finish(&log));
        // this call's error only, not the older one in log.json
        assert_eq!(messages(&lines, "error").collect::<Vec<_>>(), ["new"]);
        // the warnings the shim passes on to containerd's log, in order
        let w: Vec<String> = messages(&lines, "warning").collect();
        assert_eq!(w, ["w1", "w2"]);
        assert!(!path.exists(), "the call's file is removed");
        let all = std::fs::read_to_string(&log).unwrap();
        assert!(all.starts_with("{\"level\":\"error\",\"msg\":\"old\"}\n{\"level\":\"info\""));
        assert!(all.ends_with("\"w2\"}\n"));
        // a call that logged nothing: nothing read, log.json unchanged
        assert!(b.finish(&log).is_empty());
        assert_eq!(std::fs::read_to_string(&log).unwrap(), all);
    }
}
