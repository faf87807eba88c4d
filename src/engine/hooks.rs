//! OCI hooks as runc runs and reports them.
//!
//! libcontainer gap covered: libcontainer 0.7 runs the spec's hooks itself and reports
//! a failure without naming the hook ("failed hooks hook command exited with non-zero
//! exit code: 3", or "failed to run hooks" for createContainer), throws the hook's
//! output away, and runs createContainer hooks in whatever directory its init is in.
//! runc names the failing hook by kind and position (runc 1.2+: `error running
//! prestart hook #1: ...`; runc 1.1.5 says `error running hook #1: ...`), quotes its
//! exit status, stdout and stderr (`error running hook: exit status 3, stdout: ,
//! stderr: ...`), and runs createContainer hooks with the container's rootfs as their
//! working directory (runtime-spec "createContainer Hooks"; runc's prepareRootfs
//! changes into the rootfs before it runs them).
//!
//! siloc hands libcontainer each prestart, createRuntime, createContainer and
//! poststart hook wrapped: the hook
//! becomes `/proc/self/exe` (the siloc binary the hook's parent, a siloc process or a
//! clone of one, runs from; reachable in any mount namespace) with [`WRAPPER_ARG`],
//! and [`wrapper_main`] runs the real hook with the path, argv, environment and stdin
//! libcontainer gave, captures its output, applies its timeout, and on failure writes
//! runc's message where siloc reads it back: an inherited file descriptor for the
//! hooks `create` runs ([`Report::Fd`], so a hook in the container's user namespace can
//! write it too), and a file in siloc's record for poststart (`start` runs those, as
//! host root). startContainer hooks run after pivot_root, where siloc's binary cannot
//! be executed (execve(2) of `/proc/self/exe`, or of a memfd copy, fails with ENOENT:
//! siloc is dynamically linked, and its ELF interpreter `/lib64/ld-linux-x86-64.so.2`
//! and libraries are looked up in the container's root), so they are not wrapped but
//! taken out of libcontainer's spec ([`take_start_container`]) and run by siloc's init
//! executor ([`StartContainer`], code already in the init's memory) right before it
//! execs the program, where runc's init runs them. poststop hooks are left alone (runc
//! only warns about them). Delete this module when libcontainer reports hooks as runc
//! does.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_spec::runtime::{Hook, Spec};

/// `argv[1]` of a wrapped hook: siloc's `main` hands the rest to [`wrapper_main`].
pub const WRAPPER_ARG: &str = "__siloc-hook";

/// Errors while preparing the hooks' report channel.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("hook report: {step}: {errno}")]
    Report {
        step: &'static str,
        errno: nix::Error,
    },
}

/// Where a wrapped hook writes runc's message when it fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// A file descriptor inherited from `create` (libcontainer marks it close-on-exec
    /// before the container's program runs, so it never reaches the container).
    Fd(RawFd),
    /// A file on the host (poststart hooks run in `start`, as host root).
    Path(PathBuf),
    /// The hook's stderr (when there is no other channel).
    Stderr,
}

impl Report {
    fn encode(&self) -> String {
        match self {
            Report::Fd(fd) => format!("fd:{fd}"),
            Report::Path(p) => format!("path:{}", p.display()),
            Report::Stderr => "-".to_string(),
        }
    }

    fn decode(s: &str) -> Report {
        if let Some(fd) = s.strip_prefix("fd:").and_then(|f| f.parse().ok()) {
            Report::Fd(fd)
        } else if let Some(p) = s.strip_prefix("path:") {
            Report::Path(PathBuf::from(p))
        } else {
            Report::Stderr
        }
    }
}

/// The memfd `create`'s wrapped hooks report into: not close-on-exec, at a number
/// above the caller's preserved fds (`3 + preserve_fds`), so libcontainer's
/// close-on-exec sweep in the init (which spares only stdio and the preserved fds)
/// keeps it from the container's program.
pub struct CreateReport {
    file: File,
}

