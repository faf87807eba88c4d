//! The seam to libcontainer (youki's library), which owns the OCI lifecycle itself:
//! namespaces, mounts, cgroups, hooks, the container process. Everything siloc adds
//! happens before [`build_init`] (plan, prepare) and after [`delete`] (undo).

pub mod cgroup_compat;
pub mod cgroup_handoff;
pub mod console_fixup;
pub mod console_owner;
pub mod cwd;
pub mod exec_cgroup;
pub(crate) mod exec_ids;
pub mod exec_seccomp;
pub mod exec_sockets;
pub mod exec_view;
pub mod foreign_procs;
pub mod frozen_cgroup;
pub mod home;
pub mod hooks;
pub mod idmapped_mounts;
pub mod init_cause;
pub mod io_weight;
pub mod killed_create;
pub mod lsm_check;
pub mod mount_compat;
pub mod mount_fixups;
pub mod mount_guard;
pub mod mount_refusals;
pub mod ns_owner;
pub mod oom_adj;
pub mod outer_namespaces;
pub mod pidns_cgroup;
pub mod pinned_namespaces;
pub mod post_build;
pub mod procname;
pub mod rlimit_check;
pub mod seccomp_compat;
pub mod stopped_delete;
pub mod v1_subcgroups;
pub mod workload;

use std::path::{Path, PathBuf};

use libcontainer::container::builder::ContainerBuilder;
use libcontainer::container::state::StateError;
use libcontainer::container::{Container, ContainerStatus};
use libcontainer::error::LibcontainerError;
use libcontainer::syscall::syscall::SyscallType;
use nix::unistd::Pid;

