# shellcheck shell=sh
# linux.memoryPolicy on a kernel that lacks a runtime-spec 1.2 mode: Linux 6.1 has no
# MPOL_WEIGHTED_INTERLEAVE (6.9+). `siloc features` lists the modes and flags the
# running kernel takes (one set_mempolicy probe per mode, sys::mempolicy), and create
# refuses the missing mode by name, in runc 1.4's words, leaving nothing behind; a mode
# the kernel has runs, on both NUMA nodes.
case $(uname -r) in
  [0-5].* | 6.[0-8].* | 6.[0-8]-*) ;;
  *) skip "kernel $(uname -r) has MPOL_WEIGHTED_INTERLEAVE" ;;
esac
modes=$(siloc features | jq -r '.linux.memoryPolicy.modes | join(" ")')
note "features: $modes"
case " $modes " in
  *" MPOL_WEIGHTED_INTERLEAVE "*) fail "features lists MPOL_WEIGHTED_INTERLEAVE on $(uname -r)" ;;
esac
case " $modes " in
  *" MPOL_INTERLEAVE "*) ;;
  *) fail "features lacks MPOL_INTERLEAVE: $modes" ;;
esac
flags=$(siloc features | jq -r '.linux.memoryPolicy.flags | join(" ")')
[ "$flags" = "MPOL_F_NUMA_BALANCING MPOL_F_RELATIVE_NODES MPOL_F_STATIC_NODES" ] ||
  fail "features flags: $flags"

make_rootfs "$T/w/rootfs"
make_bundle "$T/w" true
edit_spec "$T/w" '.linux.memoryPolicy={mode: "MPOL_WEIGHTED_INTERLEAVE", nodes: "0-1"}'
if s create --bundle "$T/w" wi >"$T/w.out" 2>"$T/w.err"; then
  fail "create with MPOL_WEIGHTED_INTERLEAVE succeeded on $(uname -r)"
fi
# logfmt escapes the quotes: msg="... mode \"MPOL_WEIGHTED_INTERLEAVE\""
grep -qF 'invalid memory policy mode \"MPOL_WEIGHTED_INTERLEAVE\"' "$T/w.err" ||
  fail "create error does not name the mode: $(cat "$T/w.err")"
s state wi >/dev/null 2>&1 && fail "state of the refused container exists"

make_rootfs "$T/i/rootfs"
make_bundle "$T/i" sh -c 'grep -m1 interleave /proc/self/numa_maps | cut -d" " -f2'
edit_spec "$T/i" '.linux.memoryPolicy={mode: "MPOL_INTERLEAVE", nodes: "0-1"}'
out=$(s run --bundle "$T/i" il 2>"$T/i.err") || fail "run with MPOL_INTERLEAVE: $(cat "$T/i.err")"
[ "$out" = "interleave:0-1" ] || fail "numa_maps policy: $out"
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
