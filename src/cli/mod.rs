//! siloc's runc-compatible command line: runc's global flags, commands, outputs and
//! exit codes, plus siloc's own commands.
//!
//! Errors end as runc's do: one line through the logger (text or JSON per
//! `--log-format`), repeated on stderr when the log goes to a file, exit status 1
//! (255 for `exec`, as runc; see errmsg).

mod check;
mod console_proxy;
mod create;
mod delete;
mod errmsg;
mod events;
mod exec;
mod features;
mod foreground;
mod image;
mod info;
mod kill;
mod listen_fds;
mod logging;
mod pause;
mod pidfd_socket;
mod runc_stats;
mod scenario;
pub(crate) mod signals;
mod spec;
mod state;
mod stdio;
pub(crate) mod tty;
mod update;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cli::logging::LogFormat;
use crate::config::HostConfig;
use crate::lifecycle::Runtime;

/// siloc: a runc-compatible OCI runtime.
#[derive(Parser, Debug)]
#[command(
    name = "siloc",
    about = "siloc: a runc-compatible OCI container runtime with per-container user \
             namespaces, one-mount idmapped rootfs from layers, NUMA-local placement \
             and disk I/O policies",
    disable_version_flag = true
)]
struct Cli {
    /// Root directory for storage of container state (should be on tmpfs)
    #[arg(long, default_value = "/run/siloc")]
    root: PathBuf,
    /// Write logs to this file instead of stderr
    #[arg(long)]
    log: Option<PathBuf>,
    /// Log format: text or json
    #[arg(long = "log-format", value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Enable debug logging
    #[arg(long)]
    debug: bool,
    /// Manage cgroups through systemd (needs a running systemd)
    #[arg(long = "systemd-cgroup")]
    systemd_cgroup: bool,
    /// Rootless mode: true, false or auto (siloc detects it; accepted for runc compatibility)
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "VALUE")]
    rootless: Option<String>,
    /// Host configuration file [default: /etc/siloc/siloc.toml]
    #[arg(long, env = "SILOC_CONFIG")]
    config: Option<PathBuf>,
    /// Print the version
    #[arg(short = 'v', long = "version")]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a container
    Create(create::CreateArgs),
    /// Execute the user defined process in a created container
    Start(IdArg),
    /// Create and run a container
    Run(create::RunArgs),
    /// Output the state of a container
    State(IdArg),
    /// Send a signal (default SIGTERM) to the container's init process
    Kill(kill::KillArgs),
    /// Delete any resources held by the container
    Delete(delete::DeleteArgs),
    /// List containers started by siloc with the given root
    List(info::ListArgs),
    /// Display the processes running inside a container
    Ps(info::PsArgs),
    /// Execute a new process inside the container
    Exec(exec::ExecArgs),
    /// Suspend all processes inside the container
    Pause(IdArg),
    /// Resume all processes that have been previously paused
    Resume(IdArg),
    /// Display container events such as OOM notifications, cpu, memory and I/O usage
    /// statistics
    Events(events::EventsArgs),
    /// Update container resource constraints
    Update(update::UpdateArgs),
    /// Create a new specification file (config.json)
    Spec(spec::SpecArgs),
    /// Show the enabled features (runtime-spec features document)
    Features,
    /// What this host offers for I/O classes (limits, io.latency, weights), per disk;
    /// switches a host-wide knob only when asked
    Check(check::CheckArgs),
    /// OCI images: unpack layouts into the layer store, make bundles, list, remove
    Image(image::ImageArgs),
    /// Checkpoint a running container (not supported)
    Checkpoint(Passthrough),
    /// Restore a container from a checkpoint (not supported)
    Restore(Passthrough),
    /// Disk-isolation scenarios: a victim's IOPS and p99 beside noisy neighbours
    #[command(subcommand)]
    Scenario(scenario::ScenarioCommand),
}

/// A single container id.
#[derive(clap::Args, Debug)]
struct IdArg {
    /// The container id
    pub(crate) id: String,
}

/// Any arguments, for commands that only answer "not supported".
#[derive(clap::Args, Debug)]
struct Passthrough {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    _args: Vec<String>,
}

/// What each command gets: the global flags, resolved lazily where that costs.
pub(crate) struct Ctx {
    pub(crate) root: PathBuf,
    pub(crate) systemd: bool,
    config_path: Option<PathBuf>,
}

impl Ctx {
    /// The host config (read only by commands that need it) and the runtime handle.
    pub(crate) fn runtime(&self) -> anyhow::Result<Runtime> {
        let config = HostConfig::load(self.config_path.as_deref())?;
        Ok(Runtime {
            root: self.root.clone(),
            config,
            systemd: self.systemd,
        })
    }
}