impl CreateReport {
    /// Errors: [`HookError::Report`] naming memfd_create or F_DUPFD.
    pub fn new(preserve_fds: i32) -> Result<CreateReport, HookError> {
        let err = |step| move |errno| HookError::Report { step, errno };
        let memfd = nix::sys::memfd::memfd_create(
            c"siloc-hook-report",
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        )
        .map_err(err("memfd_create"))?;
        let min = 3 + preserve_fds.max(0);
        // F_DUPFD (not _CLOEXEC): the copy is inherited by the hooks.
        let fd = nix::fcntl::fcntl(memfd.as_raw_fd(), nix::fcntl::F_DUPFD(min))
            .map_err(err("F_DUPFD"))?;
        // SAFETY: the kernel just returned this fd; nothing else owns it.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(CreateReport { file })
    }

    /// What the hooks get to write to.
    pub fn report(&self) -> Report {
        Report::Fd(self.file.as_raw_fd())
    }

    /// The first failing hook's message, if one wrote it.
    pub fn take(mut self) -> Option<String> {
        let mut s = String::new();
        self.file.rewind().ok()?;
        self.file.read_to_string(&mut s).ok()?;
        let s = s.trim_end().to_string();
        (!s.is_empty()).then_some(s)
    }
}

/// The poststart report file in the container's record directory `dir`.
pub fn poststart_report(dir: &Path) -> PathBuf {
    dir.join("poststart-hook-error")
}

/// Reads and removes a [`Report::Path`] file; `None` when no hook wrote one.
pub fn take_path(path: &Path) -> Option<String> {
    let s = std::fs::read_to_string(path).ok();
    let _ = std::fs::remove_file(path);
    s.map(|s| s.trim_end().to_string())
        .filter(|s| !s.is_empty())
}

/// Wraps the spec's prestart, createRuntime, createContainer and poststart hooks for [`wrapper_main`]: createContainer hooks run in `rootfs`; `create` names where the
/// create-time hooks report, `poststart` the poststart report file. A hook's timeout
/// moves into the wrapper (libcontainer's would kill only the wrapper).
pub fn wrap(spec: &mut Spec, rootfs: &Path, create: &Report, poststart: &Path) {
    let Some(mut hooks) = spec.hooks().clone() else {
        return;
    };
    let each = |list: &mut Option<Vec<Hook>>, kind: &str, report: &Report, cwd: &str| {
        for (i, h) in list.iter_mut().flatten().enumerate() {
            *h = wrapped(h, kind, i, report, cwd);
        }
    };
    let root = rootfs.to_string_lossy();
    each(hooks.prestart_mut(), "prestart", create, "");
    each(hooks.create_runtime_mut(), "createRuntime", create, "");
    each(
        hooks.create_container_mut(),
        "createContainer",
        create,
        &root,
    );
    each(
        hooks.poststart_mut(),
        "poststart",
        &Report::Path(poststart.to_path_buf()),
        "",
    );
    spec.set_hooks(Some(hooks));
}

/// Makes the wrapped prestart and createRuntime hooks return to the runtime's own
/// namespaces before they run (runtime-spec config.md "Hooks": both run in the runtime
/// namespace), when siloc's create process has entered some of the container's
/// ([`crate::engine::outer_namespaces`]): `own` lists (`/proc/PID/ns` name, fd) of
/// create's own namespaces; the wrapper, a child of create, opens
/// `/proc/<parent>/fd/<fd>` and setns(2)s into each. Call after [`wrap`].
pub fn runtime_namespaces(spec: &mut Spec, own: &[(&str, RawFd)]) {
    if own.is_empty() {
        return;
    }
    let Some(mut hooks) = spec.hooks().clone() else {
        return;
    };
    let list = own
        .iter()
        .map(|(n, fd)| format!("{n}:{fd}"))
        .collect::<Vec<_>>()
        .join(",");
    let add = |l: &mut Option<Vec<Hook>>| {
        for h in l.iter_mut().flatten() {
            if let Some(mut a) = h.args().clone()
                && a.get(1).map(String::as_str) == Some(WRAPPER_ARG)
                && let Some(r) = a.get_mut(4)
            {
                *r = format!("{r}{NS_SEP}{list}");
                h.set_args(Some(a));
            }
        }
    };
    add(hooks.prestart_mut());
    add(hooks.create_runtime_mut());
    spec.set_hooks(Some(hooks));
}

