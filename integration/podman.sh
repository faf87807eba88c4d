#!/usr/bin/env bash
# podman 4.3 with `--runtime <built siloc>` (conmon drives siloc's create, start, exec,
# kill, pause, resume, delete with --console-socket for terminals), on a private
# storage (--root/--runroot/--tmpdir under a temp dir, overlay driver) and a private
# containers.conf, so the host's podman state is untouched. siloc keeps its state in
# its default root /run/siloc: podman does not pass --runtime-flag on to the cleanup
# process conmon starts, so a private siloc root would leak every container's state.
#
# This host lacks CAP_SYS_RESOURCE: podman's default ulimits (nofile 1048576) fail with
# any runtime, so every run asks for less; containers get no network.
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
. "$(dirname "$0")/lib/e2e.sh"
e2e_images busybox debian

BB=localhost/siloc/busybox:latest
DEB=localhost/siloc/debian:latest
RUNOPTS=(--network none --ulimit nofile=20000:20000 --ulimit nproc=4096:4096)
SILOC_ROOT=/run/siloc
# The state root podman makes siloc use: removed again if this suite made it and it is
# empty at the end (rmdir never removes another user's containers).
if [ ! -e "$SILOC_ROOT" ]; then
  e2e_at_exit "rmdir '$SILOC_ROOT/.siloc/containers' '$SILOC_ROOT/.siloc' '$SILOC_ROOT'"
fi
mkdir -p "$T/vol" "$T/out"

# Only this file is read (CONTAINERS_CONF), not the host's containers.conf. siloc is
# named in runtime_supports_json so podman passes `--log-format json` and reports
# siloc's error messages cleanly; [engine.runtimes] is checked by its own case.
cat >"$T/containers.conf" <<EOF
[engine]
runtime = "siloc"
runtime_supports_json = ["crun", "runc", "kata", "siloc"]
cgroup_manager = "cgroupfs"
events_logger = "none"

[engine.runtimes]
siloc = ["$SILOC"]
EOF
export CONTAINERS_CONF=$T/containers.conf
PODMAN_GLOBAL=(--root "$T/storage" --runroot "$T/run" --tmpdir "$T/tmp" --storage-driver overlay
  --cgroup-manager cgroupfs --events-backend none)

PODMAN=("$(type -P podman)" "${PODMAN_GLOBAL[@]}" --runtime "$SILOC")

# podman ARGS...: the podman under test, with siloc, never waiting forever.
podman() { timeout -k 5 120 "${PODMAN[@]}" "$@"; }

# The full ids of every container the suite made, for the leftovers check.
track() { podman inspect --format '{{.Id}}' "$1" >>"$T/ids"; }
e2e_at_exit 'podman rm --all --force --time 0; podman rmi --all --force'

c_load() {
  podman load -i "$SILOC_ARCHIVE_BUSYBOX"
  podman load -i "$SILOC_ARCHIVE_DEBIAN"
  local imgs
  imgs=$(podman images --format '{{.Repository}}:{{.Tag}}')
  expect_match "$imgs" "^$BB\$" "podman images"
  expect_match "$imgs" "^$DEB\$" "podman images"
}

c_run_output() {
  local out
  out=$(podman run --name once "${RUNOPTS[@]}" "$BB" sh -c 'echo hello from $(hostname); echo to-stderr >&2; cat /proc/1/cmdline | tr "\0" " "' 2>&1)
  track once
  expect_match "$out" '^hello from [0-9a-f]{12}$' "stdout"
  expect_match "$out" '^to-stderr$' "stderr"
  expect_match "$out" '^sh -c echo hello' "the command is pid 1"
  expect_eq "$(podman inspect --format '{{.OCIRuntime}} {{.State.Status}} {{.State.ExitCode}}' once)" \
    "$SILOC exited 0" "inspect after run"
  podman rm once
}

c_exit_codes() {
  expect_eq "$(status podman run --rm "${RUNOPTS[@]}" "$BB" sh -c 'exit 42')" 42 "exit 42"
  expect_eq "$(status podman run --rm "${RUNOPTS[@]}" "$BB" false)" 1 "false"
  # Killed from outside (pid 1 cannot be SIGKILLed from inside its pid namespace).
  podman run -d --name killed "${RUNOPTS[@]}" "$BB" sleep 1000
  track killed
  podman kill --signal KILL killed
  expect_eq "$(podman wait killed)" 137 "podman wait after SIGKILL"
  podman rm killed
  # podman's conventions, from the runtime's error message: 127 not found, 126 not
  # executable, with siloc's message (JSON log) in podman's error.
  local err rc=0
  err=$(podman run --rm "${RUNOPTS[@]}" "$BB" /no/such/cmd 2>&1) || rc=$?
  expect_eq "$rc" 127 "missing command"
  expect_match "$err" 'siloc: .*exec: "/no/such/cmd": stat /no/such/cmd: no such file or directory' \
    "missing command message"
  expect_no_match "$err" 'level=|"msg"' "podman shows the message, not a raw log line"
  rc=0
  err=$(podman run --rm "${RUNOPTS[@]}" "$BB" /etc/passwd 2>&1) || rc=$?
  expect_eq "$rc" 126 "non-executable command"
}

