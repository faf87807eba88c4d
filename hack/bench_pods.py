#!/usr/bin/python3
"""hack/bench-pods' CRI driver: starts N pods at once through containerd's CRI plugin
(RunPodSandbox, CreateContainer, StartContainer per pod, each pod in its own thread,
as the kubelet's pod workers do) and stops and removes them, with
integration/lib/cri.py's messages.

    bench_pods.py storm SOCK --n N --handler H --image REF --tag T [--annot K=V]...
                        [--userns-base HOST] [--batch B] [--out FILE]
    bench_pods.py teardown SOCK [--parallel P]
    bench_pods.py watch --out FILE

storm prints one progress line per B pods running, then (to --out) a JSON object:
    {"n", "running", "failed", "error": first error or "", "wall_s": first request
     to the last StartContainer reply, "t_end_mono": CLOCK_MONOTONIC s at the end,
     "mountinfo_start", "mountinfo_peak": lines of
     /proc/self/mountinfo (this mount namespace, containerd's), polled every 20 ms}
--userns-base makes every pod user-namespaced as `hostUsers: false` does (CRI
userns_options, mode POD): pod i gets container 0..65535 -> HOST + i*65536, as the
kubelet hands out 65536-ID ranges. The container runs `sleep 1000000` (busybox).
teardown stops and removes every pod (StopPodSandbox, RemovePodSandbox), P at once.
watch counts the mount-table changes of this mount namespace until SIGTERM: fanotify's
mount events (FAN_MNT_ATTACH, FAN_MNT_DETACH on a FAN_MARK_MNTNS mark, Linux 6.15+),
which see every mount attached or detached, the short-lived ones too (containerd's
per-layer idmapped mounts), whichever process makes them; then writes to FILE
{"attach": [CLOCK_MONOTONIC s of each], "detach": [...], "overflow": bool}.
"""
import argparse
import concurrent.futures as cf
import ctypes
import json
import os
import select
import signal
import struct
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration", "lib"))
sys.dont_write_bytecode = True  # no __pycache__ in the tree
import cri  # noqa: E402

TIMEOUT = 900  # seconds per CRI call: 100 pods queue in containerd on 2 cores


def mountinfo_lines() -> int:
    with open("/proc/self/mountinfo", "rb") as f:
        return f.read().count(b"\n")


class Peak(threading.Thread):
    """Polls the length of /proc/self/mountinfo until stopped; keeps the peak."""

    def __init__(self):
        super().__init__(daemon=True)
        self.start_len = self.peak = mountinfo_lines()
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.02):
            self.peak = max(self.peak, mountinfo_lines())


def one_pod(chan, args, i: int) -> None:
    name = f"{args.tag}-{i}"
    annots = cri.annotations(args.annot)
    userns = f"{args.userns_base + i * 65536}:65536" if args.userns_base else ""
    req = cri.fbytes(1, cri.sandbox_config(name, annots, userns)) + cri.fstr(2, args.handler)
    pod = cri.first(cri.call(chan, "RunPodSandbox", req, TIMEOUT), 1).decode()
    creq = cri.create_request(pod, name, f"{name}-app", args.image, ["sleep", "1000000"],
                              annots, userns)
    cid = cri.first(cri.call(chan, "CreateContainer", creq, TIMEOUT), 1).decode()
    cri.call(chan, "StartContainer", cri.fstr(1, cid), TIMEOUT)


def storm(args) -> int:
    chan = grpc.insecure_channel("unix://" + args.sock)
    peak = Peak()
    peak.start()
    running = failed = 0
    error = ""
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(max_workers=args.n) as ex:
        futs = [ex.submit(one_pod, chan, args, i) for i in range(args.n)]
        for fut in cf.as_completed(futs):
            try:
                fut.result()
                running += 1
            except grpc.RpcError as e:
                failed += 1
                error = error or f"{e.code().name}: {e.details()}"
            done = running + failed
            if done % args.batch == 0 or done == args.n:
                print(f"  {args.tag}: {running}/{args.n} pods running"
                      f"{f', {failed} failed' if failed else ''}, "
                      f"{time.monotonic() - t0:.1f} s, mountinfo {peak.peak} lines (peak)",
                      flush=True)
    wall = time.monotonic() - t0
    peak.done.set()
    peak.join()
    res = {"n": args.n, "running": running, "failed": failed, "error": error,
           "wall_s": round(wall, 3), "t_end_mono": time.monotonic(),
           "mountinfo_start": peak.start_len,
           "mountinfo_peak": peak.peak}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f)
    print(json.dumps(res))
    return 0