/// Separates the report from the runtime namespaces in a wrapper's report argument.
const NS_SEP: &str = ";ns=";

/// Enters the runtime namespaces `list` (`net:FD,ipc:FD`, fds of the parent).
fn enter_runtime_namespaces(list: &str) -> Result<(), String> {
    let parent = nix::unistd::getppid();
    for item in list.split(',').filter(|s| !s.is_empty()) {
        let (name, fd) = item
            .split_once(':')
            .ok_or_else(|| format!("malformed runtime namespace {item:?}"))?;
        let flag = match name {
            "net" => nix::sched::CloneFlags::CLONE_NEWNET,
            "ipc" => nix::sched::CloneFlags::CLONE_NEWIPC,
            "uts" => nix::sched::CloneFlags::CLONE_NEWUTS,
            "cgroup" => nix::sched::CloneFlags::CLONE_NEWCGROUP,
            _ => return Err(format!("unknown runtime namespace {name:?}")),
        };
        let p = format!("/proc/{parent}/fd/{fd}");
        let f = File::open(&p).map_err(|e| format!("runtime {name} namespace {p}: {e}"))?;
        nix::sched::setns(f, flag).map_err(|e| format!("enter runtime {name} namespace: {e}"))?;
    }
    Ok(())
}

/// Whether the spec has a hook that reports through `create`'s [`CreateReport`].
pub fn has_create_hooks(spec: &Spec) -> bool {
    spec.hooks().as_ref().is_some_and(|h| {
        [h.prestart(), h.create_runtime(), h.create_container()]
            .iter()
            .any(|l| l.as_ref().is_some_and(|l| !l.is_empty()))
    })
}

fn wrapped(h: &Hook, kind: &str, index: usize, report: &Report, cwd: &str) -> Hook {
    let path = h.path().to_string_lossy().to_string();
    let mut args = vec![
        "siloc-hook".to_string(),
        WRAPPER_ARG.to_string(),
        kind.to_string(),
        index.to_string(),
        report.encode(),
        cwd.to_string(),
        h.timeout().map(|t| t.to_string()).unwrap_or_default(),
        "--".to_string(),
        path.clone(),
    ];
    match h.args() {
        Some(a) if !a.is_empty() => args.extend(a.iter().cloned()),
        _ => args.push(path),
    }
    let mut w = h.clone();
    w.set_path(PathBuf::from("/proc/self/exe"));
    w.set_args(Some(args));
    w.set_timeout(None);
    w
}

/// What went wrong with one hook, in runc's words (runc's configs.Command.Run).
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    Spawn(String),
    Status {
        how: String,
        out: String,
        err: String,
    },
    Timeout(i64),
    Chdir(String),
}

fn message(kind: &str, index: &str, path: &str, f: &Failure) -> String {
    let detail = match f {
        Failure::Spawn(e) => format!("fork/exec {path}: {e}"),
        Failure::Status { how, out, err } => format!(
            "error running hook: {how}, stdout: {}, stderr: {}",
            out.trim_end(),
            err.trim_end()
        ),
        Failure::Timeout(t) => format!("hook ran past specified timeout of {t}.0s"),
        Failure::Chdir(e) => e.clone(),
    };
    format!("error running {kind} hook #{index}: {detail}")
}

