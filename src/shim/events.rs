//! Task events to containerd (`/tasks/create`, `/tasks/start`, `/tasks/exit`,
//! `/tasks/delete`, `/tasks/exec-added`, `/tasks/exec-started`, `/tasks/paused`,
//! `/tasks/resumed`, `/tasks/oom`), sent in order by one thread so that a handler never
//! waits on containerd. containerd's CRI learns of a container's exit only from
//! `/tasks/exit`.
//!
//! OOM: on cgroup v1 an eventfd registered on the container's `memory.oom_control`
//! (kernel Documentation/admin-guide/cgroup-v1/memory.rst, "OOM Control"); on cgroup
//! v2, `memory.events`' `oom_kill` count, polled. Both watch only the container's own
//! cgroup.

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

/// Calls `on_oom` for each OOM kill in the cgroup of process `pid`, until that
/// cgroup is gone. Best effort: no memory cgroup, no watch (logged).
pub fn watch_oom(pid: u32, on_oom: impl Fn() + Send + 'static) {
    let Some(dir) = memory_cgroup(pid) else {
        log::info!("no memory cgroup found for pid {pid}: no OOM events");
        return;
    };
    std::thread::spawn(move || {
        if dir.join("memory.oom_control").exists() {
            watch_v1(&dir, &on_oom);
        } else {
            watch_v2(&dir, &on_oom);
        }
    });
}

/// The memory cgroup directory of `pid` (v1 `memory` controller, else the v2 one).
fn memory_cgroup(pid: u32) -> Option<std::path::PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mut v2 = None;
    for l in text.lines() {
        let mut parts = l.splitn(3, ':');
        let (_, ctrl, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrl.split(',').any(|c| c == "memory") {
            let d =
                std::path::Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
            return d.is_dir().then_some(d);
        }
        if ctrl.is_empty() {
            v2 = Some(path.to_string());
        }
    }
    let path = v2?;
    let d = std::path::Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
    d.join("memory.events").exists().then_some(d)
}

fn watch_v1(dir: &std::path::Path, on_oom: &dyn Fn()) {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd};
    let Ok(ctl) = std::fs::File::open(dir.join("memory.oom_control")) else {
        return;
    };
    // SAFETY: eventfd returns a new fd (or -1), which the File then owns.
    let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if efd < 0 {
        return;
    }
    // SAFETY: efd is a fresh, valid fd owned by nobody else.
    let mut ev = unsafe { std::fs::File::from_raw_fd(efd) };
    let line = format!("{} {}", ev.as_raw_fd(), ctl.as_raw_fd());
    if std::fs::write(dir.join("cgroup.event_control"), line).is_err() {
        log::info!("cannot register for OOM events in {}", dir.display());
        return;
    }
    let mut buf = [0u8; 8];
    while ev.read_exact(&mut buf).is_ok() {
        // The eventfd also fires when the cgroup is removed.
        if !dir.exists() {
            return;
        }
        on_oom();
    }
}

fn watch_v2(dir: &std::path::Path, on_oom: &dyn Fn()) {
    let count = |t: &str| {
        t.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse::<u64>().ok())
    };
    let mut seen = std::fs::read_to_string(dir.join("memory.events"))
        .ok()
        .and_then(|t| count(&t))
        .unwrap_or(0);
    while let Ok(t) = std::fs::read_to_string(dir.join("memory.events")) {
        let n = count(&t).unwrap_or(seen);
        if n > seen {
            seen = n;
            on_oom();
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}
