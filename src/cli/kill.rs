//! `kill ID [SIGNAL]` with `--all` (runc: default SIGTERM; names with or without SIG,
//! or numbers).

use libcontainer::container::ContainerStatus;
use libcontainer::signal::Signal;

use super::Ctx;
use crate::engine;

#[derive(clap::Args, Debug)]
pub(crate) struct KillArgs {
    /// The container id
    pub(crate) id: String,
    /// Signal name (KILL, SIGKILL) or number
    #[arg(default_value = "SIGTERM", allow_negative_numbers = true)]
    pub(crate) signal: String,
    /// Send the signal to all processes in the container
    #[arg(short = 'a', long)]
    pub(crate) all: bool,
}

/// `siloc kill`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn kill(ctx: &Ctx, a: KillArgs) -> anyhow::Result<()> {
    // After a concurrent delete, not during it (lifecycle::container_lock).
    let _lock = crate::lifecycle::container_lock::hold(&ctx.root, &a.id);
    // runc looks the container up first: an unknown id wins over a bad signal.
    let mut c = engine::load(&ctx.root, &a.id)?;
    let n = match a.signal.trim() {
        "0" => 0,
        s => crate::cli::signals::parse(s)?,
    };
    if n == 0 {
        // Signal 0 checks that the process exists (kill(2)); runc accepts it, and
        // libcontainer's Signal has no 0.
        return match (c.status(), c.pid()) {
            (ContainerStatus::Stopped, _) | (_, None) => anyhow::bail!("container not running"),
            (_, Some(pid)) => nix::sys::signal::kill(pid, None)
                .map_err(|_| anyhow::anyhow!("container not running")),
        };
    }
    let sig = Signal::try_from(n).map_err(|_| anyhow::anyhow!("unknown signal {:?}", a.signal))?;
    match c.status() {
        ContainerStatus::Stopped if !a.all => anyhow::bail!("container not running"),
        // Its cgroup gone (a pod's StopPodSandbox removed a nested one): nothing to
        // signal, as runc; libcontainer failed and left the freezer made and FROZEN.
        ContainerStatus::Stopped
            if !engine::foreign_procs::has_listing_cgroup(&engine::foreign_procs::dirs_of(&c)) =>
        {
            return Ok(());
        }
        _ => {}
    }
    // runc (1.2+): SIGKILL to a container in the host's PID namespace goes to every
    // process of its cgroup, as no PID namespace teardown would kill the others.
    let all = a.all || (n == libc::SIGKILL && !has_own_pid_namespace(&c));
    // runc thaws a paused container after its SIGKILL on either cgroup version
    // (libcontainer 0.7 only on v1, and `--all` thaws anyway): engine::frozen_cgroup.
    let thaw = (n == libc::SIGKILL && !all && c.status() == ContainerStatus::Paused)
        .then(|| c.pid().and_then(engine::frozen_cgroup::Freezer::of))
        .flatten();
    c.kill(sig, all)?;
    if let Some(f) = thaw
        && let Err(e) = f.thaw()
    {
        tracing::warn!(id = a.id, "thaw after SIGKILL: {e}");
    }
    Ok(())
}

/// Whether the container's init has a PID namespace other than siloc's (one of its
/// own, or another container's, which that one's init tears down). Unknown: yes.
fn has_own_pid_namespace(c: &libcontainer::container::Container) -> bool {
    let Some(pid) = c.pid() else { return true };
    let ns = |p: &str| crate::sys::ns::id(p);
    match (ns(&format!("/proc/{pid}/ns/pid")), ns("/proc/self/ns/pid")) {
        (Ok(theirs), Ok(ours)) => theirs != ours,
        _ => true,
    }
}
