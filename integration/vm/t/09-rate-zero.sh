# shellcheck shell=sh
# Rate 0 in the spec's blockIO and in `update --resources` means "no limit" on pure
# cgroup v2, as it does on v1 (the kernel there deletes a rule written as 0). The
# kernel's io.max refuses `wbps=0` with ERANGE ("numerical result out of range",
# runc #3336); siloc leaves the entry out at create and writes `wbps=max` on update.
# `update --io-max wbps=0` stays a refusal that names the flag.
dev=${VM_DEV_NODE0#/dev/}
majmin=$(cat "/sys/block/$dev/dev")
maj=${majmin%:*} min=${majmin#*:}
LIMIT=4194304
note "node 0 disk $dev ($majmin)"

make_rootfs "$T/z/rootfs"
make_bundle "$T/z" sleep 1000
# shellcheck disable=SC2016  # a jq program: its $names are jq's
edit_spec "$T/z" --argjson maj "$maj" --argjson min "$min" --argjson l "$LIMIT" \
  '.linux.resources.blockIO.throttleReadBpsDevice = [{major: $maj, minor: $min, rate: 0}]
   | .linux.resources.blockIO.throttleWriteBpsDevice = [{major: $maj, minor: $min, rate: $l}]
   | .linux.resources.blockIO.throttleReadIOPSDevice = [{major: $maj, minor: $min, rate: 0}]'
s_detached create --bundle "$T/z" zero 2>"$T/create.err" || fail "create with rate 0: $(cat "$T/create.err")"
s start zero || fail "start"
cg=$(cgroup_dir "$(state_field zero .pid)")
line=$(grep "^$majmin " "$cg/io.max")
note "io.max after create: $line"
echo "$line" | grep -q "rbps=max wbps=$LIMIT riops=max wiops=max" || fail "io.max after create: $line"

# update: rate 0 lifts the write limit, another entry sets riops.
printf '{"blockIO":{"throttleWriteBpsDevice":[{"major":%s,"minor":%s,"rate":0}],"throttleReadIOPSDevice":[{"major":%s,"minor":%s,"rate":300}]}}' \
  "$maj" "$min" "$maj" "$min" >"$T/res.json"
s update --resources "$T/res.json" zero 2>"$T/update.err" || fail "update with rate 0: $(cat "$T/update.err")"
line=$(grep "^$majmin " "$cg/io.max")
note "io.max after update: $line"
echo "$line" | grep -q "rbps=max wbps=max riops=300 wiops=max" || fail "io.max after update: $line"
# The saved spec keeps no rate-0 entry: a later update does not bring the limit back.
s update --pids-limit 50 zero || fail "update --pids-limit"
line=$(grep "^$majmin " "$cg/io.max")
echo "$line" | grep -q "wbps=max riops=300" || fail "io.max after an unrelated update: $line"

err=$(s update --io-max wbps=0 zero 2>&1) && fail "update --io-max wbps=0 was accepted"
note "update --io-max wbps=0: $err"
echo "$err" | grep -q -- "--io-max: wbps: 0 is not a limit" || fail "update --io-max wbps=0: $err"

s delete -f zero || fail "delete"
[ ! -d "$cg" ] || fail "cgroup $cg left behind"
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
