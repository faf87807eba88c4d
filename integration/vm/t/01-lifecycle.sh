# shellcheck shell=sh
# The runc lifecycle on pure cgroup v2 (kernel 6.1): spec, create, start, state, exec,
# pause/resume (cgroup.freeze), update (memory.max, pids.max), kill, delete, run; the
# container's cgroup appears in the v2 tree and goes away with it.
make_rootfs "$T/b/rootfs"
make_bundle "$T/b" sleep 1000
edit_spec "$T/b" '.linux.resources.memory.limit=134217728 | .linux.resources.pids.limit=100
  | .linux.namespaces += [{"type": "cgroup"}]'
id=lifecycle1

s_detached create --bundle "$T/b" "$id" || fail "create"
[ "$(state_field $id .status)" = created ] || fail "status after create: $(s state $id)"
pid=$(state_field $id .pid)
[ "$pid" -gt 0 ] 2>/dev/null || fail "state pid: $pid"
[ "$(state_field $id .bundle)" = "$T/b" ] || fail "state bundle: $(s state $id)"
cg=$(cgroup_dir "$pid")
note "cgroup $cg"
{ [ "$cg" != /sys/fs/cgroup/ ] && [ -f "$cg/cgroup.procs" ]; } || fail "container cgroup $cg missing"
grep -qx "$pid" "$cg/cgroup.procs" || fail "$pid not in $cg/cgroup.procs"
[ "$(cat "$cg/memory.max")" = 134217728 ] || fail "memory.max: $(cat "$cg/memory.max")"
[ "$(cat "$cg/pids.max")" = 100 ] || fail "pids.max: $(cat "$cg/pids.max")"

s start "$id" || fail "start"
[ "$(state_field $id .status)" = running ] || fail "status after start"
s list -q | grep -qx "$id" || fail "list -q lacks $id"

out=$(s exec "$id" sh -c 'echo in; cat /proc/self/cgroup; exit 4')
rc=$?
[ $rc = 4 ] || fail "exec exit code $rc, want 4"
echo "$out" | grep -qx in || fail "exec output: $out"
# cgroup namespace: the container sees itself at its cgroup's root.
echo "$out" | grep -qx '0::/' || fail "exec cgroup view: $out"

s pause "$id" || fail "pause"
[ "$(state_field $id .status)" = paused ] || fail "status after pause"
[ "$(cat "$cg/cgroup.freeze")" = 1 ] || fail "cgroup.freeze after pause"
s resume "$id" || fail "resume"
[ "$(state_field $id .status)" = running ] || fail "status after resume"
[ "$(cat "$cg/cgroup.freeze")" = 0 ] || fail "cgroup.freeze after resume"

s update --memory 67108864 --pids-limit 50 "$id" || fail "update"
[ "$(cat "$cg/memory.max")" = 67108864 ] || fail "memory.max after update: $(cat "$cg/memory.max")"
[ "$(cat "$cg/pids.max")" = 50 ] || fail "pids.max after update: $(cat "$cg/pids.max")"

err=$(s delete "$id" 2>&1) && fail "delete of a running container succeeded"
echo "$err" | grep -q "not stopped" || fail "delete running: $err"
s kill "$id" KILL || fail "kill"
wait_status "$id" stopped || fail "not stopped after kill: $(s state $id)"
s delete "$id" || fail "delete"
s state "$id" 2>/dev/null && fail "state after delete succeeded"
[ ! -e "$cg" ] || fail "cgroup $cg left after delete"

make_rootfs "$T/r/rootfs"
make_bundle "$T/r" sh -c 'echo hello; exit 3'
out=$(s run --bundle "$T/r" run1 </dev/null)
rc=$?
[ $rc = 3 ] || fail "run exit code $rc, want 3"
[ "$out" = hello ] || fail "run output: $out"

left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
[ -z "$(ls -d /sys/fs/cgroup/siloc-* 2>/dev/null)" ] || fail "cgroups left: $(ls -d /sys/fs/cgroup/siloc-*)"
