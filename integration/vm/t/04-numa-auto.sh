# shellcheck shell=sh
# NUMA-local placement on a two-node guest: `io.siloc.numa=auto` for a container
# whose writable layer (data_root and layer) is on node N's disk gets node N's CPUs
# and memory: cpuset.cpus.effective / cpuset.mems.effective of its cgroup, and the
# allowed lists its own process sees.
[ -d /sys/devices/system/node/node1 ] || fail "the guest has a single NUMA node (hack/vm broken?)"
feature_refuses io.siloc.numa no-such-mode ||
  fail "siloc accepted io.siloc.numa=no-such-mode: the annotation is ignored"

for n in 0 1; do
  case $n in
    0) disk=$VM_NODE0 dev=$VM_DEV_NODE0 ;;
    *) disk=$VM_NODE1 dev=$VM_DEV_NODE1 ;;
  esac
  dev=${dev#/dev/}
  # Where hack/vm put the disk; siloc must find the same (the PCI parent's numa_node).
  [ "$(cat "/sys/block/$dev/device/../numa_node")" = "$n" ] || fail "disk $dev is not on node $n"
  want_cpus=$(cpulist_expand "$(cat /sys/devices/system/node/node$n/cpulist)")
  # shellcheck disable=SC2034 # read by lib.sh (write_config, leftovers)
  DATA_ROOT=$disk/siloc-numa-data
  # shellcheck disable=SC2034 # read by lib.sh (s, write_config)
  CONF=$T/siloc-node$n.toml
  write_config
  layer=$disk/numa-layer
  rm -rf "$layer"; make_rootfs "$layer"

  id=numa$n
  make_bundle "$T/$id" sh -c 'grep -E "^(Cpus|Mems)_allowed_list" /proc/self/status; exec sleep 1000'
  annotate "$T/$id" io.siloc.rootfs.layers "[\"$layer\"]"
  annotate "$T/$id" io.siloc.numa auto
  s create --bundle "$T/$id" "$id" >"$T/$id.out" 2>"$T/$id.err" || fail "create $id: $(cat "$T/$id.err")"
  s start "$id" || fail "start $id"
  cg=$(cgroup_dir "$(state_field $id .pid)")
  cpus=$(cat "$cg/cpuset.cpus.effective") mems=$(cat "$cg/cpuset.mems.effective")
  note "node $n ($dev): cpuset.cpus.effective=$cpus cpuset.mems.effective=$mems; annotations: $(state_field $id '.annotations | tojson')"
  [ "$(cpulist_expand "$cpus")" = "$want_cpus" ] || fail "$id: cpuset.cpus.effective $cpus, want node $n's CPUs ($want_cpus)"
  [ "$mems" = "$n" ] || fail "$id: cpuset.mems.effective $mems, want $n"
  i=0
  while [ "$(wc -l <"$T/$id.out")" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  seen_cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$T/$id.out")
  seen_mems=$(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' "$T/$id.out")
  [ "$(cpulist_expand "$seen_cpus")" = "$want_cpus" ] || fail "$id sees Cpus_allowed_list $seen_cpus"
  [ "$seen_mems" = "$n" ] || fail "$id sees Mems_allowed_list $seen_mems"
  s kill "$id" KILL; wait_status "$id" stopped || fail "$id not stopped"
  s delete "$id" || fail "delete $id"
  left=$(leftovers)
  [ -z "$left" ] || fail "left behind: $left"
done
