#!/usr/bin/env python3
"""Runs a command on a new pseudo-terminal, as a person at a terminal would.

    ptyrun.py [--timeout S] [--rows R --cols C] [--expect REGEX --send TEXT]... -- CMD...

CMD gets the pty slave as its controlling terminal and stdin/stdout/stderr, with the
window size ROWSxCOLS (default 24x80). Everything it writes is copied to our stdout.
Each --expect/--send pair waits until the output so far matches REGEX (Python re,
searched from where the previous match ended), then types TEXT (backslash escapes
such as \\n are interpreted). Exits with CMD's exit status (128+N for signal N), or
124 when CMD has not finished within S seconds (default 60; CMD is then killed),
125 when an --expect never matched.
"""
import argparse
import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--cols", type=int, default=80)
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--send", action="append", default=[])
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args()
    if len(a.expect) != len(a.send):
        ap.error("--expect and --send come in pairs")
    steps = [(re.compile(e), s.encode().decode("unicode_escape").encode())
             for e, s in zip(a.expect, a.send)]

    pid, master = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", a.rows, a.cols, 0, 0))
        try:
            os.execvp(a.cmd[0], a.cmd)
        except OSError as e:
            os.write(2, f"ptyrun: {a.cmd[0]}: {e}\n".encode())
            os._exit(127)

    deadline = time.monotonic() + a.timeout
    seen = b""
    pos = 0
    status = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            sys.stdout.buffer.write(b"\nptyrun: timed out\n")
            return 124
        r, _, _ = select.select([master], [], [], min(left, 0.2))
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every slave fd is closed
                data = b""
            if not data:
                break
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            seen += data
            while steps:
                m = steps[0][0].search(seen.decode("utf-8", "replace"), pos)
                if not m:
                    break
                pos = m.end()
                os.write(master, steps.pop(0)[1])
        elif status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                # The slave may still be open in a grandchild; give output a moment.
                deadline = min(deadline, time.monotonic() + 2)
    if status is None:
        _, status = os.waitpid(pid, 0)
    if steps:
        sys.stdout.buffer.write(f"\nptyrun: never saw {steps[0][0].pattern!r}\n".encode())
        return 125
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
