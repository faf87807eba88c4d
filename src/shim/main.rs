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
    containerd_shim::run::<service::Service>(service::RUNTIME_ID, None);
}
