//! `exec`: a new process in a running container, from `--process FILE` or from the
//! command line on top of the container's own process (runc's rules: env appended,
//! `--cap` added to every set, `--user uid[:gid]`, `--cwd`, `--no-new-privs`).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use oci_spec::runtime::{Capability, Process, Spec};

use super::Ctx;
use super::foreground::{OwnTerminal, wait_exit};
use crate::engine::{self, ExecOptions};
use crate::lifecycle::record;

#[derive(clap::Args, Debug)]
pub(crate) struct ExecArgs {
    /// The container id
    pub(crate) id: String,
    /// The command and its arguments
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub(crate) command: Vec<String>,
    /// Path to a process.json (runtime-spec Process); replaces the command line
    #[arg(short = 'p', long)]
    pub(crate) process: Option<PathBuf>,
    /// Allocate a pseudo-TTY
    #[arg(short = 't', long)]
    pub(crate) tty: bool,
    /// Unix socket that receives the pty master
    #[arg(long = "console-socket")]
    pub(crate) console_socket: Option<PathBuf>,
    /// Detach from the process
    #[arg(short = 'd', long)]
    pub(crate) detach: bool,
    /// File to write the process's pid to
    #[arg(long = "pid-file")]
    pub(crate) pid_file: Option<PathBuf>,
    /// Working directory in the container (empty: the container's own, as for runc)
    #[arg(long)]
    pub(crate) cwd: Option<String>,
    /// Set an environment variable (KEY=VALUE), repeatable
    #[arg(short = 'e', long)]
    pub(crate) env: Vec<String>,
    /// User as uid[:gid]
    #[arg(short = 'u', long)]
    pub(crate) user: Option<String>,
    /// Add a capability (CAP_NAME), repeatable
    #[arg(short = 'c', long)]
    pub(crate) cap: Vec<String>,
    /// Set no_new_privs for the process
    #[arg(long = "no-new-privs")]
    no_new_privs: bool,
    /// Pass this many extra file descriptors (from fd 3)
    #[arg(long = "preserve-fds", default_value_t = 0)]
    pub(crate) preserve_fds: i32,
    /// Additional group ids, repeatable
    #[arg(short = 'g', long = "additional-gids")]
    pub(crate) additional_gids: Vec<u32>,
    /// SELinux label for the process (accepted)
    #[arg(long = "process-label")]
    process_label: Option<String>,
    /// AppArmor profile for the process
    #[arg(long)]
    pub(crate) apparmor: Option<String>,
    /// Exec even if the container is paused
    #[arg(long = "ignore-paused")]
    pub(crate) ignore_paused: bool,
    /// Run in this sub-cgroup: PATH, or CONTROLLER[,CONTROLLER]:PATH (cgroup v1)
    #[arg(long)]
    pub(crate) cgroup: Vec<String>,
    /// Unix socket that receives a pidfd of the process (SCM_RIGHTS; runc 1.2)
    #[arg(long = "pidfd-socket")]
    pub(crate) pidfd_socket: Option<PathBuf>,
}

