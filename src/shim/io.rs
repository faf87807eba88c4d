//! A process's stdio, as containerd's runc shim gives it: containerd names FIFOs
//! (stdin, stdout, stderr; an empty name is none). Without a terminal the process gets
//! pipes and shim threads copy between them and the FIFOs, so the process never holds
//! a FIFO (a restarted containerd reopens them) and stdin can be closed on CloseIO.
//! With a terminal, siloc sends the pty master over `--console-socket` (runc's
//! protocol: one SCM_RIGHTS message) and the threads copy between it and the FIFOs;
//! ResizePty sets its window size (TIOCSWINSZ).
//!
//! The pipes are chowned to the container's root (its host IDs) once they are known,
//! so a process in a user namespace can reopen /dev/stdout (/proc/self/fd/1).

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Result, ShimError, io_at};
use crate::runtime::ChildStdio;

/// The FIFO names containerd gave for one process.
#[derive(Debug, Clone, Default)]
pub struct Fifos {
    pub stdin: String,
    pub stdout: String,
    pub stderr: String,
    pub terminal: bool,
}

/// The shim's side of one process's stdio, alive as long as the process is known.
pub struct ProcessIo {
    /// Where stdin data goes (a pipe's write end, or the pty master); None once closed.
    stdin: Arc<Mutex<Option<File>>>,
    /// The pty master, for ResizePty.
    console: Option<File>,
    /// One message per output copier that finished.
    done: Receiver<()>,
    done_tx: Option<Sender<()>>,
    outputs: usize,
    /// Both ends' inode of each pipe (one per pipe), for the chown.
    pipes: Vec<OwnedFd>,
    /// The console socket's directory, removed once the master arrived.
    socket_dir: Option<PathBuf>,
    socket: Option<UnixListener>,
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| ShimError::Io {
        path: "pipe".into(),
        source: e.into(),
    })
}

/// Copies `from` to the FIFO `path` until EOF, then reports on `done`. The FIFO is
/// opened as containerd's runc shim opens it, with a read side of the shim's own
/// ([`open_fifo`]): the output goes into the FIFO whether or not containerd reads it
/// yet, a containerd restart does not end it (writes wait in the pipe for the new
/// reader), and nothing waits for a reader that never comes (`ctr run -d`, an exec
/// whose FIFO containerd removed). A FIFO already removed: the output is drained.
fn copy_out(mut from: File, path: String, done: Sender<()>) {
    std::thread::spawn(move || {
        match open_fifo(&path) {
            Ok(Some((mut to, _hold))) => {
                let mut buf = [0u8; 32 * 1024];
                loop {
                    match from.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            if to.write_all(&buf[..n]).is_err() {
                                // Keep draining so the process never blocks.
                                let _ = std::io::copy(&mut from, &mut std::io::sink());
                                break;
                            }
                        }
                        // EIO: a pty whose last slave closed.
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
            }
            Ok(None) => {
                log::warn!("stdio fifo {path} removed before the shim opened it");
                let _ = std::io::copy(&mut from, &mut std::io::sink());
            }
            Err(e) => {
                log::warn!("open stdio fifo {path}: {e}");
                let _ = std::io::copy(&mut from, &mut std::io::sink());
            }
        }
        let _ = done.send(());
    });
}