def teardown(args) -> int:
    chan = grpc.insecure_channel("unix://" + args.sock)
    pods = [cri.first(cri.decode(item), 1, b"").decode()
            for item in cri.call(chan, "ListPodSandbox", b"").get(1, [])]

    def rm(pod):
        cri.call(chan, "StopPodSandbox", cri.fstr(1, pod), TIMEOUT)
        cri.call(chan, "RemovePodSandbox", cri.fstr(1, pod), TIMEOUT)

    t0 = time.monotonic()
    errors = []
    with cf.ThreadPoolExecutor(max_workers=args.parallel) as ex:
        for fut in [ex.submit(rm, p) for p in pods]:
            try:
                fut.result()
            except grpc.RpcError as e:
                errors.append(f"{e.code().name}: {e.details()}")
    print(f"  removed {len(pods) - len(errors)}/{len(pods)} pods in "
          f"{time.monotonic() - t0:.1f} s", flush=True)
    for e in errors[:3]:
        print(f"  teardown error: {e}", file=sys.stderr)
    return 1 if errors else 0


# include/uapi/linux/fanotify.h (Linux 6.15): mount events of a mount namespace.
FAN_REPORT_MNT = 0x00004000
FAN_MARK_ADD = 0x00000001
FAN_MARK_MNTNS = 0x00000110
FAN_MNT_ATTACH = 0x01000000
FAN_MNT_DETACH = 0x02000000
FAN_Q_OVERFLOW = 0x00004000
EVENT = struct.Struct("IBBHQii")  # struct fanotify_event_metadata


def watch(args) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64,
                                   ctypes.c_int, ctypes.c_char_p]
    fd = libc.fanotify_init(FAN_REPORT_MNT, os.O_RDONLY)
    if fd < 0:
        print(f"watch: fanotify_init(FAN_REPORT_MNT): {os.strerror(ctypes.get_errno())} "
              "(mount events need Linux 6.15+)", file=sys.stderr)
        return 1
    ns = os.open("/proc/self/ns/mnt", os.O_RDONLY)
    if libc.fanotify_mark(fd, FAN_MARK_ADD | FAN_MARK_MNTNS,
                          FAN_MNT_ATTACH | FAN_MNT_DETACH, ns, None) < 0:
        print(f"watch: fanotify_mark(FAN_MARK_MNTNS): {os.strerror(ctypes.get_errno())}",
              file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    res = {"attach": [], "detach": [], "overflow": False}
    # Ready for the caller once the mark is in place.
    with open(args.out + ".ready", "w"):
        pass
    while True:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            if stop.is_set():
                break
            continue
        buf = os.read(fd, 1 << 16)
        now = time.monotonic()
        i = 0
        while i + EVENT.size <= len(buf):
            length, _, _, _, mask, _, _ = EVENT.unpack_from(buf, i)
            if mask & FAN_MNT_ATTACH:
                res["attach"].append(round(now, 4))
            if mask & FAN_MNT_DETACH:
                res["detach"].append(round(now, 4))
            if mask & FAN_Q_OVERFLOW:
                res["overflow"] = True
            i += max(length, EVENT.size)
    with open(args.out, "w") as f:
        json.dump(res, f)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(prog="bench_pods.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("storm")
    s.add_argument("sock")
    s.add_argument("--n", type=int, required=True)
    s.add_argument("--handler", required=True)
    s.add_argument("--image", required=True)
    s.add_argument("--tag", required=True)
    s.add_argument("--annot", action="append", default=[])
    s.add_argument("--userns-base", type=int, default=0)
    s.add_argument("--batch", type=int, default=10)
    s.add_argument("--out")
    t = sub.add_parser("teardown")
    t.add_argument("sock")
    t.add_argument("--parallel", type=int, default=8)
    w = sub.add_parser("watch")
    w.add_argument("--out", required=True)
    args = p.parse_args()
    return {"storm": storm, "teardown": teardown, "watch": watch}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
