//! Terminals for foreground `run`/`exec` (runc's behaviour when `process.terminal` is
//! true and no `--console-socket` is given): siloc listens on its own console socket,
//! receives the pty master (SCM_RIGHTS, runtime-spec "Console socket"), and relays it
//! to its own stdin/stdout, in raw mode when stdin is a terminal.

use std::io::{IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use nix::sys::termios::{self, SetArg, Termios};

/// Errors of the console socket and relay.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TtyError {
    #[error("console socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("console socket {0}: the container sent no pty master")]
    NoMaster(PathBuf),
}

/// A listening console socket that removes its file when dropped.
pub(crate) struct ConsoleSocket {
    path: PathBuf,
    listener: UnixListener,
}

impl ConsoleSocket {
    /// Binds `<dir>/siloc-console-<pid>.sock`.
    pub(crate) fn bind(dir: &Path) -> Result<ConsoleSocket, TtyError> {
        let path = dir.join(format!("siloc-console-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|source| TtyError::Socket {
            path: path.clone(),
            source,
        })?;
        Ok(ConsoleSocket { path, listener })
    }

    /// The socket's path, for libcontainer's `with_console_socket`.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts the container's connection and receives the pty master. The container
    /// has sent it by the time `create` returns; `timeout` only guards against a bug.
    pub(crate) fn receive_master(&self, timeout: Duration) -> Result<OwnedFd, TtyError> {
        let no_master = || TtyError::NoMaster(self.path.clone());
        let mut pfd = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
        let ms = PollTimeout::try_from(timeout.as_millis() as i32).unwrap_or(PollTimeout::MAX);
        if poll(&mut pfd, ms).map_err(|_| no_master())? == 0 {
            return Err(no_master());
        }
        let (conn, _) = self.listener.accept().map_err(|source| TtyError::Socket {
            path: self.path.clone(),
            source,
        })?;
        let mut buf = [0u8; 4096];
        let mut iov = [IoSliceMut::new(&mut buf)];
        let mut cmsg = nix::cmsg_space!([RawFd; 1]);
        let msg = recvmsg::<()>(
            conn.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::empty(),
        )
        .map_err(|_| no_master())?;
        for c in msg.cmsgs().map_err(|_| no_master())? {
            if let ControlMessageOwned::ScmRights(fds) = c
                && let Some(&fd) = fds.first()
            {
                // SAFETY: SCM_RIGHTS just installed this fd in our table; we own it.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
        Err(no_master())
    }
}

impl Drop for ConsoleSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Copies our window size to the pty (TIOCGWINSZ on stdin, TIOCSWINSZ on master).
pub(crate) fn copy_window_size(master: RawFd) {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: both ioctls take a pointer to a winsize that lives across the calls.
    unsafe {
        if libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) == 0 {
            libc::ioctl(master, libc::TIOCSWINSZ, &ws);
        }
    }
}

/// The window size of our stdin when it is a terminal: (rows, columns), `None` when
/// stdin is no terminal or its size is 0x0 (TIOCGWINSZ, tty_ioctl(4)).
pub(crate) fn caller_window_size() -> Option<(u16, u16)> {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize, which lives across the call.
    let r = unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_row > 0 && ws.ws_col > 0).then_some((ws.ws_row, ws.ws_col))
}

/// A running relay between our stdio and a pty master.
pub(crate) struct Relay {
    master: OwnedFd,
    saved: Option<Termios>,
    out_done: mpsc::Receiver<()>,
    _out: JoinHandle<()>,
}

impl Relay {
    /// Starts copying stdin → master (detached thread) and master → stdout.
    pub(crate) fn start(master: OwnedFd) -> std::io::Result<Relay> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok();
        if let Some(t) = &saved {
            let mut raw = t.clone();
            termios::cfmakeraw(&mut raw);
            let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw);
            copy_window_size(master.as_raw_fd());
        }
        let mut to_master = std::fs::File::from(master.try_clone()?);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            let mut input = std::io::stdin().lock();
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 || to_master.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        let mut from_master = std::fs::File::from(master.try_clone()?);
        let (tx, out_done) = mpsc::channel();
        let out = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            let mut out = std::io::stdout();
            // EIO once every slave fd is closed: the container side is gone.
            while let Ok(n) = from_master.read(&mut buf) {
                if n == 0 || out.write_all(&buf[..n]).and_then(|_| out.flush()).is_err() {
                    break;
                }
            }
            let _ = tx.send(());
        });
        Ok(Relay {
            master,
            saved,
            out_done,
            _out: out,
        })
    }

    /// The master fd, for window-size changes.
    pub(crate) fn master(&self) -> BorrowedFd<'_> {
        self.master.as_fd()
    }

    /// After the container process exited: lets the output drain (bounded by
    /// `timeout`, in case something in the container still holds the pty), then
    /// restores the terminal.
    pub(crate) fn finish(self, timeout: Duration) {
        let _ = self.out_done.recv_timeout(timeout);
        if let Some(t) = &self.saved {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, t);
        }
    }
}