/// Errors at the seam; libcontainer's own errors pass through with their causes.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("container does not exist")]
    NotFound(String),
    #[error("container with id exists: {0}")]
    Exists(String),
    #[error("invalid container id {id:?}: {msg}")]
    InvalidId { id: String, msg: String },
    #[error("--pid-file {path}: {msg}")]
    PidFile { path: PathBuf, msg: String },
    #[error(transparent)]
    OuterNamespace(#[from] outer_namespaces::OuterNsError),
    #[error(transparent)]
    Lib(#[from] LibcontainerError),
}

/// runc's container-id rule: letters, digits, `_ + - .`, not `.` or `..`. siloc also
/// reserves ids starting with `.` (its own files live in `<root>/.siloc`).
pub fn validate_id(id: &str) -> Result<(), EngineError> {
    let bad = |msg: &str| {
        Err(EngineError::InvalidId {
            id: id.to_string(),
            msg: msg.to_string(),
        })
    };
    if id.is_empty() {
        return bad("empty");
    }
    if id.starts_with('.') {
        return bad("must not start with '.'");
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-' | '.')))
    {
        return bad(&format!("contains {c:?}; use letters, digits, _ + - ."));
    }
    Ok(())
}

/// libcontainer's directory for container `id`.
pub fn container_dir(root: &Path, id: &str) -> PathBuf {
    root.join(id)
}

/// Loads container `id`; its status is refreshed from /proc and from its freezer, as
/// runc reports it (`paused` when its cgroup is frozen, [`frozen_cgroup::align_status`]).
/// Errors: [`EngineError::NotFound`] when no such container exists.
pub fn load(root: &Path, id: &str) -> Result<Container, EngineError> {
    let mut c = load_saved(root, id)?;
    frozen_cgroup::align_status(&mut c);
    Ok(c)
}

/// Loads container `id` with the status libcontainer gives it (state.json, refreshed
/// from /proc only): for a command that must know what was saved, such as `resume` of
/// a created container frozen from outside, which stays `created`.
/// Errors: [`EngineError::InvalidId`] for an id that is not one (runc: "invalid
/// container ID format"), [`EngineError::NotFound`] when no such container exists.
pub fn load_saved(root: &Path, id: &str) -> Result<Container, EngineError> {
    validate_id(id)?;
    let dir = container_dir(root, id);
    if !dir.join("state.json").exists() {
        return Err(EngineError::NotFound(id.to_string()));
    }
    // libcontainer rewrites state.json in place (truncate, then write), so a reader
    // racing a `start` or `kill` can see it empty or half written: read again.
    let mut tries = 0;
    loop {
        match Container::load(dir.clone()) {
            Err(LibcontainerError::State(StateError::ParseStateFile { .. })) if tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            r => return Ok(r?),
        }
    }
}

/// Whether `e` says container state.json could not be parsed (after [`load`]'s
/// retries): libcontainer writes it in place, so a `create` killed mid-write leaves
/// it empty.
pub fn is_unreadable_state(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Lib(LibcontainerError::State(StateError::ParseStateFile { .. }))
    )
}

/// Removes container `id` whose state.json is unreadable (see [`is_unreadable_state`]),
/// as `delete --force` must: kills what runs in its cgroup (the path comes from
/// libcontainer's youki_config.json, written before state.json), removes the cgroup,
/// then the directory. Without youki_config.json no cgroup was made yet.
///
/// Errors: the cgroup still holds processes after `wait` (kernel too slow to reap).
pub fn remove_unreadable(root: &Path, id: &str, wait: std::time::Duration) -> Result<(), String> {
    use libcgroups::common::{CgroupConfig, CgroupManager, create_cgroup_manager};
    let dir = container_dir(root, id);
    if let Ok(cfg) = libcontainer::config::YoukiConfig::load(&dir) {
        let manager = create_cgroup_manager(CgroupConfig {
            // a systemd path is "slice:prefix:name" (runc's convention)
            systemd_cgroup: cfg.cgroup_path.to_string_lossy().contains(':'),
            cgroup_path: cfg.cgroup_path,
            container_name: id.to_string(),
        })
        .map_err(|e| format!("cgroup of container {id}: {e}"))?;
        let deadline = std::time::Instant::now() + wait;
        loop {
            for pid in manager.get_all_pids().unwrap_or_default() {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
            match manager.remove() {
                Ok(()) => break,
                Err(e) if std::time::Instant::now() > deadline => {
                    return Err(format!("cgroup of container {id}: {e}"));
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
            }
        }
    }
    std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// The options of `create`/`run` that libcontainer takes.
#[derive(Debug, Default, Clone)]
pub struct InitOptions {
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub preserve_fds: i32,
    pub no_pivot: bool,
    pub systemd: bool,
    /// Whether the terminal (if any) goes through `console_socket`.
    pub detach: bool,
}

/// A builder for the init process, made before `create` changes its working directory
/// (runc resolves `--pid-file` against the caller's directory).
/// `start` runs the spec's startContainer hooks in the init ([`hooks::StartContainer`]).
pub fn init_builder(
    root: &Path,
    id: &str,
    opts: &InitOptions,
    start: hooks::StartContainer,
) -> Result<ContainerBuilder, EngineError> {
    Ok(
        ContainerBuilder::new(id.to_string(), SyscallType::default())
            .with_root_path(root)?
            .with_pid_file(opts.pid_file.as_ref())?
            .with_console_socket(opts.console_socket.as_ref())
            .with_preserved_fds(opts.preserve_fds)
            .with_executor(start),
    )
}

/// Creates the container from the final spec in `spec_dir/config.json`.
pub fn build_init(
    builder: ContainerBuilder,
    spec_dir: &Path,
    opts: &InitOptions,
) -> Result<Container, EngineError> {
    Ok(builder
        .as_init(spec_dir)
        .with_systemd(opts.systemd)
        .with_detach(opts.detach)
        .with_no_pivot(opts.no_pivot)
        .build()?)
}

/// Makes sure `path` holds `pid`. libcontainer only logs a warning when it cannot
/// write the pid file; runc fails the command instead (its createPidFile), and
/// containerd's shim needs the file to find the process.
///
/// Errors: [`EngineError::PidFile`] naming the file.
pub fn ensure_pid_file(path: &Path, pid: Pid) -> Result<(), EngineError> {
    let want = pid.to_string();
    if std::fs::read_to_string(path).is_ok_and(|s| s.trim() == want) {
        return Ok(());
    }
    std::fs::write(path, &want).map_err(|e| EngineError::PidFile {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })
}

/// An exec's `--pid-file`, its directory opened before the user namespace is joined
/// (a path the caller cannot search from inside it, engine::exec_view). libcontainer
/// is not given the file: siloc writes it, as runc's createPidFile (fails the exec).
struct PidFileAt {
    path: PathBuf,
    dir: std::os::fd::OwnedFd,
    name: std::ffi::OsString,
}

impl PidFileAt {
    /// Errors: [`EngineError::PidFile`] when the directory cannot be opened.
    fn open(path: &Path) -> Result<PidFileAt, EngineError> {
        let fail = |msg: String| EngineError::PidFile {
            path: path.to_path_buf(),
            msg,
        };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(fail("not a file path".into()));
        };
        let dir = nix::fcntl::open(
            parent,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        // SAFETY: a fresh fd open(2) returned, owned by nothing else.
        .map(|fd| unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
        .map_err(|e| fail(format!("{}: {e}", parent.display())))?;
        Ok(PidFileAt {
            path: path.to_path_buf(),
            dir,
            name: name.to_os_string(),
        })
    }

    /// Writes `pid` ([`ensure_pid_file`]); errors name the given path.
    fn write(&self, pid: Pid) -> Result<(), EngineError> {
        use std::os::fd::AsRawFd;
        let at = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd())).join(&self.name);
        ensure_pid_file(&at, pid).map_err(|e| match e {
            EngineError::PidFile { msg, .. } => EngineError::PidFile {
                path: self.path.clone(),
                msg,
            },
            e => e,
        })
    }
}

/// What `exec` asks of libcontainer's tenant builder. siloc always hands it a whole
/// process.json (runtime-spec "Process"), built from the command line as runc does.
#[derive(Debug, Default)]
pub struct ExecOptions {
    pub process: PathBuf,
    pub pid_file: Option<PathBuf>,
    pub console_socket: Option<PathBuf>,
    pub preserve_fds: i32,
    pub detach: bool,
    pub ignore_paused: bool,
    /// runc's `--cgroup` arguments (engine::exec_cgroup).
    pub cgroup: Vec<String>,
}

/// Moves the calling process into the user namespace of `pid` when it differs from
/// its own. libcontainer 0.7's tenant builder joins every namespace of the container
/// but the user namespace (its list omits "user"), so without this an exec'd process
/// would run as real host root inside a container that has its own user namespace.
/// runc's exec joins the user namespace first, too; the namespaces it owns can then
/// be joined with the capabilities the caller holds in it. The caller must be
/// single-threaded (setns(2)).
///
/// Errors: the namespace file cannot be opened or `setns(2)` fails.
pub fn join_user_namespace(pid: Pid) -> Result<(), EngineError> {
    let err = |what: &str, e: &dyn std::fmt::Display| {
        EngineError::Lib(LibcontainerError::Other(format!(
            "join the container's user namespace: {what}: {e}"
        )))
    };
    let path = format!("/proc/{pid}/ns/user");
    let theirs = crate::sys::ns::id(&path).map_err(|e| err(&path, &e))?;
    let ours = crate::sys::ns::id("/proc/self/ns/user").map_err(|e| err("own", &e))?;
    if theirs == ours {
        return Ok(());
    }
    let f = std::fs::File::open(&path).map_err(|e| err(&path, &e))?;
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWUSER).map_err(|e| err("setns", &e))
}

/// Starts a process in running container `id` and returns its pid (a child of the
/// caller, so it can be waited for). The caller joins the container's user namespace
/// first (see [`join_user_namespace`]).
///
/// The notify socket libcontainer makes in the state dir for this exec is removed
/// once no exec of the container is building, on success and on error
/// ([`crate::engine::exec_sockets`]).
pub fn exec(root: &Path, id: &str, o: ExecOptions) -> Result<Pid, EngineError> {
    let c = load(root, id)?;
    // runc's rlimit error before anything starts (rlimit_check).
    let rlimits = rlimit_check::process_file_rlimits(&o.process).unwrap_or_default();
    rlimit_check::check_with(&rlimits, &rlimit_check::Host::current()).map_err(|e| {
        EngineError::Lib(LibcontainerError::Other(format!(
            "unable to start container process: {e}"
        )))
    })?;
    // Raised while siloc is still in the host's user namespace; libcontainer sets the
    // limits inside the container's (rlimit_check::RaisedHard).
    let _raised = rlimit_check::RaisedHard::raise(&rlimits);
    // Before joining the user namespace: the lock is on a dir of the host's root.
    let building = crate::engine::exec_sockets::Building::enter(&container_dir(root, id))
        .map_err(|e| EngineError::Lib(LibcontainerError::Other(e)))?;
    // `"noNewPrivileges": false` in a --process file: libcontainer would load the
    // seccomp filter too late (engine::seccomp_compat).
    let copy = seccomp_compat::exec_process_copy(&o.process, &container_dir(root, id))
        .map_err(|e| EngineError::Lib(LibcontainerError::Other(e.to_string())))?;
    // Read now: the record may not be searchable once the user namespace is joined.
    let spec = oci_spec::runtime::Spec::load(c.bundle().join("config.json")).ok();
    // Everything libcontainer reads goes into a view before the user namespace is
    // joined (exec_view); the seccomp copy is then no longer needed.
    let view = exec_view::View::make(root, id, copy.as_deref().unwrap_or(&o.process))
        .map_err(|e| EngineError::Lib(LibcontainerError::Other(e)));
    if let Some(p) = &copy {
        let _ = std::fs::remove_file(p);
    }
    let mut view = view?;
    let o = ExecOptions {
        process: view.process(),
        ..o
    };
    // Before the user namespace is joined: `--cgroup` checked, every cgroup.procs the
    // exec writes opened with the host's credentials (exec_cgroup).
    let r = exec_cgroup::Join::enter(c.pid().map(|p| p.as_raw()), &o.cgroup)
        .map_err(|e| EngineError::Lib(LibcontainerError::Other(e.to_string())))
        .and_then(|mut join| {
            let sub = join.sub_cgroup();
            let handoff = cgroup_handoff::Handoff::prepare(join.take_moves());
            let pid = exec_built(root, id, &c, o, sub, &mut view, handoff)?;
            join.finish(pid.as_raw())
                .map_err(|e| EngineError::Lib(LibcontainerError::Other(e.to_string())))?;
            Ok(pid)
        });
    drop(view);
    // runc's words for a seccomp agent that is not listening (engine::seccomp_compat).
    let r = r.map_err(|e| {
        let msg = e.to_string();
        spec.as_ref()
            .and_then(|spec| seccomp_compat::listener_error(spec, &msg))
            .map_or(e, |m| EngineError::Lib(LibcontainerError::Other(m)))
    });
    let removed = building.finish();
    tracing::debug!(removed, "exec notify sockets removed");
    r
}

fn exec_built(
    root: &Path,
    id: &str,
    c: &Container,
    o: ExecOptions,
    sub_cgroup: Option<String>,
    view: &mut exec_view::View,
    handoff: cgroup_handoff::Prepared,
) -> Result<Pid, EngineError> {
    let spec = oci_spec::runtime::Spec::load(c.bundle().join("config.json"))
        .map_err(|e| EngineError::Lib(LibcontainerError::Other(e.to_string())))?;
    // linux.seccomp, which libcontainer's tenant builder drops (exec_seccomp); a
    // notify profile's agent is reached as host root, before anything starts.
    let seccomp = exec_seccomp::check(&spec);
    let agent = match &seccomp {
        Some(s) => exec_seccomp::AgentHandOver::connect(s)
            .map_err(|e| EngineError::Lib(LibcontainerError::Other(e.to_string())))?,
        None => None,
    };
    // Under a filter and without no_new_privs, the process gets CAP_SYS_ADMIN until
    // its filter is loaded, as runc loads it before the caps drop (exec_seccomp).
    let lent = match &seccomp {
        Some(_) => exec_seccomp::admin_copy(&o.process, &container_dir(root, id))
            .map_err(|e| EngineError::Lib(LibcontainerError::Other(e.to_string())))?,
        None => None,
    };
    if let Some((p, _)) = &lent {
        // into the view, and gone before the user namespace is joined (exec_view)
        let copied = view.set_process(p);
        let _ = std::fs::remove_file(p);
        copied.map_err(|e| EngineError::Lib(LibcontainerError::Other(e)))?;
    }
    // The pid file is written through its directory opened now (exec_view: the
    // path may not be searchable from inside the user namespace).
    let pid_file = o.pid_file.as_deref().map(PidFileAt::open).transpose()?;
    if let Some(pid) = c.pid() {
        // Namespaces the container's user namespace does not own (a pod's network
        // namespace) are joined before it, as create did (outer_namespaces).
        let joined = outer_namespaces::join_for_exec(pid.as_raw())?;
        if !joined.is_empty() {
            tracing::debug!(?joined, "joined before the user namespace");
        }
        join_user_namespace(pid)?;
    }
    // linux.memoryPolicy, which libcontainer's tenant builder drops (workload).
    if let Some(mp) = spec
        .linux()
        .as_ref()
        .and_then(|l| l.memory_policy().as_ref())
    {
        workload::inherit_memory_policy(mp)
            .map_err(|e| EngineError::Lib(LibcontainerError::Other(e)))?;
    }
    let builder = view
        .give_root(ContainerBuilder::new(
            id.to_string(),
            SyscallType::default(),
        ))
        .map_err(|e| EngineError::Lib(LibcontainerError::Other(e)))?;
    // The extra hierarchies (exec_cgroup): siloc joins them right before libcontainer
    // forks and leaves them the moment it has (cgroup_handoff), after the user
    // namespace join above, which needs a single-threaded caller.
    let handoff = handoff
        .start()
        .map_err(|e| EngineError::Lib(LibcontainerError::Other(e.to_string())))?;
    let pid = builder
        .with_console_socket(o.console_socket.as_ref())
        .with_preserved_fds(o.preserve_fds)
        .with_executor(exec_seccomp::Filtered {
            seccomp,
            agent_fd: agent.as_ref().map(|a| a.child_fd()),
            lent: lent.as_ref().map(|(_, l)| *l).unwrap_or_default(),
        })
        .as_tenant()
        .with_detach(o.detach)
        .with_process(Some(&o.process))
        .with_ignore_paused(o.ignore_paused)
        .with_sub_cgroup(sub_cgroup)
        .build();
    crate::lifecycle::test_hooks::crash_point("exec-after-libcontainer");
    let forked_within = handoff.finish();
    tracing::debug!(forked_within, "exec cgroup handoff done");
    let pid = pid.map_err(|e| match e {
        // libcontainer's "container state directory does not exist" when the view
        // cannot be searched: say what was denied.
        LibcontainerError::NoDirectory => match std::fs::metadata(view.root().join(id)) {
            Err(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
                EngineError::Lib(LibcontainerError::Other(format!(
                    "{}: permission denied (from inside the container's user namespace)",
                    view.root().join(id).display()
                )))
            }
            _ => EngineError::Lib(e),
        },
        e => EngineError::Lib(e),
    })?;
    if let Some(a) = agent {
        let handed = exec_seccomp::running_state(
            id,
            c.pid().map_or(0, |p| p.as_raw()),
            c.bundle(),
            c.state.annotations.clone().unwrap_or_default(),
        )
        .and_then(|state| a.finish(pid, state));
        if let Err(e) = handed {
            // runc kills the process it could not hand over.
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
            return Err(EngineError::Lib(LibcontainerError::Other(e.to_string())));
        }
    }
    if let Some(p) = pid_file
        && let Err(e) = p.write(pid)
    {
        // runc kills the process it cannot report.
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
        return Err(e);
    }
    Ok(pid)
}

/// runc's lowercase status word.
pub fn status_word(s: ContainerStatus) -> &'static str {
    match s {
        ContainerStatus::Creating => "creating",
        ContainerStatus::Created => "created",
        ContainerStatus::Running => "running",
        ContainerStatus::Stopped => "stopped",
        ContainerStatus::Paused => "paused",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_rules() {
        for ok in ["a", "abc-1_2+3.4", "A9"] {
            validate_id(ok).unwrap();
        }
        for bad in ["", ".", "..", ".siloc", "a/b", "a b", "é"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
    }
}
