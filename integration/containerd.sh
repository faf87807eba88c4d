#!/usr/bin/env bash
# containerd 1.6, started here from a temp dir (its own root, state, socket, config),
# twice:
#
# 1. no CRI, driven with ctr: `ctr run --runc-binary <built siloc>` makes the runc
#    shim (containerd-shim-runc-v2) call siloc with runc's CLI: create --bundle
#    --pid-file [--console-socket], start, exec --process --detach, ps --format json,
#    kill [--all], pause, resume, delete [--force], each with --log FILE --log-format
#    json; siloc's state root is private too (--runc-root).
# 2. with the CRI plugin and a config.toml whose runtimes name siloc as BinaryName
#    (the default `runc` handler, and a `siloc` handler with a pod_annotations
#    allowlist of siloc's policy annotations), driven as the kubelet drives it
#    (integration/lib/cri.py: RunPodSandbox with a runtime handler, as a RuntimeClass
#    gives it, CreateContainer,
#    StartContainer, ExecSync, ContainerStatus, StopPodSandbox, RemovePodSandbox).
#    BinaryName is a CRI setting: ctr ignores it and needs --runc-binary.
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
. "$(dirname "$0")/lib/e2e.sh"
e2e_images busybox debian

BB=localhost/siloc/busybox:latest
DEB=localhost/siloc/debian:latest
PAUSE=localhost/siloc/pause:latest
NS=siloc-e2e
SOCK=$T/containerd.sock
SROOT=$T/siloc-root
STATE=$T/state
CTRD_PID=""
mkdir -p "$T/fifo" "$SROOT"

# config.toml with everything under T; $1: more top-level keys, $2: more tables.
write_config() {
  cat <<EOF
version = 2
root = "$T/root"
state = "$STATE"
${1:-}

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$T/opt"
${2:-}
EOF
}

CTR0=("$(type -P ctr)" --address "$SOCK")
CTR=("${CTR0[@]}" --namespace "$NS")
# ctr ARGS...: ctr on our containerd, never waiting forever.
ctr() { timeout -k 5 120 "${CTR[@]}" "$@"; }
# cri ARGS...: integration/lib/cri.py on our containerd (Debian's python3-grpcio).
cri() { timeout -k 5 120 /usr/bin/python3 "$E2E_LIB/cri.py" "$SOCK" "$@"; }
CRI_CG=siloc-e2e-cri-$$
export CRI_LOGS=$T/pod-logs CRI_CGROUP_PARENT=/$CRI_CG

# start_containerd CONFIG: starts containerd, waits for its socket. Root, state and
# socket are given as flags too: never the host's /var/lib/containerd or /run/containerd.
start_containerd() {
  grep -q "^state = \"$STATE\"" "$1" || { echo "FAIL $E2E_NAME: bad config $1"; exit 1; }
  containerd --config "$1" --root "$T/root" --state "$STATE" --address "$SOCK" \
    --log-level info >>"$T/containerd.log" 2>&1 &
  CTRD_PID=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && return; sleep 0.1; done
  cat "$T/containerd.log"
  echo "FAIL $E2E_NAME: containerd did not start"
  exit 1
}