/// `exit status N` or `signal: killed`, as Go's os/exec words a failed process.
fn go_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = s.signal() {
        let name = nix::sys::signal::Signal::try_from(sig)
            .map(|s| {
                // SAFETY: strsignal returns a pointer to a static string.
                let p = unsafe { libc::strsignal(s as i32) };
                if p.is_null() {
                    return s.as_str().to_string();
                }
                // SAFETY: non-null, NUL-terminated, static.
                let t = unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy();
                let mut c = t.chars();
                c.next()
                    .map(|f| f.to_lowercase().chain(c).collect())
                    .unwrap_or_default()
            })
            .unwrap_or_else(|_| sig.to_string());
        format!("signal: {name}")
    } else {
        format!("exit status {}", s.code().unwrap_or(-1))
    }
}

/// The wrapped hook (`argv` after [`WRAPPER_ARG`]: kind, index, report, cwd, timeout,
/// `--`, path, argv0, args...): runs it and returns the wrapper's exit status, 0 when
/// the hook succeeded, 1 after writing runc's message to the report.
pub fn wrapper_main(argv: &[OsString]) -> i32 {
    let s = |i: usize| argv.get(i).map(|a| a.to_string_lossy().to_string());
    let (Some(kind), Some(index), Some(report), Some(cwd), Some(timeout)) =
        (s(0), s(1), s(2), s(3), s(4))
    else {
        eprintln!("siloc: malformed hook wrapper arguments");
        return 1;
    };
    let Some(path) = argv.get(6) else {
        eprintln!("siloc: malformed hook wrapper arguments");
        return 1;
    };
    let (report, runtime_ns) = match report.split_once(NS_SEP) {
        Some((r, ns)) => (r.to_string(), Some(ns.to_string())),
        None => (report, None),
    };
    let report = Report::decode(&report);
    if let Some(ns) = runtime_ns
        && let Err(e) = enter_runtime_namespaces(&ns)
    {
        write_report(
            &report,
            &message(&kind, &index, &path.to_string_lossy(), &Failure::Chdir(e)),
        );
        return 1;
    }
    let timeout = timeout.parse::<i64>().ok().filter(|t| *t > 0);
    let input = HookInput {
        cwd: &cwd,
        ..HookInput::default()
    };
    match run_hook(path, argv.get(7..).unwrap_or_default(), &input, timeout) {
        Ok(()) => 0,
        Err(f) => {
            let msg = message(&kind, &index, &path.to_string_lossy(), &f);
            write_report(&report, &msg);
            1
        }
    }
}

fn write_report(report: &Report, msg: &str) {
    let line = format!("{msg}\n");
    let written = match report {
        Report::Fd(fd) => {
            // SAFETY: the fd was inherited for this purpose; ManuallyDrop keeps it open.
            let mut f = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(*fd) });
            // Only the first failure counts (libcontainer stops at it anyway).
            f.metadata().is_ok_and(|m| m.len() == 0) && f.write_all(line.as_bytes()).is_ok()
        }
        Report::Path(p) => std::fs::write(p, &line).is_ok(),
        Report::Stderr => false,
    };
    if !written {
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

/// What a hook gets besides its argv: its working directory (`""`: the caller's),
/// the state on stdin (`None`: the caller's stdin, which libcontainer feeds a
/// wrapper), and its environment (`None`: the caller's).
#[derive(Default)]
struct HookInput<'a> {
    cwd: &'a str,
    state: Option<&'a [u8]>,
    env: Option<&'a [String]>,
}