/// Builds the process from the command line on top of the container's process.
/// Errors name the flag at fault.
fn process_from_args(base: &Spec, a: &ExecArgs) -> anyhow::Result<Process> {
    if a.command.is_empty() {
        anyhow::bail!("exec: no command given (pass one after the container id, or --process)");
    }
    let mut p = base.process().clone().unwrap_or_default();
    p.set_args(Some(a.command.clone()));
    p.set_terminal(Some(a.tty));
    let mut env: Vec<String> = p.env().clone().unwrap_or_default();
    for kv in &a.env {
        if let Err((_, why)) = crate::lifecycle::bundle::check_env(std::slice::from_ref(kv)) {
            anyhow::bail!("-e {kv:?}: {why}");
        }
        let key = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k);
        env.retain(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k) != key);
        env.push(kv.clone());
    }
    p.set_env(Some(env));
    // runc takes an empty --cwd as no --cwd.
    if let Some(cwd) = a.cwd.as_deref().filter(|c| !c.is_empty()) {
        if !cwd.starts_with('/') {
            anyhow::bail!("--cwd {cwd}: must be an absolute path");
        }
        p.set_cwd(PathBuf::from(cwd));
    }
    let mut user = p.user().clone();
    if let Some(u) = &a.user {
        let (uid, gid) = match u.split_once(':') {
            Some((u, g)) => (u, Some(g)),
            None => (u.as_str(), None),
        };
        let num = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| anyhow::anyhow!("--user {u:?}: use numeric uid[:gid]"))
        };
        user.set_uid(num(uid)?);
        if let Some(g) = gid {
            user.set_gid(num(g)?);
        }
    }
    if !a.additional_gids.is_empty() {
        let mut g = user.additional_gids().clone().unwrap_or_default();
        g.extend(&a.additional_gids);
        user.set_additional_gids(Some(g));
    }
    p.set_user(user);
    if !a.cap.is_empty() {
        let mut caps = p.capabilities().clone().unwrap_or_default();
        let supported = crate::lifecycle::spec_compat::supported_caps();
        let mut unknown = Vec::new();
        for name in &a.cap {
            // The spec's JSON form (CAP_CHOWN) is what users write. runc leaves out a
            // capability it does not know, or the kernel lacks, with a warning.
            let known =
                serde_json::from_value::<Capability>(serde_json::Value::from(name.as_str()));
            let c = match known {
                Ok(c) if crate::lifecycle::spec_compat::cap_is_usable(name, &supported) => c,
                _ => {
                    unknown.push(name.clone());
                    continue;
                }
            };
            let add = |set: &Option<std::collections::HashSet<Capability>>| {
                let mut s = set.clone().unwrap_or_default();
                s.insert(c);
                Some(s)
            };
            caps.set_bounding(add(caps.bounding()));
            caps.set_effective(add(caps.effective()));
            caps.set_permitted(add(caps.permitted()));
            caps.set_ambient(add(caps.ambient()));
        }
        if !unknown.is_empty() {
            unknown.sort();
            unknown.dedup();
            tracing::warn!(
                "{}",
                crate::lifecycle::spec_compat::unknown_caps_warning(&unknown)
            );
        }
        p.set_capabilities(Some(caps));
    }
    if a.no_new_privs {
        p.set_no_new_privileges(Some(true));
    }
    if let Some(profile) = &a.apparmor {
        p.set_apparmor_profile(Some(profile.clone()));
    }
    if let Some(label) = &a.process_label {
        p.set_selinux_label(Some(label.clone()));
    }
    Ok(p)
}

/// The spec the container runs with: siloc's final spec, or the bundle's.
fn container_spec(ctx: &Ctx, id: &str) -> anyhow::Result<Spec> {
    let rec = record::dir(&ctx.root, id);
    let final_spec = rec.join("config.json");
    if final_spec.exists() {
        let mut spec = Spec::load(&final_spec)?;
        // The HOME siloc gave the init's user is not the exec's (engine::home).
        if let Some(p) = spec.process_mut().as_mut() {
            let env = p.env().clone().unwrap_or_default();
            p.set_env(Some(engine::home::without_added(env, &rec)));
        }
        return Ok(spec);
    }
    let c = engine::load(&ctx.root, id)?;
    Ok(Spec::load(c.bundle().join("config.json"))?)
}

/// The process of a process.json at `path`; errors name the file as `shown` (the
/// caller's --process) and its field. Its args, cwd and env are checked on the way
/// ([`crate::lifecycle::bundle::check_env`]).
fn checked_process(path: &std::path::Path, shown: &std::path::Path) -> anyhow::Result<Process> {
    let text =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("--process {}: {e}", shown.display()))?;
    let p: Process = serde_json::from_slice(&text)
        .map_err(|e| anyhow::anyhow!("--process {}: {e}", shown.display()))?;
    let path = shown;
    let program = p.args().as_ref().and_then(|a| a.first());
    if program.is_none_or(|a0| a0.is_empty()) {
        anyhow::bail!(
            "--process {}: args: must name at least the program to run",
            path.display()
        );
    }
    if !p.cwd().is_absolute() {
        anyhow::bail!(
            "--process {}: cwd {:?}: must be an absolute path",
            path.display(),
            p.cwd()
        );
    }
    if let Err((i, why)) =
        crate::lifecycle::bundle::check_env(p.env().as_deref().unwrap_or_default())
    {
        anyhow::bail!("--process {}: env[{i}]: {why}", path.display());
    }
    Ok(p)
}