c_run_it() {
  local out rc=0
  # shellcheck disable=SC2016 # typed into the container's shell
  out=$(ptyrun --timeout 60 --rows 33 --cols 111 \
    --expect '# ' --send 'tty; stty size; test -t 0 && echo stdin-is-a-tty; echo answer=$((6*7))\n' \
    --expect 'answer=42' --send 'exit 5\n' \
    -- "${PODMAN[@]}" run --rm -it "${RUNOPTS[@]}" "$BB" sh) || rc=$?
  out=$(clean_tty "$out")
  expect_eq "$rc" 5 "exit status through the terminal"
  expect_match "$out" '^/dev/pts/[0-9]+$' "tty inside"
  expect_match "$out" '^33 111$' "window size passed through"
  expect_match "$out" '^stdin-is-a-tty$' "stdin"
  expect_match "$out" '^answer=42$' "interactive input"
}

c_detached_status() {
  podman run -d --name web "${RUNOPTS[@]}" -v "$T/vol:/data" "$BB" \
    sh -c 'trap "echo got TERM; exit 0" TERM; echo started; while :; do sleep 0.1; done'
  track web
  local ps
  ps=$(podman ps --format '{{.Names}} {{.Status}}')
  expect_match "$ps" '^web Up ' "podman ps"
  expect_eq "$(podman inspect --format '{{.State.Status}} {{.State.Running}}' web)" "running true" "inspect"
  local pid
  pid=$(podman inspect --format '{{.State.Pid}}' web)
  [ "$pid" -gt 0 ] && [ -d "/proc/$pid" ]
  # The container is siloc's: its state is in siloc's root and says running.
  local st
  st=$("$SILOC" --root "$SILOC_ROOT" state "$(podman inspect --format '{{.Id}}' web)")
  expect_eq "$(jq -r '.status, .pid' <<<"$st" | tr '\n' ' ')" "running $pid " "siloc state"
  # siloc's log for create (podman passes --log-format json --log .../oci-log): empty.
  local log
  log="$T/run/overlay-containers/$(podman inspect --format '{{.Id}}' web)/userdata/oci-log"
  [ -e "$log" ] || { echo "no $log: podman did not pass --log"; false; }
  expect_eq "$(cat "$log")" "" "siloc's log of a good create"
  for _ in $(seq 50); do podman logs web | grep -q started && break; sleep 0.1; done
  expect_match "$(podman logs web)" '^started$' "podman logs"
}

c_exec() {
  local out
  out=$(podman exec web sh -c 'echo in-exec; cat /proc/1/cmdline | tr "\0" " "; echo; echo $$')
  expect_match "$out" '^in-exec$' "exec output"
  expect_match "$out" '^sh -c trap' "exec joins the container's pid namespace"
  expect_eq "$(status podman exec web sh -c 'exit 7')" 7 "exec exit code"
  expect_eq "$(podman exec --user 65534:65534 web id -u)" 65534 "exec --user"
  expect_eq "$(podman exec --workdir /tmp web pwd)" /tmp "exec --workdir"
  expect_eq "$(podman exec -e FOO=bar web sh -c 'echo $FOO')" bar "exec -e"
  expect_eq "$(status podman exec web /no/such/cmd)" 127 "exec of a missing command"
  expect_eq "$(status podman exec web /etc/passwd)" 126 "exec of a non-executable file"
}

c_exec_it() {
  local out rc=0
  # shellcheck disable=SC2016 # typed into the container's shell
  out=$(ptyrun --timeout 60 --rows 20 --cols 70 \
    --expect '# ' --send 'tty; stty size; echo exec=$((5*5))\n' \
    --expect 'exec=25' --send 'exit 3\n' \
    -- "${PODMAN[@]}" exec -it web sh) || rc=$?
  out=$(clean_tty "$out")
  expect_eq "$rc" 3 "exec -it exit status"
  expect_match "$out" '^/dev/pts/[0-9]+$' "tty inside exec"
  expect_match "$out" '^20 70$' "exec window size"
  expect_match "$out" '^exec=25$' "interactive input"
}

c_pause() {
  podman pause web
  expect_eq "$(podman inspect --format '{{.State.Status}}' web)" paused "after pause"
  podman unpause web
  expect_eq "$(podman inspect --format '{{.State.Status}}' web)" running "after unpause"
  podman exec web true
}

c_writes_files() {
  podman exec web sh -c 'echo via-volume > /data/out.txt; mkdir -p /srv/made; seq 1 1000 > /srv/made/numbers'
  expect_eq "$(cat "$T/vol/out.txt")" via-volume "file written to the volume"
  podman cp web:/srv/made/numbers "$T/out/numbers"
  expect_eq "$(wc -l <"$T/out/numbers")" 1000 "podman cp from the container"
  echo from-host >"$T/out/in.txt"
  podman cp "$T/out/in.txt" web:/srv/in.txt
  expect_eq "$(podman exec web cat /srv/in.txt)" from-host "podman cp into the container"
  expect_match "$(podman diff web)" '^A /srv/made/numbers$' "podman diff"
}