/// Clears `O_NONBLOCK` on `f`: a FIFO opened without waiting, used with blocking I/O.
fn set_blocking(f: &File) -> nix::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let fl = OFlag::from_bits_retain(fcntl(f.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(f.as_raw_fd(), FcntlArg::F_SETFL(fl - OFlag::O_NONBLOCK)).map(drop)
}

/// Opens `path` for reading or (`read` false) writing with `O_NONBLOCK`.
fn open_nonblocking(path: &str, read: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(read)
        .write(!read)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Opens FIFO `path` for writing, and for reading first (`O_NONBLOCK`: fifo(7) lets a
/// read side open without a writer; it is never read), so the write side opens at
/// once instead of waiting for containerd's reader; then the write side blocks as
/// usual (a slow reader slows the process, as with runc's shim). Returns
/// `(write side, read side to hold)`; `Ok(None)`: the FIFO does not exist (removed).
fn open_fifo(path: &str) -> std::io::Result<Option<(File, File)>> {
    let hold = match open_nonblocking(path, true) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let to = open_nonblocking(path, false)?;
    set_blocking(&to)?;
    Ok(Some((to, hold)))
}

/// Copies the stdin FIFO `path` into `to` until EOF, then closes `to`.
fn copy_in(path: String, to: Arc<Mutex<Option<File>>>) {
    std::thread::spawn(move || {
        let mut from = match File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                log::warn!("open stdin fifo {path}: {e}");
                return;
            }
        };
        let mut buf = [0u8; 32 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut g = to.lock().unwrap_or_else(|p| p.into_inner());
            let written = g.as_mut().is_some_and(|w| w.write_all(&buf[..n]).is_ok());
            if !written {
                break;
            }
        }
        // EOF on stdin closes the process's stdin (a pty gets its EOF character instead).
        let mut g = to.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = g.take()
            && nix::unistd::isatty(w.as_raw_fd()).unwrap_or(false)
        {
            let _ = (&w).write_all(&[4]);
            *g = Some(w);
        }
    });
}

impl ProcessIo {
    /// Sets up stdio for a process about to be made by siloc. Returns the shim's side
    /// and what siloc's command gets (the process's pipes; /dev/null for a terminal,
    /// whose stdio is the pty).
    pub fn new(f: &Fifos) -> Result<(ProcessIo, ChildStdio)> {
        let (done_tx, done) = channel();
        let mut io = ProcessIo {
            stdin: Arc::new(Mutex::new(None)),
            console: None,
            done,
            done_tx: Some(done_tx),
            outputs: 0,
            pipes: Vec::new(),
            socket_dir: None,
            socket: None,
        };
        let mut child = ChildStdio::default();
        if f.terminal {
            let dir = console_dir()?;
            let sock = dir.join("pty.sock");
            let l = UnixListener::bind(&sock).map_err(io_at(&sock));
            io.socket_dir = Some(dir);
            io.socket = Some(l?);
            return Ok((io, child));
        }
        if !f.stdin.is_empty() {
            let (r, w) = pipe()?;
            io.pipes.push(w.try_clone().map_err(io_at("pipe"))?);
            *io.stdin.lock().unwrap_or_else(|p| p.into_inner()) = Some(File::from(w));
            copy_in(f.stdin.clone(), io.stdin.clone());
            child.stdin = Some(r);
        }
        for (name, slot) in [
            (&f.stdout, &mut child.stdout),
            (&f.stderr, &mut child.stderr),
        ] {
            if name.is_empty() {
                continue;
            }
            let (r, w) = pipe()?;
            io.pipes.push(r.try_clone().map_err(io_at("pipe"))?);
            if let Some(tx) = &io.done_tx {
                copy_out(File::from(r), name.clone(), tx.clone());
            }
            io.outputs += 1;
            *slot = Some(w);
        }
        Ok((io, child))
    }

    /// The `--console-socket` path, for a terminal.
    pub fn console_socket(&self) -> Option<PathBuf> {
        self.socket_dir.as_ref().map(|d| d.join("pty.sock"))
    }

    /// After siloc's create or exec succeeded: takes the pty master siloc sent (it is
    /// queued on the socket by now) and starts copying. Errors name the socket.
    pub fn receive_console(&mut self, f: &Fifos) -> Result<()> {
        let Some(l) = self.socket.take() else {
            return Ok(());
        };
        let path = self.console_socket().unwrap_or_default();
        l.set_nonblocking(true).map_err(io_at(&path))?;
        let (conn, _) = l.accept().map_err(|e| ShimError::Io {
            path: path.clone(),
            source: std::io::Error::new(e.kind(), format!("siloc sent no pty master: {e}")),
        })?;
        conn.set_nonblocking(false).map_err(io_at(&path))?;
        let master = recv_fd(&conn).map_err(io_at(&path))?;
        self.remove_socket();
        let out = master.try_clone().map_err(io_at(&path))?;
        if !f.stdout.is_empty()
            && let Some(tx) = &self.done_tx
        {
            copy_out(out, f.stdout.clone(), tx.clone());
            self.outputs += 1;
        }
        if !f.stdin.is_empty() {
            *self.stdin.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(master.try_clone().map_err(io_at(&path))?);
            copy_in(f.stdin.clone(), self.stdin.clone());
        }
        self.console = Some(master);
        Ok(())
    }

    /// Gives the pipes to the container's root (`uid`, `gid` on the host), then forgets them.
    pub fn chown_pipes(&mut self, uid: u32, gid: u32) {
        for p in self.pipes.drain(..) {
            if let Err(e) = nix::unistd::fchown(p.as_raw_fd(), Some(uid.into()), Some(gid.into())) {
                log::warn!("chown stdio pipe to {uid}:{gid}: {e}");
            }
        }
    }

    /// Closes the process's stdin (CloseIO).
    pub fn close_stdin(&self) {
        let mut g = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        if self.console.is_some()
            && let Some(w) = g.as_ref()
        {
            let _ = (&*w).write_all(&[4]);
        }
        g.take();
    }

    /// Sets the terminal's size (ResizePty); no terminal is not an error.
    pub fn resize(&self, width: u32, height: u32) -> Result<()> {
        let Some(c) = &self.console else {
            return Ok(());
        };
        let ws = libc::winsize {
            ws_row: height as u16,
            ws_col: width as u16,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from the pointer, which lives across the call.
        let r = unsafe { libc::ioctl(c.as_raw_fd(), libc::TIOCSWINSZ, &ws) };
        if r < 0 {
            return Err(ShimError::Io {
                path: "pty".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Waits (up to `limit`) for the output copiers to reach EOF: a process's last
    /// output reaches containerd before its exit event.
    pub fn drain(&mut self, limit: Duration) {
        self.done_tx = None;
        let deadline = std::time::Instant::now() + limit;
        while self.outputs > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if self.done.recv_timeout(left).is_err() {
                log::warn!("stdio still open {limit:?} after the process exited");
                break;
            }
            self.outputs -= 1;
        }
    }

    fn remove_socket(&mut self) {
        if let Some(d) = self.socket_dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Drop for ProcessIo {
    fn drop(&mut self) {
        self.remove_socket();
    }
}

/// A fresh private directory for a console socket (unix socket paths are short, so
/// not in the bundle).
fn console_dir() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let base = std::env::temp_dir();
    for _ in 0..100 {
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = base.join(format!("siloc-shim-pty-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_at(&d)(e)),
        }
    }
    Err(ShimError::Invalid(
        "no free console socket directory".into(),
    ))
}

/// Receives one fd sent with SCM_RIGHTS on `conn`.
fn recv_fd(conn: &std::os::unix::net::UnixStream) -> std::io::Result<File> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut buf = [0u8; 4096];
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let msg = recvmsg::<()>(
        conn.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    for c in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c
            && let Some(&fd) = fds.first()
        {
            // SAFETY: the kernel just installed this fd in our table; we own it now.
            return Ok(unsafe { File::from_raw_fd(fd) });
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "no file descriptor in the console socket message",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(dir: &tempfile::TempDir) -> String {
        let p = dir.path().join("stdout");
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        p.display().to_string()
    }

    /// A copier from a new pipe to the FIFO `path`: the pipe's write side (the
    /// process's stdout) and the copier's `done`.
    fn copier(path: &str) -> (File, Receiver<()>) {
        let (r, w) = pipe().unwrap();
        let (tx, rx) = channel();
        copy_out(File::from(r), path.to_string(), tx);
        (File::from(w), rx)
    }

    /// The break-it report's leak: containerd removed an exec's FIFO before any reader
    /// opened it; the copier must end (a blocking open(2) never returned).
    #[test]
    fn a_fifo_removed_unread_ends_the_copier() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(&dir);
        let (mut w, rx) = copier(&path);
        w.write_all(b"lost").unwrap();
        drop(w);
        std::thread::sleep(Duration::from_millis(100));
        std::fs::remove_file(&path).unwrap();
        rx.recv_timeout(Duration::from_secs(5))
            .expect("the copier still waits for a reader of a removed FIFO");
    }

    /// containerd restarting: its reader goes away and a new one comes; what the
    /// process writes in between reaches the new reader (it was dropped on EPIPE).
    #[test]
    fn output_survives_a_reader_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(&dir);
        let first = std::thread::spawn({
            let path = path.clone();
            move || File::open(path).unwrap()
        });
        let (mut w, rx) = copier(&path);
        let mut first = first.join().unwrap();
        w.write_all(b"one\n").unwrap();
        let mut buf = [0u8; 4];
        first.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"one\n");
        drop(first);
        w.write_all(b"two\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // Non-blocking open: without a writer left, a blocking one would hang the test.
        let mut second = open_nonblocking(&path, true).unwrap();
        set_blocking(&second).unwrap();
        drop(w);
        let mut got = String::new();
        second.read_to_string(&mut got).unwrap();
        assert_eq!(got, "two\n");
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
    }

    /// A reader that comes after the output was written, while the process lives,
    /// gets it (it waited in the FIFO); the write side blocks once open.
    #[test]
    fn a_late_reader_gets_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(&dir);
        let (mut w, rx) = copier(&path);
        w.write_all(b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut late = File::open(&path).unwrap();
        drop(w);
        let mut got = String::new();
        late.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello");
        rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let (to, _hold) = open_fifo(&path).unwrap().unwrap();
        let fl = nix::fcntl::fcntl(to.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_eq!(fl & libc::O_NONBLOCK, 0, "the write side blocks");
    }

    /// `ctr run -d`: nobody ever reads; a process that exits ends the copier at
    /// once, so the exit is not held up by the shim's 2 s drain.
    #[test]
    fn no_reader_ever_does_not_hold_the_exit() {
        let dir = tempfile::tempdir().unwrap();
        let path = fifo(&dir);
        let (mut w, rx) = copier(&path);
        w.write_all(b"unread").unwrap();
        drop(w);
        rx.recv_timeout(Duration::from_millis(500))
            .expect("the copier waits for a reader that never comes");
    }
}
