//! Task events to containerd (`/tasks/create`, `/tasks/start`, `/tasks/exit`,
//! `/tasks/delete`, `/tasks/exec-added`, `/tasks/exec-started`, `/tasks/paused`,
//! `/tasks/resumed`, `/tasks/oom`), sent in order by one thread so that a handler never
//! waits on containerd. containerd's CRI learns of a container's exit only from
//! `/tasks/exit`.
//!
//! OOM: siloc's OOM watch (`siloc::sys::oom`: the v1 `memory.oom_control` eventfd, the
//! v2 `memory.events` `oom_kill` count) on the container's own memory cgroup.

use std::sync::Mutex;
use std::sync::mpsc::{Sender, channel};

use containerd_shim::event::Event;
use containerd_shim::protos::protobuf::MessageDyn;
use containerd_shim::publisher::RemotePublisher;

/// A queue of events to publish in `namespace`.
pub struct Events {
    tx: Mutex<Sender<(String, Box<dyn MessageDyn>)>>,
}

impl Events {
    /// Starts the sending thread.
    pub fn new(publisher: RemotePublisher, namespace: String) -> Events {
        let (tx, rx) = channel::<(String, Box<dyn MessageDyn>)>();
        std::thread::spawn(move || {
            for (topic, ev) in rx {
                let ctx = containerd_shim::Context::default();
                if let Err(e) = publisher.publish(ctx, &topic, &namespace, ev) {
                    log::error!("publish {topic}: {e}");
                }
            }
        });
        Events { tx: Mutex::new(tx) }
    }

    /// Queues `ev` (its topic from the crate's [`Event`] names).
    pub fn send<E: Event + MessageDyn + 'static>(&self, ev: E) {
        let topic = ev.topic();
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let _ = tx.send((topic, Box::new(ev)));
    }
}

/// Calls `on_oom` for each OOM kill in the memory cgroup of process `pid`, from a
/// thread of its own, until that cgroup is gone (siloc's one OOM watch,
/// `siloc::sys::oom`). Best effort: no memory cgroup, no watch (logged).
pub fn watch_oom(pid: u32, on_oom: impl Fn() + Send + 'static) {
    let watch = i32::try_from(pid)
        .map_err(|e| e.to_string())
        .and_then(|p| siloc::sys::oom::OomWatch::of_pid(p).map_err(|e| e.to_string()));
    match watch {
        Ok(w) => {
            std::thread::spawn(move || w.run(on_oom));
        }
        Err(e) => log::info!("no OOM events for pid {pid}: {e}"),
    }
}