/// `siloc exec`: the process's exit status in the foreground, 0 with `--detach`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn exec(ctx: &Ctx, a: ExecArgs) -> anyhow::Result<i32> {
    // Unknown ids fail before anything else is read.
    let loaded = engine::load(&ctx.root, &a.id)?;
    // runc's refusals, in its order (exec.go); libcontainer 0.7 says "failed operation
    // due to incompatible container status: `Stopped`" (or `Paused`).
    if loaded.status() == libcontainer::container::ContainerStatus::Stopped {
        anyhow::bail!("cannot exec in a stopped container");
    }
    if loaded.status() == libcontainer::container::ContainerStatus::Paused && !a.ignore_paused {
        anyhow::bail!("cannot exec in a paused container (use --ignore-paused to override)");
    }
    let init = loaded.pid();
    // The generated file lives in siloc's own record dir of the container (root's,
    // under the state root), created new (O_EXCL: no symlink followed, 0600) and
    // removed when dropped: a plain write to a fixed name in a world-writable /tmp let
    // any user plant a symlink there and have root overwrite its target.
    // A --process file is read as runc reads it (spec_compat: a missing user is root,
    // unknown capabilities are warned about and left out) and handed over as a copy.
    let mut doc = match &a.process {
        Some(p) => {
            let p = crate::sys::paths::absolute_clean(p)?;
            let text =
                std::fs::read(&p).map_err(|e| anyhow::anyhow!("--process {}: {e}", p.display()))?;
            serde_json::from_slice::<serde_json::Value>(&text)
                .map_err(|e| anyhow::anyhow!("--process {}: {e}", p.display()))?
        }
        None => serde_json::to_value(process_from_args(&container_spec(ctx, &a.id)?, &a)?)?,
    };
    for w in crate::lifecycle::spec_compat::process_json(&mut doc) {
        tracing::warn!("{w}");
    }
    // HOME from the container's passwd, read by siloc, not by glibc's NSS inside the
    // container (engine::home).
    if let Some(pid) = init {
        engine::home::for_exec(&mut doc, pid.as_raw());
    }
    // A foreground `exec -t` relayed by siloc: the pty gets the caller's window size
    // before the program runs (console_fixup::in_container applies consoleSize),
    // not only once the relay starts, after it (runc resizes after the start too,
    // racing the program).
    if !a.detach
        && a.console_socket.is_none()
        && doc.get("terminal") == Some(&serde_json::Value::Bool(true))
        && let Some((rows, cols)) = super::tty::caller_window_size()
        && let Some(o) = doc.as_object_mut()
    {
        o.insert(
            "consoleSize".into(),
            serde_json::json!({"height": rows, "width": cols}),
        );
    }
    let mut generated = None;
    let rec = record::dir(&ctx.root, &a.id);
    let dir = if rec.is_dir() {
        rec
    } else {
        std::env::temp_dir()
    };
    let path = dir.join(format!("siloc-exec-{}.json", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("exec: {}: {e}", path.display()))?;
    let file = generated.insert(RemoveOnDrop::new(path)?);
    f.write_all(&serde_json::to_vec(&doc)?)
        .map_err(|e| anyhow::anyhow!("exec: {}: {e}", file.0.display()))?;
    drop(f);
    let process = file.0.clone();
    let shown = a.process.clone().unwrap_or_else(|| process.clone());
    let result = exec_process(ctx, &a, process, &shown, init);
    drop(generated);
    result
}

/// Removes the file when dropped, through its directory opened at creation: the
/// drop runs after the exec joined the container's user namespace, where the state
/// root's path may not be searchable (engine::exec_view).
struct RemoveOnDrop(PathBuf, std::fs::File);

