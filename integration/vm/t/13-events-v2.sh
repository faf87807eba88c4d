# shellcheck shell=sh
# `siloc events` on pure cgroup v2 (issue 19): `--stats` in runc 1.1.5's shape (its
# top-level keys, CPU times in nanoseconds, limits in bytes), and an `oom` line when
# the container goes over its memory limit (memory.events' oom_kill), the stream
# ending with the container.
make_rootfs "$T/b/rootfs"
make_bundle "$T/b" sleep 1000
edit_spec "$T/b" '.linux.resources.memory={limit:67108864} | .linux.resources.pids.limit=64'
s_detached run -d --bundle "$T/b" ev1 || fail "run ev1"
cg=$(cgroup_dir "$(state_field ev1 .pid)")
out=$(s events --stats ev1) || fail "events --stats"
note "$out"
keys=$(echo "$out" | jq -c '.data | keys_unsorted')
[ "$keys" = '["cpu","cpuset","memory","pids","blkio","hugetlb","intel_rdt","network_interfaces"]' ] ||
  fail "top-level keys: $keys"
[ "$(echo "$out" | jq .data.memory.usage.limit)" = 67108864 ] || fail "memory.usage.limit"
[ "$(echo "$out" | jq .data.pids.limit)" = 64 ] || fail "pids.limit"
# cpu.stat's usage_usec, in nanoseconds (read after the stats: it only grows)
total=$(echo "$out" | jq .data.cpu.usage.total)
usec=$(sed -n 's/^usage_usec //p' "$cg/cpu.stat")
if [ "$total" -le 0 ] || [ "$total" -gt $((usec * 1000)) ] || [ "$total" -le $((usec * 500)) ]; then
  fail "cpu.usage.total $total ns, cpu.stat usage_usec $usec"
fi
s kill ev1 KILL || fail "kill ev1"
wait_status ev1 stopped || fail "ev1 not stopped"
s delete ev1 || fail "delete ev1"

# dd's 64 MiB buffer does not fit under 32 MiB: the OOM killer takes dd
make_rootfs "$T/o/rootfs"
make_bundle "$T/o" sh -c 'dd if=/dev/zero of=/dev/null bs=64M count=1; sleep 1'
edit_spec "$T/o" '.linux.resources.memory={limit:33554432,swap:33554432}'
s_detached create --bundle "$T/o" ev2 || fail "create ev2"
s events --interval 500ms ev2 >"$T/events.out" 2>"$T/events.err" &
ev=$!
# its first stats line: it is watching, the container may run
i=0
until grep -q '"type":"stats"' "$T/events.out"; do
  i=$((i + 1)); [ $i -lt 300 ] || { kill $ev; fail "no stats line: $(cat "$T/events.err")"; }
  sleep 0.1
done
s start ev2 || fail "start ev2"
i=0
while kill -0 $ev 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 300 ] || { kill $ev; fail "events still running after the container"; }
  sleep 0.1
done
wait $ev || fail "events exit status $?: $(cat "$T/events.err")"
grep -qx '{"type":"oom","id":"ev2"}' "$T/events.out" || fail "no oom line in: $(cat "$T/events.out")"
s delete ev2 || fail "delete ev2"

left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
