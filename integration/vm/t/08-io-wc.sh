# Work-conserving I/O classes on pure cgroup v2. First the mechanism: a container with
# `[io.class.lc] latency_target` gets an io.latency line for its writable layer's disk
# in its cgroup (siloc writes it after libcontainer made the cgroup), and `siloc check`
# reports io.latency as available. Then the goal's direction with the scenario runner
# (wc-scenario.toml): beside the latency target the victim keeps more of its IOPS than
# with no policy, and beside an idle victim the neighbours keep more of the disk than
# under the static cap. The guest's disk is emulated and slow: only ratios count.
has_command check || skip "siloc has no check command"
command -v fio >/dev/null || fail "no fio in the guest (hack/vm --fio)"
write_config "[io.class.lc]" "latency_target = \"2ms\""
dev=${VM_DEV_NODE0#/dev/}
majmin=$(cat "/sys/block/$dev/dev")
siloc check >"$T/check.out" 2>&1 || fail "siloc check: $(cat "$T/check.out")"
cat "$T/check.out"
grep -A3 "^$dev " "$T/check.out" | grep -q "latency  yes" || fail "siloc check: no io.latency for $dev"

layer=$T/layer
make_rootfs "$layer"
make_bundle "$T/c" sleep 1000
annotate "$T/c" io.siloc.rootfs.layers "[\"$layer\"]"
annotate "$T/c" io.siloc.io.class lc
s_detached create --bundle "$T/c" lc || fail "create"
cg=$(cgroup_dir "$(state_field lc .pid)")
note "io.latency: $(cat "$cg/io.latency")"
grep -q "^$majmin target=2000" "$cg/io.latency" || fail "no '$majmin target=2000' in $cg/io.latency: $(cat "$cg/io.latency")"
state_field lc '.annotations["io.siloc.io.policy"]' | grep -q "latency=2000" || fail "policy annotation: $(state_field lc '.annotations["io.siloc.io.policy"]')"
s delete --force lc || fail "delete"

target=$VM_NODE0/wc-scenario
mkdir -p "$target"
sed "s|@TARGET@|$target|" "$VM_IN/wc-scenario.toml" >"$T/wc.toml"
out=$T/out
keep=$VM_OUT/08-io-wc
mkdir -p "$keep"
timeout 900 siloc --config "$CONF" scenario run "$T/wc.toml" --out "$out" >"$T/scenario.out" 2>&1
rc=$?
cp "$T/scenario.out" "$out"/report.* "$out"/*.svg "$keep/" 2>/dev/null
tail -30 "$T/scenario.out"
[ $rc = 0 ] || fail "siloc scenario run exited $rc"
row() { jq -r --arg r "$1" ".rows[] | select(.runtime == \$r) | .$2 // \"null\"" "$out/report.json"; }
for r in siloc siloc-policy siloc-latency; do
  note "$r: victim kept $(row $r victim_iops_kept_pct)%, neighbours kept $(row $r neighbour_kept_pct)%, idle/alone $(row $r idle_share_pct)%"
done
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }
gt "$(row siloc-latency victim_iops_kept_pct)" "$(row siloc victim_iops_kept_pct)" ||
  fail "the latency target did not protect the victim better than no policy"
gt "$(row siloc-latency idle_share_pct)" "$(row siloc-policy idle_share_pct)" ||
  fail "beside an idle victim the neighbours did not keep more under the latency target than under the static cap"
[ -z "$(ls -d /sys/fs/cgroup/siloc-* 2>/dev/null)" ] || fail "cgroups left: $(ls -d /sys/fs/cgroup/siloc-*)"
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
