//! `create` and `run` (runc's flags and behaviour).

use std::path::PathBuf;

use libcontainer::container::Container;

use super::Ctx;
use super::foreground;
use crate::engine::InitOptions;
use crate::lifecycle::{self, CreateRequest};

/// Flags shared by `create` and `run`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CreateArgs {
    /// The container id
    pub(crate) id: String,
    /// Path to the bundle directory
    #[arg(short = 'b', long, default_value = ".")]
    pub(crate) bundle: PathBuf,
    /// Unix socket that receives the pty master (SCM_RIGHTS) when process.terminal is true
    #[arg(long = "console-socket")]
    pub(crate) console_socket: Option<PathBuf>,
    /// File to write the container process's pid to
    #[arg(long = "pid-file")]
    pub(crate) pid_file: Option<PathBuf>,
    /// Do not use pivot_root to jail the process (ramdisk roots)
    #[arg(long = "no-pivot")]
    pub(crate) no_pivot: bool,
    /// Do not create a new session keyring (accepted; libcontainer decides)
    #[arg(long = "no-new-keyring")]
    no_new_keyring: bool,
    /// Pass this many extra file descriptors (from fd 3) to the container
    #[arg(long = "preserve-fds", default_value_t = 0)]
    pub(crate) preserve_fds: i32,
}

/// `run`: `create` + `start`, in the foreground unless `--detach`.
#[derive(clap::Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) create: CreateArgs,
    /// Detach from the container's process
    #[arg(short = 'd', long)]
    pub(crate) detach: bool,
    /// Do not delete the container after it exits
    #[arg(long)]
    pub(crate) keep: bool,
}

impl CreateArgs {
    fn request(&self, ctx: &Ctx, detach: bool) -> anyhow::Result<CreateRequest> {
        let abs = |p: &PathBuf| crate::sys::paths::absolute_clean(p);
        Ok(CreateRequest {
            id: self.id.clone(),
            bundle: self.bundle.clone(),
            init: InitOptions {
                pid_file: self.pid_file.as_ref().map(abs).transpose()?,
                console_socket: self.console_socket.as_ref().map(abs).transpose()?,
                preserve_fds: self.preserve_fds,
                no_pivot: self.no_pivot,
                systemd: ctx.systemd,
                detach,
            },
        })
    }
}

/// `siloc create`.
pub(crate) fn create(ctx: &Ctx, a: CreateArgs) -> anyhow::Result<Container> {
    let rt = ctx.runtime()?;
    let req = a.request(ctx, true)?;
    Ok(lifecycle::create(&rt, &req)?)
}

/// `siloc run`: returns the container's exit status in the foreground, 0 detached.
pub(crate) fn run(ctx: &Ctx, a: RunArgs) -> anyhow::Result<i32> {
    let rt = ctx.runtime()?;
    if a.detach {
        let req = a.create.request(ctx, true)?;
        let mut c = lifecycle::create(&rt, &req)?;
        if let Err(e) = c.start() {
            let _ = lifecycle::delete(&rt, &req.id, true);
            return Err(e.into());
        }
        return Ok(0);
    }
    foreground::run(&rt, a.create.request(ctx, false)?, a.keep)
}
