//! `pause` and `resume` (cgroup freezer).

use libcontainer::container::ContainerStatus;

use super::Ctx;
use crate::engine;

/// `siloc pause ID`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn pause(ctx: &Ctx, id: &str) -> anyhow::Result<()> {
    // After a concurrent delete, not during it (lifecycle::container_lock).
    let _lock = crate::lifecycle::container_lock::hold(&ctx.root, id);
    let mut c = engine::load(&ctx.root, id)?;
    if c.status() != ContainerStatus::Running {
        anyhow::bail!("container not running");
    }
    Ok(c.pause()?)
}

/// `siloc resume ID`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn resume(ctx: &Ctx, id: &str) -> anyhow::Result<()> {
    let _lock = crate::lifecycle::container_lock::hold(&ctx.root, id);
    let mut c = engine::load_saved(&ctx.root, id)?;
    let saved = c.status();
    engine::frozen_cgroup::align_status(&mut c);
    if c.status() != ContainerStatus::Paused {
        anyhow::bail!("container not paused");
    }
    c.resume()?;
    // A created container frozen from outside is thawed, not started: it stays
    // created, as runc (which finds it waiting on its exec fifo) reports it.
    if saved == ContainerStatus::Created {
        c.set_status(ContainerStatus::Created).save()?;
    }
    Ok(())
}