impl RemoveOnDrop {
    fn new(path: PathBuf) -> anyhow::Result<RemoveOnDrop> {
        let parent = path.parent().unwrap_or(std::path::Path::new("/"));
        match std::fs::File::open(parent) {
            Ok(dir) => Ok(RemoveOnDrop(path, dir)),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(anyhow::anyhow!("exec: {}: {e}", parent.display()))
            }
        }
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        let Some(name) = self.0.file_name() else {
            return;
        };
        let at = PathBuf::from(format!("/proc/self/fd/{}", self.1.as_raw_fd())).join(name);
        let _ = std::fs::remove_file(at);
    }
}

/// Runs `process` in the container whose init is `init` (to look at a failed cwd).
fn exec_process(
    ctx: &Ctx,
    a: &ExecArgs,
    process: PathBuf,
    shown: &std::path::Path,
    init: Option<nix::unistd::Pid>,
) -> anyhow::Result<i32> {
    let p = checked_process(&process, shown)?;
    // An ID the container's user namespace does not map: named now, rather than
    // libcontainer's "failed syscall" (engine::exec_ids).
    if let Some(pid) = init {
        let map = |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}"));
        if let (Ok(u), Ok(g)) = (map("uid_map"), map("gid_map")) {
            let user = p.user();
            let groups = user.additional_gids().clone().unwrap_or_default();
            crate::engine::exec_ids::check(&u, &g, user.uid(), user.gid(), &groups)
                .map_err(|m| anyhow::anyhow!("exec: {m}"))?;
        }
    }
    let terminal = p.terminal().unwrap_or(false);
    let foreground = !a.detach;
    let own = if foreground && a.console_socket.is_none() {
        OwnTerminal::maybe(terminal)?
    } else {
        None
    };
    let queue = if foreground {
        Some(crate::cli::signals::install()?)
    } else {
        None
    };
    let pidfd_socket = super::pidfd_socket::connect(a.pidfd_socket.as_deref())?;
    let caller_socket = a
        .console_socket
        .as_deref()
        .map(crate::sys::paths::absolute_clean)
        .transpose()?;
    // A caller's console socket goes through siloc's proxy (console_proxy).
    let proxy = match (&own, &caller_socket) {
        (None, Some(path)) if terminal => Some(super::console_proxy::ConsoleProxy::connect(path)?),
        _ => None,
    };
    // The pty is received and fixed in the host's user namespace, which this process
    // leaves in engine::exec, while libcontainer builds: by a helper forked now
    // (engine::console_owner).
    let fix = crate::engine::console_fixup::for_process(&p, init);
    let listening = match (&own, &proxy) {
        (Some(t), _) => Some(t.socket()),
        (None, Some(p)) => Some(p.socket()),
        (None, None) => None,
    };
    // Also without a user namespace: libcontainer's build returns only once the
    // program runs, and it waits for its owner (console_fixup::wait_for_owner).
    let mut outside = match listening {
        Some(sock) => Some(crate::engine::console_owner::OutsideConsole::spawn(
            || sock.receive_master(std::time::Duration::from_secs(10)).ok(),
            fix,
        )?),
        _ => None,
    };
    let console_socket = match (&own, &proxy) {
        (Some(t), _) => Some(t.path().to_path_buf()),
        (None, Some(p)) => Some(p.path().to_path_buf()),
        (None, None) => caller_socket,
    };
    let pid = engine::exec(
        &ctx.root,
        &a.id,
        ExecOptions {
            process,
            pid_file: a
                .pid_file
                .as_deref()
                .map(crate::sys::paths::absolute_clean)
                .transpose()?,
            console_socket,
            preserve_fds: a.preserve_fds,
            detach: a.detach || own.is_some(),
            ignore_paused: a.ignore_paused,
            cgroup: a.cgroup.clone(),
        },
    )
    .map_err(|e| {
        // libcontainer says only "failed to unix syscall" when the chdir fails: look at
        // the cwd after the fact (a check before would misjudge /proc/self, which from
        // outside the container's PID namespace names nothing).
        // Only for that failure, and not under /proc, whose view from outside differs.
        let chdir_failed = e.to_string().contains("failed to unix syscall");
        match init.filter(|_| chdir_failed && !p.cwd().starts_with("/proc")) {
            Some(pid) => match crate::engine::cwd::exec_cwd_error(pid.as_raw(), p.cwd()) {
                Some(msg) => anyhow::anyhow!(msg),
                None => anyhow::Error::from(e),
            },
            None => anyhow::Error::from(e),
        }
    })?;
    let handed = proxy
        .map_or(Ok(()), |proxy| proxy.forward(&fix, outside.take()))
        .map_err(anyhow::Error::from)
        .and_then(|()| pidfd_socket.map_or(Ok(()), |s| Ok(s.send(pid)?)));
    if let Err(e) = handed {
        // runc kills the process it cannot hand a terminal to.
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        if !a.detach {
            let _ = nix::sys::wait::waitpid(pid, None);
        }
        return Err(e);
    }
    let Some(queue) = queue else {
        return Ok(0);
    };
    let relay = own.map(|t| t.relay(&fix, outside.take())).transpose()?;
    let pty = relay
        .as_ref()
        .map(|r| std::os::fd::AsRawFd::as_raw_fd(&r.master()));
    let code = wait_exit(pid, queue, pty);
    if let Some(r) = relay {
        r.finish(std::time::Duration::from_secs(2));
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: ExecArgs,
    }

    fn base() -> Spec {
        serde_json::from_str(
            r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},
            "process":{"cwd":"/","args":["sh"],"env":["PATH=/bin","A=1"],
            "user":{"uid":0,"gid":0},
            "capabilities":{"bounding":["CAP_KILL"],"effective":["CAP_KILL"],"permitted":["CAP_KILL"]}}}"#,
        )
        .unwrap()
    }

    fn args(v: &[&str]) -> ExecArgs {
        T::parse_from(std::iter::once("t").chain(v.iter().copied())).a
    }

    #[test]
    fn an_empty_cwd_keeps_the_containers_and_a_relative_one_is_refused() {
        let p = process_from_args(&base(), &args(&["--cwd", "", "c1", "ls"])).unwrap();
        assert_eq!(p.cwd(), base().process().as_ref().unwrap().cwd());
        let e = process_from_args(&base(), &args(&["--cwd", "rel", "c1", "ls"])).unwrap_err();
        assert!(e.to_string().contains("--cwd rel"), "{e}");
    }

    #[test]
    fn command_line_overrides_the_container_process() {
        let a = args(&[
            "-t",
            "-e",
            "A=2",
            "-e",
            "B=3",
            "--cwd",
            "/tmp",
            "-u",
            "1000:100",
            "-g",
            "5",
            "--cap",
            "CAP_CHOWN",
            "--no-new-privs",
            "c1",
            "ls",
            "-l",
        ]);
        let p = process_from_args(&base(), &a).unwrap();
        assert_eq!(p.args().clone().unwrap(), vec!["ls", "-l"]);
        assert_eq!(p.terminal(), Some(true));
        assert_eq!(p.env().clone().unwrap(), vec!["PATH=/bin", "A=2", "B=3"]);
        assert_eq!(p.cwd(), &PathBuf::from("/tmp"));
        assert_eq!((p.user().uid(), p.user().gid()), (1000, 100));
        assert_eq!(p.user().additional_gids().clone().unwrap(), vec![5]);
        let caps = p.capabilities().clone().unwrap();
        assert!(
            caps.bounding()
                .as_ref()
                .unwrap()
                .contains(&Capability::Chown)
        );
        assert!(
            caps.ambient()
                .as_ref()
                .unwrap()
                .contains(&Capability::Chown)
        );
        assert_eq!(p.no_new_privileges(), Some(true));
    }

    #[test]
    fn bad_flags_are_named() {
        let e = process_from_args(&base(), &args(&["c1"])).unwrap_err();
        assert!(e.to_string().contains("no command"));
        let e = process_from_args(&base(), &args(&["-u", "bob", "c1", "ls"])).unwrap_err();
        assert!(e.to_string().contains("--user"));
        // runc leaves an unknown capability out (with a warning)
        let p = process_from_args(&base(), &args(&["--cap", "CAP_NOPE", "c1", "ls"])).unwrap();
        let caps = p.capabilities().clone().unwrap();
        assert_eq!(caps.bounding().as_ref().unwrap().len(), 1);
        let e = process_from_args(&base(), &args(&["--cwd", "rel", "c1", "ls"])).unwrap_err();
        assert!(e.to_string().contains("--cwd"));
    }
}
