#!/usr/bin/python3
"""A minimal Kubernetes CRI (runtime.v1) client: the calls the kubelet makes to run a
pod, enough to drive containerd's CRI plugin as Kubernetes would, without crictl
(not packaged in Debian 12). Messages are encoded by hand (protobuf wire format,
field numbers of k8s.io/cri-api runtime/v1 api.proto); grpcio carries them.

    cri.py SOCK version
    cri.py SOCK runp NAME HANDLER [KEY=VALUE...]    -> pod id (host network)
    cri.py SOCK create POD POD-NAME NAME IMAGE ARGS-JSON [KEY=VALUE...]  -> container id
    cri.py SOCK pods                                -> one pod id a line
    cri.py SOCK start CID
    cri.py SOCK status CID                          -> JSON {state, exit_code, reason}
    cri.py SOCK exec CID CMD...                     -> its stdout; exits with its status
    cri.py SOCK stop CID [TIMEOUT-S] | rm CID       (one container: SIGTERM, then SIGKILL)
    cri.py SOCK stopp POD | rmp POD

$CRI_LOGS is the pod's log directory, $CRI_CGROUP_PARENT its cgroup parent. runp and
create take the pod's name and annotations (create repeats the sandbox
config, as the kubelet does). $CRI_USERNS="HOST:SIZE" makes the pod user-namespaced
as `hostUsers: false` does: NamespaceOption.userns_options with mode POD and the
mapping container 0..SIZE-1 -> HOST.. for uids and gids (the kubelet allocates it;
CRI v1 since Kubernetes 1.27), given to the sandbox and to each container, as the
kubelet does. $CRI_NETWORK=pod gives the pod its own network namespace (default: the
host's). $CRI_PID=container gives each container its own pid namespace (default:
the pod's, shareProcessNamespace). $CRI_VOLUMES="HOST:CONTAINER[:idmap],..." gives each created container those
volumes (CRI Mount, a bind mount of a host directory; ":idmap" with the pod's mapping
as the mount's uidMappings/gidMappings). Errors print the gRPC status and exit 1.
"""
import json
import os
import sys

import grpc

SERVICE = "/runtime.v1.RuntimeService/"
STATES = {0: "CREATED", 1: "RUNNING", 2: "EXITED", 3: "UNKNOWN"}


# --- protobuf wire format ------------------------------------------------------------

def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 as two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fint(field: int, n: int) -> bytes:
    return varint(field << 3) + varint(n) if n else b""


def fbytes(field: int, b: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(b)) + b


def fstr(field: int, s: str) -> bytes:
    return fbytes(field, s.encode()) if s else b""


def fmap(field: int, m: dict) -> bytes:
    return b"".join(fbytes(field, fstr(1, k) + fstr(2, v)) for k, v in m.items())


