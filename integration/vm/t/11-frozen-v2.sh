# shellcheck shell=sh
# A container whose cgroup is frozen from outside (cgroup.freeze 1) while its state
# says running, on pure cgroup v2: `state` says paused (runc 1.1.5 reads the freezer),
# SIGKILL ends the init and the cgroup is thawed after it (as runc leaves it), and
# `delete --force` of such a container is prompt (engine::frozen_cgroup).
make_rootfs "$T/b/rootfs"
make_bundle "$T/b" sleep 1000

# ends PID: waits up to 10 s for PID to end (gone, or a zombie).
ends() {
  i=0
  while [ $i -lt 500 ]; do
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    case $st in '' | Z | X) return 0 ;; esac
    i=$((i + 1)); sleep 0.02
  done
  return 1
}

# frozen_box ID: a running container, then its cgroup frozen behind its state.
frozen_box() {
  s_detached create --bundle "$T/b" "$1" || fail "create $1"
  s start "$1" || fail "start $1"
  pid=$(state_field "$1" .pid)
  cg=$(cgroup_dir "$pid")
  echo 1 >"$cg/cgroup.freeze"
  i=0
  until grep -qx 'frozen 1' "$cg/cgroup.events"; do
    i=$((i + 1)); [ $i -lt 500 ] || fail "$cg never froze"; sleep 0.02
  done
}

frozen_box frz1
[ "$(state_field frz1 .status)" = paused ] || fail "status of a frozen container: $(s state frz1)"
s list | grep "^frz1 " | grep -q paused || fail "list: $(s list)"
s kill frz1 KILL || fail "kill KILL"
ends "$pid" || fail "init $pid survived SIGKILL"
[ "$(cat "$cg/cgroup.freeze" 2>/dev/null || echo 0)" = 0 ] || fail "still frozen after SIGKILL"
s delete frz1 || fail "delete after SIGKILL"

frozen_box frz2
t0=$(date +%s)
s delete --force frz2 || fail "delete --force"
took=$(($(date +%s) - t0))
ends "$pid" || fail "init $pid outlived delete --force"
[ "$took" -lt 5 ] || fail "delete --force took $took s (the drain is 10 s)"
[ ! -d "$cg" ] || fail "$cg left behind"
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
