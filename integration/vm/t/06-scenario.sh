# shellcheck shell=sh
# `siloc scenario run FILE` end to end on pure cgroup v2 with the tiny scenario
# (tiny-scenario.toml): fio victims and dd neighbours in siloc containers on node 0's
# disk. Passes when the run succeeds, reports siloc's rows and leaves no container
# cgroup or mount behind. Its output is kept in $VM_OUT/06-scenario/.
has_command scenario || skip "siloc has no scenario command (the scenario runner, branch scenario, has not landed)"
command -v fio >/dev/null || fail "no fio in the guest (hack/vm --fio)"
target=$VM_NODE0/scenario
mkdir -p "$target"
sed "s|@TARGET@|$target|" "$VM_IN/tiny-scenario.toml" >"$T/tiny.toml"
keep=$VM_OUT/06-scenario
mkdir -p "$keep"
a=$(uptime_cs)
timeout 600 siloc --config "$CONF" scenario run "$T/tiny.toml" >"$T/scenario.out" 2>&1
rc=$?
note "scenario run: exit $rc after $(( ($(uptime_cs) - a) / 100 )) s"
cp -r "$T/." "$keep/" 2>/dev/null
tail -40 "$T/scenario.out"
[ $rc = 0 ] || fail "siloc scenario run exited $rc"
grep -q siloc "$T/scenario.out" || fail "the report names no siloc runtime"
[ -z "$(ls -d /sys/fs/cgroup/siloc-* 2>/dev/null)" ] || fail "cgroups left: $(ls -d /sys/fs/cgroup/siloc-*)"
[ -z "$(mounts_under "$target")" ] || fail "mounts left under $target: $(mounts_under "$target")"
