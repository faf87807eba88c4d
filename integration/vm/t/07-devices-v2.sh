# shellcheck shell=sh
# The device cgroup on pure cgroup v2 is an eBPF program (libcontainer's
# cgroupsv2_devices feature): a container that may mknod still cannot open a host
# disk whose node it made, while the spec's default devices keep working.
write_config
make_rootfs "$T/b/rootfs"
dev=$(cat /sys/block/vda/dev)          # MAJ:MIN of the first virtio disk
maj=${dev%:*}; min=${dev#*:}
make_bundle "$T/b" sh -c "echo x > /dev/null && echo null-ok; \
  mknod /dev/disk b $maj $min && echo mknod-ok; \
  head -c 1 /dev/disk >/dev/null 2>/tmp/err && echo read-ok || cat /tmp/err"
edit_spec "$T/b" '.process.capabilities.bounding += ["CAP_MKNOD"]
  | .process.capabilities.effective += ["CAP_MKNOD"]
  | .process.capabilities.permitted += ["CAP_MKNOD"]'
out=$(s run --bundle "$T/b" devices1 </dev/null 2>&1)
note "$out"
echo "$out" | grep -qx null-ok || fail "default device /dev/null: $out"
echo "$out" | grep -qx mknod-ok || fail "mknod with CAP_MKNOD: $out"
echo "$out" | grep -q read-ok && fail "the container read host disk $dev through its own node"
echo "$out" | grep -q "Operation not permitted" || fail "expected EPERM from the device filter: $out"
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
