# shellcheck shell=sh
# OCI blockIO throttles on pure cgroup v2 (no siloc annotation): the spec's
# throttleWriteBpsDevice for node 0's disk becomes the container's io.max line, and
# buffered writes are held to it both when the container fsyncs them and when the
# kernel's flusher writes them back later (cgroup v2 charges writeback to the cgroup
# that dirtied the pages; v1 charges it to the root and lets it escape).
LIMIT=3145728   # bytes/s (3 MiB/s)
MIB=9
dev=${VM_DEV_NODE0#/dev/}
majmin=$(cat "/sys/block/$dev/dev")
maj=${majmin%:*} min=${majmin#*:}
note "node 0 disk $dev ($majmin), wbps $LIMIT"

start_box() {  # start_box ID [JQ FILTER]: a busybox container on node 0's disk, sleeping
  make_rootfs "$T/$1/rootfs"
  make_bundle "$T/$1" sleep 1000
  [ -z "${2:-}" ] || edit_spec "$T/$1" --argjson maj "$maj" --argjson min "$min" --argjson l "$LIMIT" "$2"
  s_detached create --bundle "$T/$1" "$1" || fail "create $1"
  s start "$1" || fail "start $1"
}

# Unthrottled first: the disk must be clearly faster than the limit, or the
# measurement below would prove nothing.
start_box free
cs=$(timed_dd free $MIB conv=fsync)
free_rate=$(rate $MIB "$cs")
note "unthrottled: $MIB MiB with fsync in ${cs}0 ms = $free_rate B/s"
[ "$free_rate" -gt $((LIMIT * 2)) ] || fail "the disk is too slow here to test a $LIMIT B/s limit ($free_rate B/s)"

# shellcheck disable=SC2016 # $maj, $min and $l are jq's variables
start_box slow '.linux.resources.blockIO.throttleWriteBpsDevice = [{major: $maj, minor: $min, rate: $l}]'
cg=$(cgroup_dir "$(state_field slow .pid)")
line=$(grep "^$majmin " "$cg/io.max") || fail "no io.max line for $majmin in $cg: $(cat "$cg/io.max")"
note "io.max: $line"
echo "$line" | grep -q "wbps=$LIMIT" || fail "io.max line: $line"

cs=$(timed_dd slow $MIB conv=fsync)
r=$(rate $MIB "$cs")
note "throttled, fsync in the container: ${cs}0 ms = $r B/s"
[ "$r" -le $((LIMIT * 115 / 100)) ] || fail "fsynced dd ran at $r B/s, above the $LIMIT B/s limit"
[ "$r" -ge $((LIMIT / 3)) ] || fail "fsynced dd ran at $r B/s, far below the $LIMIT B/s limit"

# Buffered, never fsynced by the container: the write returns at page-cache speed;
# the writeback (here forced by sync outside the container) is throttled anyway.
s exec slow rm -f /dd.out || fail "rm"
sync
cs=$(timed_dd slow $MIB)
note "throttled, no fsync: dd returned in ${cs}0 ms"
a=$(uptime_cs); sync; b=$(uptime_cs)
r=$(rate $MIB $((b - a)))
note "sync outside the container: $((b - a))0 ms = $r B/s"
[ "$r" -le $((LIMIT * 115 / 100)) ] || fail "writeback of the container's dirty pages ran at $r B/s: not held to $LIMIT B/s (cgroup writeback not in effect?)"
wbytes=$(grep "^$majmin " "$cg/io.stat" | sed -n 's/.*wbytes=\([0-9]*\).*/\1/p')
note "io.stat: $(grep "^$majmin " "$cg/io.stat")"
[ "${wbytes:-0}" -ge $((2 * MIB * 1048576)) ] || fail "io.stat charges $wbytes bytes to the container, want >= $((2 * MIB)) MiB"