# Stop containerd, then any shim it left (their command lines name our socket).
stop_containerd() {
  [ -n "$CTRD_PID" ] || return 0
  kill "$CTRD_PID" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$CTRD_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$CTRD_PID" 2>/dev/null || true
  wait "$CTRD_PID" 2>/dev/null || true
  CTRD_PID=""
  local p
  for p in $(pgrep -f -- "-address $SOCK" || true); do kill -9 "$p" 2>/dev/null || true; done
  rm -f "$SOCK" "$SOCK.ttrpc"
}
e2e_at_exit stop_containerd
# The cgroup parents the containers' cgroups were made in, if empty.
# shellcheck disable=SC2016 # expanded when the cleanup runs (e2e_at_exit evals it)
e2e_at_exit 'rmdir /sys/fs/cgroup/*/$NS /sys/fs/cgroup/unified/$NS /sys/fs/cgroup/*/$CRI_CG /sys/fs/cgroup/unified/$CRI_CG'
# Before containerd stops: every task killed and deleted, every container removed
# (CRI pods stopped and removed), and whatever siloc still holds deleted.
cleanup_tasks() {
  local id ns root pods=()
  [ -e "$T/pods" ] && mapfile -t pods <"$T/pods"
  for id in "${pods[@]}"; do cri stopp "$id"; cri rmp "$id"; done
  for ns in "$NS" k8s.io; do
    for id in $("${CTR0[@]}" -n "$ns" task ls -q 2>/dev/null); do
      "${CTR0[@]}" -n "$ns" task kill -a -s KILL "$id"
      "${CTR0[@]}" -n "$ns" task delete -f "$id"
    done
    for id in $("${CTR0[@]}" -n "$ns" container ls -q 2>/dev/null); do
      "${CTR0[@]}" -n "$ns" container delete "$id"
    done
  done
  for root in "$T"/siloc-root*/*/; do
    for id in $("$SILOC" --root "$root" list -q 2>/dev/null); do
      "$SILOC" --root "$root" delete --force "$id"
    done
  done
}
e2e_at_exit cleanup_tasks

write_config 'disabled_plugins = ["io.containerd.grpc.v1.cri"]' >"$T/config.toml"
start_containerd "$T/config.toml"

# The runc options that make the shim call siloc with a private root.
RUNC=(--runc-binary "$SILOC" --runc-root "$SROOT" --fifo-dir "$T/fifo")
# ctr sets the window size only after the process started (a race with runc too), so
# a shell on a ctr terminal waits for it (up to 5 s). busybox's `stty size` exits 0
# on a 0x0 pty (it only prints "stty: standard input"), so the wait looks for a size.
# shellcheck disable=SC2016 # typed into the container's shell
WAIT_SIZE='for i in $(seq 50); do case $(stty size 2>/dev/null) in [1-9]*) break;; esac; sleep 0.1; done; '
# The bundle the shim made for container ID (holds config.json and siloc's log.json).
bundle() { echo "$STATE/io.containerd.runtime.v2.task/$NS/$1"; }

c_import() {
  ctr image import "$SILOC_ARCHIVE_BUSYBOX"
  ctr image import "$SILOC_ARCHIVE_DEBIAN"
  local imgs
  imgs=$(ctr image ls -q)
  expect_match "$imgs" "^$BB\$" "ctr image ls"
  expect_match "$imgs" "^$DEB\$" "ctr image ls"
}

c_run() {
  local out rc=0
  # shellcheck disable=SC2016 # shell code for the container's shell
  out=$(ctr run --rm "${RUNC[@]}" "$BB" run1 sh -c 'echo hello from $(cat /proc/1/cmdline | tr "\0" " "); echo to-stderr >&2; exit 3' 2>&1) || rc=$?
  expect_eq "$rc" 3 "exit status of ctr run"
  expect_match "$out" '^hello from sh -c echo hello' "stdout"
  expect_match "$out" '^to-stderr$' "stderr"
  expect_eq "$(ctr container ls -q | grep -c '^run1$' || true)" 0 "--rm removed the container"
  expect_eq "$(ls "$SROOT/$NS")" "" "siloc's root after --rm"
}

c_run_tty() {
  local out rc=0
  # shellcheck disable=SC2016 # typed into the container's shell
  out=$(ptyrun --timeout 60 --rows 30 --cols 100 \
    --expect '# ' --send "${WAIT_SIZE}"'tty; stty size; echo answer=$((6*7))\n' \
    --expect 'answer=42' --send 'exit 4\n' \
    -- "${CTR[@]}" run --rm -t "${RUNC[@]}" "$BB" tty1 sh) || rc=$?
  out=$(clean_tty "$out")
  expect_eq "$rc" 4 "exit status through the terminal"
  expect_match "$out" '^/dev/pts/[0-9]+$' "tty inside"
  expect_match "$out" '^30 100$' "window size"
  expect_match "$out" '^answer=42$' "interactive input"
}

c_detached() {
  ctr run -d "${RUNC[@]}" "$BB" bg sh -c 'trap "exit 9" TERM; while :; do sleep 0.1; done'
  expect_match "$(ctr task ls)" '^bg +[0-9]+ +RUNNING$' "ctr task ls"
  local pid st
  pid=$(ctr task ls | awk '$1 == "bg" { print $2 }')
  st=$("$SILOC" --root "$SROOT/$NS" state bg)
  expect_eq "$(jq -r '"\(.status) \(.pid) \(.bundle)"' <<<"$st")" "running $pid $(bundle bg)" "siloc state"
  expect_eq "$(cat "$(bundle bg)/log.json")" "" "siloc's log (--log-format json) of a good create and start"
}

c_exec() {
  local out rc=0
  out=$(ctr task exec --exec-id e1 --fifo-dir "$T/fifo" bg sh -c 'echo in-exec; cat /proc/1/cmdline | tr "\0" " "; echo; exit 5') || rc=$?
  expect_eq "$rc" 5 "exec exit status"
  expect_match "$out" '^in-exec$' "exec output"
  expect_match "$out" '^sh -c trap' "exec joins the container"
  # shellcheck disable=SC2016 # shell code for the container's shell
  expect_eq "$(ctr task exec --exec-id e2 --fifo-dir "$T/fifo" --user 65534 --cwd /tmp bg sh -c 'echo $(id -u) $PWD')" \
    "65534 /tmp" "exec --user --cwd"
  rc=0
  out=$(ctr task exec --exec-id e3 --fifo-dir "$T/fifo" bg /no/such 2>&1) || rc=$?
  [ "$rc" != 0 ]
  expect_match "$out" 'exec: "/no/such": stat /no/such: no such file or directory' "siloc's error via log.json"
  json_log_ok "$(bundle bg)/log.json"
}

c_exec_tty() {
  local out rc=0
  # shellcheck disable=SC2016 # typed into the container's shell
  out=$(ptyrun --timeout 60 --rows 25 --cols 90 \
    --expect '# ' --send "${WAIT_SIZE}"'tty; stty size; echo exec=$((5*5))\n' \
    --expect 'exec=25' --send 'exit 6\n' \
    -- "${CTR[@]}" task exec -t --exec-id et --fifo-dir "$T/fifo" bg sh) || rc=$?
  out=$(clean_tty "$out")
  expect_eq "$rc" 6 "exec -t exit status"
  expect_match "$out" '^/dev/pts/[0-9]+$' "tty inside exec"
  expect_match "$out" '^25 90$' "exec window size"
  expect_match "$out" '^exec=25$' "interactive input"
}

c_ps_metrics() {
  ctr task exec -d --exec-id sleeper --fifo-dir "$T/fifo" bg sleep 1000
  local ps
  ps=$(ctr task ps bg)
  expect_match "$ps" "^$(ctr task ls | awk '$1 == "bg" { print $2 }') " "ctr task ps lists the init process"
  expect_match "$ps" 'ExecID:sleeper' "ctr task ps lists the exec"
  expect_match "$(ctr task metrics bg)" '^(pids\.current|memory\.usage_in_bytes|memory\.usage) ' "ctr task metrics"
}

c_pause_resume() {
  ctr task pause bg
  expect_match "$(ctr task ls)" '^bg +[0-9]+ +PAUSED$' "after pause"
  expect_eq "$(jq -r .status <<<"$("$SILOC" --root "$SROOT/$NS" state bg)")" paused "siloc state"
  ctr task resume bg
  expect_match "$(ctr task ls)" '^bg +[0-9]+ +RUNNING$' "after resume"
}

c_kill_delete() {
  ctr task kill bg # SIGTERM: the trap exits 9
  for _ in $(seq 100); do ctr task ls | grep -Eq '^bg .*STOPPED$' && break; sleep 0.1; done
  expect_match "$(ctr task ls)" '^bg +[0-9]+ +STOPPED$' "after kill"
  ctr task delete bg
  ctr container delete bg
  expect_eq "$(ls "$SROOT/$NS")" "" "siloc's root after delete"
  # The status of a killed task reaches ctr run in the foreground.
  local rc=0
  ctr run "${RUNC[@]}" "$BB" fg sh -c 'trap "exit 9" TERM; echo up; while :; do sleep 0.1; done' \
    >"$T/fg.out" 2>&1 &
  local fg=$!
  for _ in $(seq 100); do grep -q up "$T/fg.out" && break; sleep 0.1; done
  ctr task kill fg
  wait "$fg" || rc=$?
  expect_eq "$rc" 9 "ctr run's status after SIGTERM"
  ctr task delete fg || true # ctr run deleted the task already
  ctr container delete fg
  # kill --all with SIGKILL (the shim passes --all) stops init and every exec.
  ctr run -d "${RUNC[@]}" "$BB" all sleep 1000
  ctr task exec -d --exec-id x --fifo-dir "$T/fifo" all sleep 1000
  ctr task kill --all --signal KILL all
  for _ in $(seq 100); do ctr task ls | grep -Eq '^all .*STOPPED$' && break; sleep 0.1; done
  expect_match "$(ctr task ls)" '^all +[0-9]+ +STOPPED$' "after kill --all"
  ctr task delete all
  ctr container delete all
  expect_eq "$(ls "$SROOT/$NS")" "" "siloc's root after delete"
}

c_create_fails() {
  local out rc=0
  out=$(ctr run --rm "${RUNC[@]}" "$BB" nocmd /no/such 2>&1) || rc=$?
  [ "$rc" != 0 ]
  # The shim reads siloc's JSON log line and puts its message in the error.
  expect_match "$out" 'OCI runtime create failed: .*exec: "/no/such": stat /no/such: no such file or directory' \
    "ctr's error"
  ctr container delete nocmd 2>/dev/null || true
  expect_eq "$(ls "$SROOT/$NS")" "" "nothing left in siloc's root"
}

c_debian() {
  local out
  # shellcheck disable=SC2016 # shell code for the container's shell
  out=$(ctr run --rm "${RUNC[@]}" "$DEB" deb1 sh -c 'apt-get --version | head -n1; dpkg -l | grep -c "^ii"; . /etc/os-release; echo $VERSION_CODENAME')
  expect_match "$out" '^apt 2\.' "apt-get --version"
  expect_match "$out" '^[0-9]{2,}$' "dpkg -l counts installed packages"
  expect_match "$out" '^bookworm$' "os-release"
}

c_leftovers() {
  expect_eq "$(ctr task ls -q)" "" "tasks"
  expect_eq "$(find "$SROOT" -mindepth 2 -maxdepth 2 | grep -v '/\.siloc' || true)" "" "siloc's root"
  expect_eq "$(find /sys/fs/cgroup -maxdepth 3 -type d -path "*/$NS/*" 2>/dev/null || true)" "" "cgroups"
}

e2e_case "ctr image import: busybox and debian oci-archives" c_import
e2e_case "ctr run --runc-binary siloc: output, exit status 3, --rm" c_run
e2e_case "ctr run -t: interactive shell on a pty, window size, exit status" c_run_tty
e2e_case "ctr run -d: task ls RUNNING, siloc state, JSON log" c_detached
e2e_case "ctr task exec: output, exit status, --user, --cwd, siloc's error" c_exec
e2e_case "ctr task exec -t: tty, window size, input, exit status" c_exec_tty
e2e_case "ctr task ps and metrics" c_ps_metrics
e2e_case "ctr task pause / resume" c_pause_resume
e2e_case "ctr task kill (SIGTERM, --all KILL), delete; status reaches ctr run" c_kill_delete
e2e_case "ctr run of a missing command: siloc's message, nothing left" c_create_fails
e2e_case "ctr run: Debian image, apt-get --version" c_debian
e2e_case "nothing left: tasks, siloc's root, cgroups" c_leftovers

# --- 2. CRI: config.toml runtimes with BinaryName, as Kubernetes uses them -------------

mkdir -p "$CRI_LOGS" "$T/cni/bin" "$T/cni/conf" "$T/pause/bin"
if ! /usr/bin/python3 -c 'import grpc' 2>/dev/null; then
  echo "FAIL $E2E_NAME: the CRI client needs Debian's python3-grpcio (bash hack/setup)"
  exit 1
fi
# The pod sandbox image: busybox's sleep as pid 1 (hack/images packs the directory).
cp /bin/busybox "$T/pause/bin/busybox" && ln -s busybox "$T/pause/bin/sleep"
bash hack/images dir pause "$T/pause" sleep 2147483647 >"$T/pause.log" 2>&1 ||
  { cat "$T/pause.log"; echo "FAIL $E2E_NAME: hack/images dir pause"; exit 1; }
stop_containerd
cri_tables=$(cat <<EOF
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$T/cni/bin"
    conf_dir = "$T/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    # Every pod without a RuntimeClass: the runc handler, with siloc as its binary.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$SILOC"
        Root = "$T/siloc-root-runc"
    # RuntimeClass handler "siloc": siloc, and its policy pod annotations reach it
    # (never io.siloc.rootfs.*: those name host paths).
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.siloc]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["io.siloc.userns", "io.siloc.userns.size", "io.siloc.numa", "io.siloc.io.*"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.siloc.options]
        BinaryName = "$SILOC"
        Root = "$T/siloc-root-siloc"
EOF
)
write_config "" "$cri_tables" >"$T/config-cri.toml"
start_containerd "$T/config-cri.toml"

# siloc_state HANDLER ID: `siloc state` in the root that handler's runtime gives siloc.
siloc_state() { "$SILOC" --root "$T/siloc-root-$1/k8s.io" state "$2"; }

c_cri_ready() {
  "${CTR0[@]}" -n k8s.io image import "$SILOC_ARCHIVE_BUSYBOX"
  "${CTR0[@]}" -n k8s.io image import "${SILOC_IMAGES_DIR:-hack/.cache/images}/pause.oci.tar"
  expect_match "$(cri version)" '^containerd 1\.6' "CRI Version"
}

# A pod without a RuntimeClass: the default runc handler, whose BinaryName is siloc.
c_cri_default_handler() {
  local pod cid st
  pod=$(cri runp web "" io.siloc.numa=auto)
  echo "$pod" >>"$T/pods"
  cid=$(cri create "$pod" web hello "$BB" '["sh","-c","echo hello from a pod; sleep 1000"]' io.siloc.numa=auto)
  cri start "$cid"
  expect_eq "$(cri status "$cid" | jq -r .state)" RUNNING "ContainerStatus"
  st=$(siloc_state runc "$cid")
  expect_eq "$(jq -r .status <<<"$st")" running "siloc runs the container"
  expect_eq "$(siloc_state runc "$pod" | jq -r .status)" running "siloc runs the pod sandbox"
  # No pod_annotations allowlist on this handler: the annotation stays out.
  expect_eq "$(jq -r '.annotations["io.siloc.numa"] // "absent"' <<<"$st")" absent "annotation"
  for _ in $(seq 50); do grep -q 'hello' "$CRI_LOGS/hello.log" 2>/dev/null && break; sleep 0.1; done
  expect_match "$(cat "$CRI_LOGS/hello.log")" ' stdout F hello from a pod$' "container log (CRI format)"
  local out rc=0
  out=$(cri exec "$cid" sh -c 'echo exec-sync; exit 3') || rc=$?
  expect_eq "$out $rc" "exec-sync 3" "ExecSync output and exit code"
}

# RuntimeClass handler "siloc": its policy pod annotations reach siloc, others (and
# the rootfs ones, which name host paths) do not; a container's exit code reaches
# ContainerStatus. The rootfs value would fail create if it leaked (no such parent).
c_cri_siloc_handler() {
  local pod cid st leak=io.siloc.rootfs.upper=/nonexistent-siloc-e2e/upper
  pod=$(cri runp tuned siloc io.siloc.numa=auto example.com/other=x "$leak")
  echo "$pod" >>"$T/pods"
  cid=$(cri create "$pod" tuned app "$BB" '["sleep","1000"]' io.siloc.numa=auto io.siloc.io.max=wbps=1G example.com/other=x "$leak")
  cri start "$cid"
  st=$(siloc_state siloc "$cid")
  expect_eq "$(jq -r .status <<<"$st")" running "siloc runs the container"
  expect_eq "$(jq -r '.annotations["io.siloc.numa"]' <<<"$st")" auto "allowlisted pod annotation"
  expect_match "$(jq -r '.annotations["io.siloc.numa.decision"]' <<<"$st")" '^mode=auto ' "siloc's NUMA decision"
  expect_eq "$(jq -r '.annotations["io.siloc.io.max"]' <<<"$st")" wbps=1G "allowlisted io.siloc.io.* pod annotation"
  expect_eq "$(jq -r '.annotations["example.com/other"] // "absent"' <<<"$st")" absent "other annotation"
  expect_eq "$(jq -r '.annotations["io.siloc.rootfs.upper"] // "absent"' <<<"$st")" absent "rootfs annotation"
  expect_eq "$(siloc_state siloc "$pod" | jq -r '.annotations["io.siloc.numa"]')" auto "the pod sandbox's"
  cid=$(cri create "$pod" tuned fails "$BB" '["sh","-c","exit 7"]' io.siloc.numa=auto example.com/other=x)
  cri start "$cid"
  for _ in $(seq 50); do [ "$(cri status "$cid" | jq -r .state)" = EXITED ] && break; sleep 0.1; done
  expect_eq "$(cri status "$cid" | jq -c '[.state, .exit_code]')" '["EXITED",7]' "ContainerStatus"
}

c_cri_stop_remove() {
  local pod pods=()
  [ ! -e "$T/pods" ] || mapfile -t pods <"$T/pods"
  for pod in "${pods[@]}"; do
    cri stopp "$pod"
    cri rmp "$pod"
  done
  : >"$T/pods"
  expect_eq "$("${CTR0[@]}" -n k8s.io container ls -q)" "" "containers"
  expect_eq "$(find "$T"/siloc-root-runc "$T"/siloc-root-siloc -mindepth 2 -maxdepth 2 ! -name .siloc)" "" "siloc's roots"
  expect_eq "$(find /sys/fs/cgroup -maxdepth 2 -type d -path "*/$CRI_CG/*" 2>/dev/null)" "" "cgroups"
}

e2e_case "CRI: images in k8s.io, Version" c_cri_ready
e2e_case "CRI default handler (runc options BinaryName=siloc): pod, log, ExecSync" c_cri_default_handler
e2e_case "CRI handler siloc: policy pod annotations reach siloc, rootfs ones do not, exit code 7" c_cri_siloc_handler
e2e_case "CRI StopPodSandbox, RemovePodSandbox: nothing left" c_cri_stop_remove
e2e_finish
