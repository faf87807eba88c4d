//! `pause` and `resume` (cgroup freezer).

use libcontainer::container::ContainerStatus;

use super::Ctx;
use crate::engine;

/// `siloc pause ID`.
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
pub(crate) fn resume(ctx: &Ctx, id: &str) -> anyhow::Result<()> {
    let _lock = crate::lifecycle::container_lock::hold(&ctx.root, id);
    let mut c = engine::load(&ctx.root, id)?;
    if c.status() != ContainerStatus::Paused {
        anyhow::bail!("container not paused");
    }
    Ok(c.resume()?)
}
