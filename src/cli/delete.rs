//! `delete ID` with `--force`.

use super::Ctx;
use crate::lifecycle;

#[derive(clap::Args, Debug)]
pub(crate) struct DeleteArgs {
    /// The container id
    pub(crate) id: String,
    /// Kill the container if it is still running, and clean up after a crashed create
    #[arg(short = 'f', long)]
    pub(crate) force: bool,
}

/// `siloc delete`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn delete(ctx: &Ctx, a: DeleteArgs) -> anyhow::Result<()> {
    let rt = ctx.runtime()?;
    Ok(lifecycle::delete(&rt, &a.id, a.force)?)
}