c_stop_start() {
  local t0=$SECONDS
  podman stop --time 20 web
  [ $((SECONDS - t0)) -lt 10 ] || { echo "stop took $((SECONDS - t0))s: SIGTERM not delivered?"; false; }
  expect_eq "$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' web)" "exited 0" "after stop"
  expect_match "$(podman logs web)" '^got TERM$' "the container saw SIGTERM"
  # A stopped container starts again (podman deletes and re-creates it in siloc); its
  # files are still there.
  podman start web
  expect_eq "$(podman inspect --format '{{.State.Status}}' web)" running "after start"
  expect_eq "$(podman exec web cat /srv/in.txt)" from-host "files survive a restart"
  # A pid 1 that ignores SIGTERM: podman escalates to SIGKILL after the timeout.
  podman run -d --name stubborn "${RUNOPTS[@]}" "$BB" sleep 1000
  track stubborn
  podman stop --time 1 stubborn
  expect_eq "$(podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' stubborn)" "exited 137" "SIGKILL after timeout"
}

c_rm() {
  podman stop --time 20 web
  podman rm web stubborn
  expect_eq "$(podman ps -a --format '{{.Names}}' | grep -cE '^(web|stubborn)$' || true)" 0 "podman ps -a after rm"
  podman run -d --name gone "${RUNOPTS[@]}" "$BB" sleep 1000
  track gone
  podman rm --force --time 0 gone
  expect_eq "$(podman ps -a --format '{{.Names}}' | grep -c '^gone$' || true)" 0 "rm --force of a running container"
}

c_debian() {
  local out
  out=$(podman run --rm "${RUNOPTS[@]}" "$DEB" sh -c 'apt-get --version | head -n1; dpkg -s bash | grep ^Status; . /etc/os-release; echo $VERSION_CODENAME')
  expect_match "$out" '^apt 2\.' "apt-get --version"
  expect_match "$out" '^Status: install ok installed$' "dpkg database"
  expect_match "$out" '^bookworm$' "os-release"
}

# containers.conf's [engine] runtime = "siloc" and [engine.runtimes]: no --runtime flag.
c_containers_conf() {
  local path
  path=$(timeout 60 "${PODMAN[0]}" "${PODMAN_GLOBAL[@]}" info --format '{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}')
  expect_eq "$path" "siloc $SILOC" "podman info"
  timeout 60 "${PODMAN[0]}" "${PODMAN_GLOBAL[@]}" run --name byconf "${RUNOPTS[@]}" "$BB" echo conf-ok
  track byconf
  expect_eq "$(podman inspect --format '{{.OCIRuntime}}' byconf)" siloc "runtime of the container"
  podman rm byconf
}

# podman's container ids (64 hex digits) in siloc's state root and its records.
siloc_ids() {
  { ls "$SILOC_ROOT" "$SILOC_ROOT/.siloc/containers" 2>/dev/null || true; } |
    { grep -E '^[0-9a-f]{64}$' || true; } | sort -u
}
siloc_ids >"$T/ids-before"

# Every container the suite made (--rm ones included) is gone from siloc's state root
# and records, and the named ones from the cgroups.
c_leftovers() {
  local id left
  left=$(siloc_ids | comm -13 "$T/ids-before" - | sed 's/^/state or record: /')
  [ -s "$T/ids" ]
  while read -r id; do
    left+=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "*$id*" -printf ' cgroup:%p' 2>/dev/null || true)
  done <"$T/ids"
  expect_eq "$left" "" "leftovers"
}

e2e_case "podman load: busybox and debian oci-archives" c_load
e2e_case "podman run: output, pid 1, inspect (runtime siloc, exited 0)" c_run_output
e2e_case "podman run: exit codes 42, 1, 137 (podman kill), 127 (missing), 126 (not executable)" c_exit_codes
e2e_case "podman run -it: interactive shell on a pty, window size, exit status" c_run_it
e2e_case "podman run -d: ps, inspect, siloc state and log, podman logs" c_detached_status
e2e_case "podman exec: output, exit code, --user, --workdir, -e, 127, 126" c_exec
e2e_case "podman exec -it: tty, window size, input, exit status" c_exec_it
e2e_case "podman pause / unpause" c_pause
e2e_case "container writes files: volume, podman cp both ways, podman diff" c_writes_files
e2e_case "podman stop (SIGTERM, then SIGKILL after timeout), start again" c_stop_start
e2e_case "podman rm, rm --force of a running container" c_rm
e2e_case "podman run: Debian image, apt-get --version" c_debian
e2e_case "containers.conf [engine.runtimes] siloc, no --runtime flag" c_containers_conf
e2e_case "nothing left in siloc's root or the cgroups" c_leftovers
e2e_finish
