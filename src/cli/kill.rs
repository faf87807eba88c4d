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
pub(crate) fn kill(ctx: &Ctx, a: KillArgs) -> anyhow::Result<()> {
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
        _ => {}
    }
    c.kill(sig, a.all)?;
    Ok(())
}
