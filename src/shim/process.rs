//! One process of the task: the container's init or an exec, its pid, status, exit
//! and stdio, and waiting for its exit.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use containerd_shim::api::Status;
use containerd_shim::protos::protobuf::well_known_types::timestamp::Timestamp;

use crate::io::{Fifos, ProcessIo};

/// What containerd's State and Wait report.
#[derive(Debug, Clone, Default)]
pub struct ProcState {
    pub status: Status,
    pub pid: u32,
    pub exit_status: u32,
    pub exited_at: Option<Timestamp>,
}

/// A process the shim knows (`exec_id` empty: the init).
pub struct Process {
    pub exec_id: String,
    pub fifos: Fifos,
    /// The exec's OCI process (JSON), until it is started.
    pub spec: Mutex<Option<Vec<u8>>>,
    state: Mutex<ProcState>,
    exited: Condvar,
    pub io: Mutex<Option<ProcessIo>>,
}

impl Process {
    pub fn new(exec_id: &str, fifos: Fifos) -> Arc<Process> {
        Arc::new(Process {
            exec_id: exec_id.to_string(),
            fifos,
            spec: Mutex::new(None),
            state: Mutex::new(ProcState {
                status: Status::CREATED,
                ..Default::default()
            }),
            exited: Condvar::new(),
            io: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProcState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn state(&self) -> ProcState {
        self.lock().clone()
    }

    pub fn set_pid(&self, pid: u32) {
        self.lock().pid = pid;
    }

    /// Sets the status unless the process has exited.
    pub fn set_status(&self, s: Status) {
        let mut g = self.lock();
        if g.status != Status::STOPPED {
            g.status = s;
        }
    }

    /// Records the exit (`status`: code, or 128 + signal) after its output drained,
    /// and wakes the waiters.
    pub fn exited(&self, status: i32) {
        if let Some(io) = self.io.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            io.drain(Duration::from_secs(2));
        }
        let mut g = self.lock();
        g.status = Status::STOPPED;
        g.exit_status = status as u32;
        g.exited_at = containerd_shim::util::timestamp().ok();
        self.exited.notify_all();
    }

    /// Blocks until the process exited; returns its state then.
    pub fn wait(&self) -> ProcState {
        let mut g = self.lock();
        while g.status != Status::STOPPED {
            g = self.exited.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g.clone()
    }
}
