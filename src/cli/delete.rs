//! `delete ID` with `--force`.

use super::Ctx;
use crate::lifecycle;

#[derive(clap::Args, Debug)]
pub struct DeleteArgs {
    /// The container id
    pub id: String,
    /// Kill the container if it is still running, and clean up after a crashed create
    #[arg(short = 'f', long)]
    pub force: bool,
}

/// `siloc delete`.
pub fn delete(ctx: &Ctx, a: DeleteArgs) -> anyhow::Result<()> {
    let rt = ctx.runtime()?;
    Ok(lifecycle::delete(&rt, &a.id, a.force)?)
}
