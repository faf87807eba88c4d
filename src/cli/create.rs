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
    /// Unix socket that receives a pidfd of the container's init (SCM_RIGHTS; runc 1.2)
    #[arg(long = "pidfd-socket")]
    pub(crate) pidfd_socket: Option<PathBuf>,
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
            // Absolute, as runc records it: libcontainer changes the working
            // directory during create, and the bundle is read again after it (the
            // console's owner).
            bundle: abs(&self.bundle)?,
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
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn create(ctx: &Ctx, a: CreateArgs) -> anyhow::Result<Container> {
    let rt = ctx.runtime()?;
    let mut req = a.request(ctx, true)?;
    create_for_caller(&rt, &mut req, a.pidfd_socket.as_deref(), true)
}

/// `lifecycle::create`, then what the caller asked to be handed: the pty master of a
/// caller's console socket, served through a [`console_proxy`](super::console_proxy)
/// (the pty fixed as runc hands it over) when `proxy_console`, and a pidfd of the
/// init on `pidfd_socket`. Both sockets are connected first; a failure to hand
/// either over deletes the container again.
pub(crate) fn create_for_caller(
    rt: &lifecycle::Runtime,
    req: &mut lifecycle::CreateRequest,
    pidfd_socket: Option<&std::path::Path>,
    proxy_console: bool,
) -> anyhow::Result<Container> {
    let pidfd = super::pidfd_socket::connect(pidfd_socket)?;
    let proxy = if proxy_console {
        super::console_proxy::for_create(req)?
    } else {
        None
    };
    let c = lifecycle::create(rt, req)?;
    let handed = super::console_proxy::finish_create(proxy, &req.bundle, c.pid())
        .map_err(anyhow::Error::from)
        .and_then(|()| match (pidfd, c.pid()) {
            (Some(s), Some(pid)) => Ok(s.send(pid)?),
            _ => Ok(()),
        });
    if let Err(e) = handed {
        let _ = lifecycle::delete(rt, &req.id, true);
        return Err(e);
    }
    Ok(c)
}

/// `siloc run`: returns the container's exit status in the foreground, 0 detached.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn run(ctx: &Ctx, a: RunArgs) -> anyhow::Result<i32> {
    let rt = ctx.runtime()?;
    if a.detach {
        let mut req = a.create.request(ctx, true)?;
        let mut c = create_for_caller(&rt, &mut req, a.create.pidfd_socket.as_deref(), true)?;
        if let Err(e) = super::state::start_created(&rt.root, &mut c) {
            let _ = lifecycle::delete(&rt, &req.id, true);
            return Err(e);
        }
        return Ok(0);
    }
    foreground::run(
        &rt,
        a.create.request(ctx, false)?,
        a.create.pidfd_socket.as_deref(),
        a.keep,
    )
}