def decode(b: bytes) -> dict:
    """field number -> list of ints (varint) or bytes (length-delimited)."""
    out, i = {}, 0
    while i < len(b):
        key, i = read_varint(b, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(b, i)
        elif wt == 2:
            n, i = read_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        out.setdefault(field, []).append(v)
    return out


def read_varint(b: bytes, i: int):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def first(d: dict, field: int, default=None):
    return d.get(field, [default])[0]


def signed32(n: int) -> int:
    n &= (1 << 32) - 1
    return n - (1 << 32) if n >= 1 << 31 else n


# --- CRI messages --------------------------------------------------------------------

def annotations(kvs) -> dict:
    return dict(kv.split("=", 1) for kv in kvs)


# CRI runtime.v1 api.proto (k8s.io/cri-api v0.27+) field numbers:
#   NamespaceOption: network = 1, pid = 2, ipc = 3, target_id = 4, userns_options = 5
#   UserNamespace: mode = 1, uids = 2, gids = 3; IDMapping: host_id = 1,
#   container_id = 2, length = 3; NamespaceMode: POD = 0, CONTAINER = 1, NODE = 2
#   LinuxSandboxSecurityContext.namespace_options = 1
#   LinuxContainerSecurityContext.namespace_options = 3; LinuxContainerConfig:
#   resources = 1, security_context = 2; ContainerConfig.linux = 15
#   LinuxContainerResources.memory_limit_in_bytes = 4
def namespace_options(userns=None) -> bytes:
    """userns: "HOST:SIZE" (default $CRI_USERNS) or "" for none."""
    # Host network (NODE = 2): no CNI needed; pid and ipc POD (0). $CRI_NETWORK=pod:
    # the pod's own network namespace (POD = 0, containerd runs its CNI config).
    ns = fint(1, 0 if os.environ.get("CRI_NETWORK") == "pod" else 2)
    if os.environ.get("CRI_PID") == "container":
        # $CRI_PID=container: a pid namespace per container (CONTAINER = 1), the
        # kubelet's default (shareProcessNamespace: false).
        ns += fint(2, 1)
    if userns is None:
        userns = os.environ.get("CRI_USERNS", "")
    if userns:
        host, size = (int(x) for x in userns.split(":"))
        idmap = fint(1, host) + fint(2, 0) + fint(3, size)
        # mode POD (0) is the default value: not encoded.
        ns += fbytes(5, fbytes(2, idmap) + fbytes(3, idmap))
    return ns


def sandbox_config(name: str, annots: dict, userns=None) -> bytes:
    meta = fstr(1, name) + fstr(2, f"uid-{name}") + fstr(3, "siloc-e2e") + fint(4, 0)
    security = fbytes(1, namespace_options(userns))
    linux = fstr(1, os.environ.get("CRI_CGROUP_PARENT", "")) + fbytes(2, security)
    return (fbytes(1, meta) + fstr(3, os.environ.get("CRI_LOGS", "/tmp")) +
            fmap(7, annots) + fbytes(8, linux))


def call(chan, method: str, req: bytes, timeout: float = 120) -> dict:
    rpc = chan.unary_unary(SERVICE + method, request_serializer=lambda b: b,
                           response_deserializer=lambda b: b)
    return decode(rpc(req, timeout=timeout))


def mount_config(volume: str, userns: str) -> bytes:
    """A CRI Mount from "HOST:CONTAINER[:idmap]" (api.proto Mount, k8s.io/cri-api
    v0.28+: container_path = 1, host_path = 2, readonly = 3, uidMappings = 6,
    gidMappings = 7). ":idmap" gives the mount the pod's mapping (userns "HOST:SIZE")
    as its uid and gid mappings."""
    host, ctr, *opts = volume.split(":")
    m = fstr(1, ctr) + fstr(2, host)
    if "idmap" in opts and userns:
        h, size = (int(x) for x in userns.split(":"))
        idmap = fint(1, h) + fint(2, 0) + fint(3, size)
        m += fbytes(6, idmap) + fbytes(7, idmap)
    return m


def create_request(pod: str, pod_name: str, name: str, image: str, cargs, annots: dict,
                   userns=None) -> bytes:
    """CreateContainerRequest: pod_sandbox_id = 1, config = 2, sandbox_config = 3.
    ContainerConfig: metadata = 1, image = 2, args = 4, mounts = 7, log_path = 11,
    linux = 15. $CRI_VOLUMES="HOST:CONTAINER[:idmap],..." adds volumes (bind mounts)."""
    if userns is None:
        userns = os.environ.get("CRI_USERNS", "")
    cfg = (fbytes(1, fstr(1, name)) + fbytes(2, fstr(1, image)) +
           b"".join(fstr(4, a) for a in cargs) +
           b"".join(fbytes(7, mount_config(v, userns))
                    for v in os.environ.get("CRI_VOLUMES", "").split(",") if v) +
           fstr(11, f"{name}.log"))
    linux = b""
    if os.environ.get("CRI_MEMORY"):
        # $CRI_MEMORY: the container's memory limit in bytes (resources.limits.memory).
        linux += fbytes(1, fint(4, int(os.environ["CRI_MEMORY"])))
    if userns or os.environ.get("CRI_PID"):
        # The kubelet gives each container the pod's namespace options.
        linux += fbytes(2, fbytes(3, namespace_options(userns)))
    if linux:
        cfg += fbytes(15, linux)
    # The kubelet repeats the pod's sandbox config with every container.
    return fstr(1, pod) + fbytes(2, cfg) + fbytes(3, sandbox_config(pod_name, annots, userns))


def main(argv) -> int:
    sock, cmd, args = argv[1], argv[2], argv[3:]
    chan = grpc.insecure_channel("unix://" + sock)
    if cmd == "version":
        r = call(chan, "Version", fstr(1, "v1"))
        print(first(r, 2, b"").decode(), first(r, 3, b"").decode(), first(r, 4, b"").decode())
    elif cmd == "runp":
        name, handler, annots = args[0], args[1], annotations(args[2:])
        r = call(chan, "RunPodSandbox", fbytes(1, sandbox_config(name, annots)) + fstr(2, handler))
        print(first(r, 1).decode())
    elif cmd == "create":
        pod, pod_name, name, image = args[:4]
        cargs, annots = json.loads(args[4]), annotations(args[5:])
        req = create_request(pod, pod_name, name, image, cargs, annots)
        print(first(call(chan, "CreateContainer", req), 1).decode())
    elif cmd == "start":
        call(chan, "StartContainer", fstr(1, args[0]))
    elif cmd == "status":
        st = decode(first(call(chan, "ContainerStatus", fstr(1, args[0])), 1, b""))
        print(json.dumps({"state": STATES.get(first(st, 3, 0)),
                          "exit_code": signed32(first(st, 7, 0)),
                          "reason": first(st, 10, b"").decode()}))
    elif cmd == "exec":
        req = fstr(1, args[0]) + b"".join(fstr(2, a) for a in args[1:]) + fint(3, 60)
        r = call(chan, "ExecSync", req)
        sys.stdout.buffer.write(first(r, 1, b""))
        sys.stderr.buffer.write(first(r, 2, b""))
        return signed32(first(r, 3, 0))
    elif cmd == "pods":
        r = call(chan, "ListPodSandbox", b"")
        for item in r.get(1, []):
            print(first(decode(item), 1, b"").decode())
    elif cmd == "ps":
        # ListContainersResponse: containers = 1; Container: id = 1, pod_sandbox_id = 2,
        # state = 6. One "ID STATE" a line.
        r = call(chan, "ListContainers", b"")
        for item in r.get(1, []):
            c = decode(item)
            print(first(c, 1, b"").decode(), STATES.get(first(c, 6, 0)))
    elif cmd == "stop":
        # StopContainerRequest: container_id = 1, timeout = 2 (seconds).
        call(chan, "StopContainer", fstr(1, args[0]) + fint(2, int(args[1]) if args[1:] else 10))
    elif cmd == "rm":
        call(chan, "RemoveContainer", fstr(1, args[0]))
    elif cmd == "stopp":
        call(chan, "StopPodSandbox", fstr(1, args[0]))
    elif cmd == "rmp":
        call(chan, "RemovePodSandbox", fstr(1, args[0]))
    else:
        print(f"cri.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except grpc.RpcError as e:
        print(f"cri.py {' '.join(sys.argv[2:3])}: {e.code().name}: {e.details()}", file=sys.stderr)
        sys.exit(1)
