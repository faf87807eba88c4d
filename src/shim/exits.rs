//! Exit statuses of the shim's children. The crate's reaper thread waits for every
//! child (the shim is a subreaper, so container processes are reparented to it once
//! siloc exits) and reports `(pid, status)` to its monitor; `std::process::Child::wait`
//! would race it and get ECHILD. One dispatcher thread takes those reports: a pid
//! someone watches gets its callback, any other is kept until [`wait`] or [`watch`]
//! claims it (a process may exit before its pid file is read).
//!
//! Status: the exit code, or 128 + signal number for a killed process (the crate's
//! rule, as containerd's runc shim).

use std::collections::HashMap;
use std::sync::{Condvar, LazyLock, Mutex, Once};

use containerd_shim::monitor::{ExitEvent, Subject, Topic, monitor_subscribe};

type Callback = Box<dyn FnOnce(i32) + Send>;

#[derive(Default)]
struct Table {
    unclaimed: HashMap<i32, i32>,
    watchers: HashMap<i32, Callback>,
}

static TABLE: LazyLock<(Mutex<Table>, Condvar)> = LazyLock::new(Default::default);
static START: Once = Once::new();

fn table() -> std::sync::MutexGuard<'static, Table> {
    TABLE.0.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts the dispatcher (once). Must run before the shim starts any child.
pub fn start() {
    START.call_once(|| {
        let sub = match monitor_subscribe(Topic::Pid) {
            Ok(s) => s,
            Err(e) => {
                log::error!("cannot subscribe to child exits: {e}");
                return;
            }
        };
        std::thread::spawn(move || {
            while let Ok(ExitEvent { subject, exit_code }) = sub.rx.recv() {
                if let Subject::Pid(pid) = subject {
                    dispatch(pid, exit_code);
                }
            }
        });
    });
}

fn dispatch(pid: i32, code: i32) {
    let cb = {
        let mut t = table();
        match t.watchers.remove(&pid) {
            Some(cb) => cb,
            None => {
                t.unclaimed.insert(pid, code);
                TABLE.1.notify_all();
                return;
            }
        }
    };
    cb(code);
}

/// Blocks until child `pid` has exited; returns its status.
pub fn wait(pid: i32) -> i32 {
    let mut t = table();
    loop {
        if let Some(code) = t.unclaimed.remove(&pid) {
            return code;
        }
        t = TABLE.1.wait(t).unwrap_or_else(|p| p.into_inner());
    }
}

/// Calls `cb(status)` when `pid` exits (at once, on this thread, if it already has).
pub fn watch(pid: i32, cb: impl FnOnce(i32) + Send + 'static) {
    let code = {
        let mut t = table();
        match t.unclaimed.remove(&pid) {
            Some(code) => code,
            None => {
                t.watchers.insert(pid, Box::new(cb));
                return;
            }
        }
    };
    cb(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_before_the_watch_is_kept_for_it() {
        dispatch(-7, 3);
        let (tx, rx) = std::sync::mpsc::channel();
        watch(-7, move |c| tx.send(c).unwrap());
        assert_eq!(rx.recv().unwrap(), 3);
        let (tx, rx) = std::sync::mpsc::channel();
        watch(-8, move |c| tx.send(c).unwrap());
        assert!(rx.try_recv().is_err());
        dispatch(-8, 137);
        assert_eq!(rx.recv().unwrap(), 137);
        dispatch(-9, 1);
        assert_eq!(wait(-9), 1);
    }
}