/// Writes `text` and a newline to stdout. A closed pipe (`siloc state x | head -c1`)
/// is not an error: the reader has what it wanted.
pub(crate) fn emit(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out
        .write_all(text.as_bytes())
        .and_then(|_| out.write_all(b"\n"))
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// The commands that clone siloc into a container and so need the exe guard.
fn enters_container(args: &[std::ffi::OsString]) -> bool {
    // `scenario run` drives siloc as a child process; it needs its real path, not the
    // sealed copy, to hand it on.
    args.iter()
        .skip(1)
        .find(|a| matches!(a.to_str(), Some("create" | "run" | "exec" | "scenario")))
        .is_some_and(|a| a != "scenario")
}

/// Runs siloc with the process arguments; returns the exit status.
pub fn main() -> i32 {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // A hook libcontainer runs, wrapped by siloc (engine::hooks): nothing else.
    if crate::engine::hooks::is_wrapper(&argv) {
        return crate::engine::hooks::wrapper_main(argv.get(2..).unwrap_or_default());
    }
    if enters_container(&argv) {
        crate::sys::exe_guard::seal();
        stdio::keep_null_stdio_writable();
    }
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 1 } else { 0 };
        }
    };
    if cli.version {
        print_version();
        return 0;
    }
    // Still single-threaded: the environment may change (listen_fds).
    listen_fds::keep_only_ours(matches!(
        cli.command,
        Some(Command::Create(_) | Command::Run(_))
    ));
    let for_people = matches!(
        cli.command,
        Some(Command::Scenario(_) | Command::Image(_) | Command::Check(_))
    );
    let to_stderr = match crate::cli::logging::init(
        cli.log.as_deref(),
        cli.log_format,
        cli.debug,
        for_people,
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}", errmsg::chain(&*e));
            return 1;
        }
    };
    let Some(command) = cli.command else {
        let _ = <Cli as clap::CommandFactory>::command().print_help();
        return 0;
    };
    // runc makes --root absolute before anything else: libcontainer changes the
    // working directory while it creates a container, and a relative state root would
    // then name another place (and leave a half-made record behind).
    let root = match crate::sys::paths::absolute_clean(&cli.root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("--root {}: {e}", cli.root.display());
            return 1;
        }
    };
    // A missing state root is made on first create; a file there is a mistake that
    // would otherwise surface as "File exists" or as an empty list.
    // The nearest existing ancestor counts too: a file there makes every command fail.
    if let Some(p) = root.ancestors().find(|p| p.exists())
        && !p.is_dir()
    {
        eprintln!(
            "--root {}: {} is not a directory",
            root.display(),
            p.display()
        );
        return 1;
    }
    let ctx = Ctx {
        root,
        systemd: cli.systemd_cgroup,
        config_path: cli.config,
    };
    let failed = match command {
        Command::Create(_) => errmsg::Failed::Create,
        Command::Run(_) => errmsg::Failed::Run,
        Command::Exec(_) => errmsg::Failed::Exec,
        _ => errmsg::Failed::Other,
    };
    match dispatch(&ctx, command) {
        Ok(code) => code,
        Err(e) => {
            let msg = errmsg::runc_message(&errmsg::chain(&*e), failed);
            tracing::error!(target: "siloc", "{msg}");
            if !to_stderr {
                eprintln!("{msg}");
            }
            if failed == errmsg::Failed::Exec {
                errmsg::EXEC_ERROR_STATUS
            } else {
                1
            }
        }
    }
}

fn print_version() {
    let _ = emit(&format!(
        "siloc version {}\nspec: {}\nlibcontainer: 0.7.0",
        env!("CARGO_PKG_VERSION"),
        oci_spec::runtime::VERSION
    ));
}

fn check_systemd(ctx: &Ctx) -> anyhow::Result<()> {
    if ctx.systemd && !std::path::Path::new("/run/systemd/system").is_dir() {
        anyhow::bail!(
            "--systemd-cgroup: systemd is not running on this host (/run/systemd/system is \
             missing); drop the flag to use the cgroupfs driver"
        );
    }
    Ok(())
}

/// Calls the command's function. Each is `#[inline(never)]`: with fat LTO every
/// function called once is inlined into its caller, and this one held the code of
/// all commands (92 KB), which every command then mapped whole (a short process's
/// peak RSS is mostly the text it touches, see build.rs).
fn dispatch(ctx: &Ctx, command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Create(a) => {
            check_systemd(ctx)?;
            create::create(ctx, a).map(|_| 0)
        }
        Command::Run(a) => {
            check_systemd(ctx)?;
            create::run(ctx, a)
        }
        Command::Start(a) => state::start(ctx, &a.id).map(|_| 0),
        Command::State(a) => state::state(ctx, &a.id).map(|_| 0),
        Command::Kill(a) => kill::kill(ctx, a).map(|_| 0),
        Command::Delete(a) => delete::delete(ctx, a).map(|_| 0),
        Command::List(a) => info::list(ctx, a).map(|_| 0),
        Command::Ps(a) => info::ps(ctx, a).map(|_| 0),
        Command::Exec(a) => exec::exec(ctx, a),
        Command::Pause(a) => pause::pause(ctx, &a.id).map(|_| 0),
        Command::Resume(a) => pause::resume(ctx, &a.id).map(|_| 0),
        Command::Events(a) => events::events(ctx, a).map(|_| 0),
        Command::Update(a) => update::update(ctx, a).map(|_| 0),
        Command::Spec(a) => spec::spec(a).map(|_| 0),
        Command::Features => features::features().map(|_| 0),
        Command::Check(a) => check::check(&a).map(|_| 0),
        Command::Image(a) => image::image(ctx, a).map(|_| 0),
        Command::Scenario(c) => scenario::scenario(ctx, c),
        Command::Checkpoint(_) | Command::Restore(_) => {
            anyhow::bail!("checkpoint/restore is not supported by siloc (no CRIU integration yet)")
        }
    }
}
