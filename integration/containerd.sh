#!/usr/bin/env bash
# containerd 1.6, started here from a temp dir (its own root, state, socket, config;
# no CRI), driven with ctr: `ctr run --runc-binary <built siloc>` makes the runc shim
# (containerd-shim-runc-v2) call siloc with runc's CLI: create --bundle --pid-file
# [--console-socket], start, exec --process --detach, ps --format json, kill [--all],
# pause, resume, delete [--force], every call with --log FILE --log-format json.
# siloc's state root is private too (--runc-root).
. "$(dirname "$0")/lib/e2e.sh"
e2e_images busybox debian

BB=localhost/siloc/busybox:latest
DEB=localhost/siloc/debian:latest
NS=siloc-e2e
SOCK=$T/containerd.sock
SROOT=$T/siloc-root
STATE=$T/state
mkdir -p "$T/fifo" "$SROOT"

cat >"$T/config.toml" <<EOF
version = 2
root = "$T/root"
state = "$STATE"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$T/opt"
EOF

containerd --config "$T/config.toml" --log-level info >"$T/containerd.log" 2>&1 &
CTRD_PID=$!
# Stop containerd, then any shim it left (their command lines name our socket).
stop_containerd() {
  kill "$CTRD_PID" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$CTRD_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$CTRD_PID" 2>/dev/null || true
  local p
  for p in $(pgrep -f -- "-address $SOCK" || true); do kill -9 "$p" 2>/dev/null || true; done
}
e2e_at_exit stop_containerd
# The cgroup parent the containers' cgroups were made in (/<namespace>/<id>), if empty.
e2e_at_exit 'rmdir /sys/fs/cgroup/*/$NS /sys/fs/cgroup/unified/$NS'
# Before containerd stops: every task killed and deleted, every container removed,
# and whatever siloc still holds in its root deleted.
cleanup_tasks() {
  local id
  for id in $(ctr task ls -q 2>/dev/null); do
    ctr task kill -a -s KILL "$id"
    ctr task delete -f "$id"
  done
  for id in $(ctr container ls -q 2>/dev/null); do ctr container delete "$id"; done
  for id in $("$SILOC" --root "$SROOT" list -q 2>/dev/null); do
    "$SILOC" --root "$SROOT" delete --force "$id"
  done
}
e2e_at_exit cleanup_tasks

for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
if [ ! -S "$SOCK" ]; then
  cat "$T/containerd.log"
  echo "FAIL $E2E_NAME: containerd did not start"
  exit 1
fi

CTR=("$(type -P ctr)" --address "$SOCK" --namespace "$NS")
# ctr ARGS...: ctr on our containerd, never waiting forever.
ctr() { timeout -k 5 120 "${CTR[@]}" "$@"; }
# The runc options that make the shim call siloc with a private root.
RUNC=(--runc-binary "$SILOC" --runc-root "$SROOT" --fifo-dir "$T/fifo")
# ctr sets the window size only after the process started (a race with runc too), so
# a shell on a ctr terminal waits for it (up to 5 s).
WAIT_SIZE='for i in $(seq 50); do stty size >/dev/null 2>&1 && break; sleep 0.1; done; '
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
  out=$(ctr run --rm "${RUNC[@]}" "$BB" run1 sh -c 'echo hello from $(cat /proc/1/cmdline | tr "\0" " "); echo to-stderr >&2; exit 3' 2>&1) || rc=$?
  expect_eq "$rc" 3 "exit status of ctr run"
  expect_match "$out" '^hello from sh -c echo hello' "stdout"
  expect_match "$out" '^to-stderr$' "stderr"
  expect_eq "$(ctr container ls -q | grep -c '^run1$' || true)" 0 "--rm removed the container"
  expect_eq "$(ls "$SROOT/$NS")" "" "siloc's root after --rm"
}

c_run_tty() {
  local out rc=0
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
  json_log_ok "$(bundle bg)/log.json"
}

c_exec() {
  local out rc=0
  out=$(ctr task exec --exec-id e1 --fifo-dir "$T/fifo" bg sh -c 'echo in-exec; cat /proc/1/cmdline | tr "\0" " "; echo; exit 5') || rc=$?
  expect_eq "$rc" 5 "exec exit status"
  expect_match "$out" '^in-exec$' "exec output"
  expect_match "$out" '^sh -c trap' "exec joins the container"
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
e2e_finish