fn run_hook(
    path: &std::ffi::OsStr,
    argv: &[OsString],
    input: &HookInput,
    timeout: Option<i64>,
) -> Result<(), Failure> {
    let cwd = input.cwd;
    if !cwd.is_empty() {
        std::env::set_current_dir(cwd).map_err(|e| Failure::Chdir(format!("chdir {cwd}: {e}")))?;
    }
    let mut cmd = std::process::Command::new(path);
    if let Some((arg0, rest)) = argv.split_first() {
        cmd.arg0(arg0).args(rest);
    }
    if let Some(env) = input.env {
        cmd.env_clear();
        for kv in env {
            // runtime-spec: env entries are KEY=VALUE; one without '=' is skipped.
            if let Some((k, v)) = kv.split_once('=') {
                cmd.env(k, v);
            }
        }
    }
    cmd.stdin(if input.state.is_some() {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::inherit()
    })
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    // SAFETY: prctl is async-signal-safe; the hook dies with its wrapper, which
    // libcontainer may kill.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        Failure::Spawn(crate::sys::errno::go_text(nix::Error::from_raw(
            e.raw_os_error().unwrap_or(0),
        )))
    })?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    if let (Some(state), Some(mut stdin)) = (input.state, child.stdin.take()) {
        // A hook that exits without reading its stdin is no error (EPIPE ignored,
        // as runc and libcontainer do).
        let state = state.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&state);
        });
    }
    let read_all = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = read_all(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let err = read_all(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match timeout {
        Some(t) => match rx.recv_timeout(Duration::from_secs(t as u64)) {
            Ok(s) => s,
            Err(_) => {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                return Err(Failure::Timeout(t));
            }
        },
        None => rx
            .recv()
            .map_err(|_| Failure::Spawn("wait failed".into()))?,
    }
    .map_err(|e| Failure::Spawn(e.to_string()))?;
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if status.success() {
        return Ok(());
    }
    Err(Failure::Status {
        how: go_status(status),
        out,
        err,
    })
}

/// Takes the spec's startContainer hooks out of `spec` (libcontainer would run them
/// and report a failure without naming it) for [`run_start_container`], which siloc's
/// init executor calls. Empty when the spec has none.
pub fn take_start_container(spec: &mut Spec) -> Vec<Hook> {
    let Some(mut hooks) = spec.hooks().clone() else {
        return Vec::new();
    };
    let taken = hooks.start_container_mut().take().unwrap_or_default();
    spec.set_hooks(Some(hooks));
    taken
}

/// Runs startContainer `hooks` in order, in the calling process (the container's
/// init, after `start`, before the program is exec'd: runtime-spec
/// "startContainer Hooks"), as runc's init does (standard_init_linux.go): each gets
/// `state` on stdin with `pid` set to the caller's pid (in the container's PID
/// namespace, as runc's `unix.Getpid()`) and `status` "created", and, when the hook
/// has no `env`, the process's environment (the caller's, libcontainer's executor
/// having set it). Runs from siloc's own code, so nothing is exec'd from the host.
///
/// Errors: runc's "error running startContainer hook #N: ..." for the first that fails.
pub fn run_start_container(hooks: &[Hook], state: &oci_spec::runtime::State) -> Result<(), String> {
    let mut state = state.clone();
    state.set_pid(Some(std::process::id() as i32));
    state.set_status(oci_spec::runtime::ContainerState::Created);
    let body = serde_json::to_vec(&state).map_err(|e| format!("startContainer hook state: {e}"))?;
    for (i, h) in hooks.iter().enumerate() {
        let path = h.path().as_os_str();
        let argv: Vec<OsString> = match h.args() {
            Some(a) if !a.is_empty() => a.iter().map(OsString::from).collect(),
            _ => vec![path.to_os_string()],
        };
        let input = HookInput {
            cwd: "",
            state: Some(&body),
            env: h.env().as_deref(),
        };
        if let Err(f) = run_hook(path, &argv, &input, h.timeout().filter(|t| *t > 0)) {
            return Err(message(
                "startContainer",
                &i.to_string(),
                &path.to_string_lossy(),
                &f,
            ));
        }
    }
    Ok(())
}

/// The init's executor: [`super::procname::Named`], running the startContainer
/// `hooks` ([`run_start_container`]) before it execs the program. A failure goes to
/// the init's stderr (the container's, where runc's init prints it) and fails the
/// init, which exits 255 as runc's does.
#[derive(Clone, Default)]
pub struct StartContainer {
    pub hooks: Vec<Hook>,
    /// The container's state (id, bundle, annotations) the hooks get.
    pub state: oci_spec::runtime::State,
}

impl libcontainer::workload::Executor for StartContainer {
    fn exec(&self, spec: &Spec) -> Result<(), libcontainer::workload::ExecutorError> {
        if !self.hooks.is_empty()
            && let Err(msg) = run_start_container(&self.hooks, &self.state)
        {
            let _ = writeln!(std::io::stderr(), "{msg}");
            return Err(libcontainer::workload::ExecutorError::Other(msg));
        }
        libcontainer::workload::Executor::exec(&super::procname::Named, spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), libcontainer::workload::ExecutorValidationError> {
        libcontainer::workload::Executor::validate(&super::procname::Named, spec)
    }

    fn setup_envs(
        &self,
        envs: std::collections::HashMap<String, String>,
    ) -> Result<(), libcontainer::workload::ExecutorSetEnvsError> {
        libcontainer::workload::Executor::setup_envs(&super::procname::Named, envs)
    }
}

/// Whether `argv` (the process's own) is a wrapped hook's.
pub fn is_wrapper(argv: &[OsString]) -> bool {
    argv.get(1)
        .is_some_and(|a| a.as_bytes() == WRAPPER_ARG.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_runcs() {
        let f = Failure::Status {
            how: "exit status 3".into(),
            out: String::new(),
            err: "hook says no\n".into(),
        };
        assert_eq!(
            message("prestart", "1", "/h", &f),
            "error running prestart hook #1: error running hook: exit status 3, stdout: , \
             stderr: hook says no"
        );
        assert_eq!(
            message(
                "createRuntime",
                "0",
                "/nope",
                &Failure::Spawn(crate::sys::errno::go_text(nix::Error::ENOENT))
            ),
            "error running createRuntime hook #0: fork/exec /nope: no such file or directory"
        );
        assert_eq!(
            message("poststart", "2", "/h", &Failure::Timeout(1)),
            "error running poststart hook #2: hook ran past specified timeout of 1.0s"
        );
    }

    #[test]
    fn wrapping_keeps_what_the_hook_was() {
        let mut spec: Spec = serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "hooks": {
                "prestart": [{"path": "/bin/a", "args": ["a", "x"], "env": ["K=V"], "timeout": 5}],
                "createContainer": [{"path": "/bin/b"}],
                "poststop": [{"path": "/bin/c"}]
            }
        }))
        .unwrap();
        wrap(
            &mut spec,
            Path::new("/r"),
            &Report::Fd(7),
            Path::new("/s/p"),
        );
        let h = spec.hooks().clone().unwrap();
        let pre = &h.prestart().as_ref().unwrap()[0];
        assert_eq!(pre.path(), Path::new("/proc/self/exe"));
        assert_eq!(pre.env().as_deref(), Some(&["K=V".to_string()][..]));
        assert_eq!(pre.timeout(), None);
        assert_eq!(
            pre.args().as_deref().unwrap()[1..],
            [
                WRAPPER_ARG,
                "prestart",
                "0",
                "fd:7",
                "",
                "5",
                "--",
                "/bin/a",
                "a",
                "x"
            ]
        );
        let cc = &h.create_container().as_ref().unwrap()[0];
        assert_eq!(
            cc.args().as_deref().unwrap()[2..],
            [
                "createContainer",
                "0",
                "fd:7",
                "/r",
                "",
                "--",
                "/bin/b",
                "/bin/b"
            ]
        );
        assert_eq!(
            h.poststop().as_ref().unwrap()[0].path(),
            Path::new("/bin/c")
        );
        assert_eq!(Report::decode("fd:7"), Report::Fd(7));
        assert_eq!(Report::decode("path:/s/p"), Report::Path("/s/p".into()));
        assert_eq!(Report::decode("-"), Report::Stderr);
    }
}
