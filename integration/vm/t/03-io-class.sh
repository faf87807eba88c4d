# shellcheck shell=sh
# siloc's I/O classes on pure cgroup v2: `io.siloc.io.class=slow` with the host
# config's [io.class.slow] wbps puts an io.max line for the disk under the container's
# writable layer (node 0's disk here) in its cgroup, and a buffered dd in the
# container (fsync at the end) is held to the limit.
LIMIT=3145728   # bytes/s, written as "3M" in the class
MIB=9
write_config "[io.class.slow]" "wbps = \"3M\""
feature_refuses io.siloc.io.class no-such-class-here ||
  fail "siloc accepted io.siloc.io.class=no-such-class-here: the annotation is ignored"

dev=${VM_DEV_NODE0#/dev/}
majmin=$(cat "/sys/block/$dev/dev")
layer=$T/layer
make_rootfs "$layer"
note "node 0 disk $dev ($majmin); layer and data root on it"

# The writable layer (ephemeral upper under data_root) is what the class applies to.
make_bundle "$T/c" sleep 1000
annotate "$T/c" io.siloc.rootfs.layers "[\"$layer\"]"
annotate "$T/c" io.siloc.io.class slow
s_detached create --bundle "$T/c" slow || fail "create"
s start slow || fail "start"
cg=$(cgroup_dir "$(state_field slow .pid)")
note "io.max: $(cat "$cg/io.max")"
line=$(grep "^$majmin " "$cg/io.max") || fail "no io.max line for $majmin in $cg/io.max: $(cat "$cg/io.max")"
echo "$line" | grep -q "wbps=$LIMIT" || fail "io.max line: $line, want wbps=$LIMIT"

cs=$(timed_dd slow $MIB conv=fsync)
r=$(rate $MIB "$cs")
note "dd with fsync in the container: ${cs}0 ms = $r B/s"
[ "$r" -le $((LIMIT * 115 / 100)) ] || fail "dd ran at $r B/s, above the class's $LIMIT B/s"
[ "$r" -ge $((LIMIT / 3)) ] || fail "dd ran at $r B/s, far below the class's $LIMIT B/s"

s kill slow KILL; wait_status slow stopped || fail "not stopped"
s delete slow || fail "delete"
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
