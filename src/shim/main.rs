//! `containerd-shim-siloc-v2`: containerd's shim v2 for siloc (`runtime_type =
//! "io.containerd.siloc.v2"`), built on the `containerd-shim` crate's synchronous API
//! (bootstrap, ttrpc task service, event publisher, child reaper).
//!
//! It drives siloc through runc's command line as containerd's runc shim drives runc,
//! with one difference that is the reason it exists: the snapshotter's overlay is not
//! mounted here but handed to siloc unmounted, as trusted `io.siloc.rootfs.*`
//! annotations in the bundle's config.json ([`rootfs`]), so siloc assembles the one
//! idmapped overlay itself. App containers of a pod join the sandbox's user namespace
//! and ID range ([`pod`]).
//!
//! One shim process serves all containers of a pod (their sandbox id is the shim's
//! grouping, [`group`]), as containerd's runc shim does; a container outside a pod
//! gets a shim of its own.

mod error;
mod events;
mod exits;
mod group;
mod io;
mod pod;
mod process;
mod rootfs;
mod runtime;
mod service;

fn main() {
    // `-v`, as containerd's runc shim answers it (its flag package takes one or two
    // dashes); containerd-shim 0.11 parses the flag but ignores it.
    if std::env::args()
        .skip(1)
        .any(|a| matches!(a.as_str(), "-v" | "--v" | "-version" | "--version"))
    {
        println!(
            "containerd-shim-siloc-v2:\n  Version:  {}\n  Runtime:  {}",
            env!("CARGO_PKG_VERSION"),
            service::RUNTIME_ID
        );
        return;
    }
    // containerd 2.x asks `shim -info` (runtime options on stdin) before it creates a
    // user-namespaced pod's containers, and checks their spec against the features;
    // containerd-shim 0.11 predates that action.
    if std::env::args()
        .skip(1)
        .any(|a| a == "-info" || a == "--info")
    {
        match service::runtime_info() {
            Ok(out) => {
                use std::io::Write;
                let mut o = std::io::stdout().lock();
                if o.write_all(&out).and_then(|()| o.flush()).is_ok() {
                    return;
                }
            }
            Err(e) => eprintln!("{}: -info: {e}", service::RUNTIME_ID),
        }
        std::process::exit(1);
    }
    block_sigpipe();
    containerd_shim::run::<service::Service>(service::RUNTIME_ID, None);
}

/// Blocks SIGPIPE in the shim's main thread before any other thread exists, so that
/// every thread inherits the mask (pthread_sigmask(3)): a write to a pipe or FIFO
/// without a reader then only fails with EPIPE (pipe(7)).
///
/// Why: while containerd is down, the `log` FIFO of the shim's first bundle has no
/// reader. Each log line then raises SIGPIPE, and containerd-shim's signal thread,
/// which also reaps the shim's children, logs "received SIGPIPE" at debug level,
/// which raises the next one: it spins and reaps no child. containerd 2.1, started
/// again, loads the bundles in the order of their ids and calls Pids on each without a
/// deadline (core/runtime/v2/shim_load.go); for an app container whose id comes
/// before its sandbox's, the `siloc ps` behind Pids is never reaped, and containerd
/// never reaches the sandbox's bundle, whose FIFO it would read. A pod shared by one
/// shim made that order possible. siloc is started with an empty mask
/// (`runtime::Siloc`), so the containers do not inherit this one.
fn block_sigpipe() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let mut set = SigSet::empty();
    set.add(Signal::SIGPIPE);
    if let Err(e) = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None) {
        eprintln!("{}: blocking SIGPIPE: {e}", service::RUNTIME_ID);
    }
}
