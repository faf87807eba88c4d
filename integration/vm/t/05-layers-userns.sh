# shellcheck shell=sh
# A 50-layer rootfs under a per-container user namespace on kernel 6.1: overlayfs there
# has no "lowerdir+", so siloc takes its fallback (mount(2) with /proc/self/fd/N paths
# into the detached, idmapped tree). Still one mount attached; image files owned by
# root inside; writes land in the upper dir with the container's host IDs.
N=50
L=$VM_NODE0/layers50
rm -rf "$L"
make_rootfs "$L/0"
echo 0 >"$L/0/etc/marker"
i=1
while [ $i -lt $N ]; do
  mkdir -p "$L/$i/layers" "$L/$i/etc"
  echo "$i" >"$L/$i/layers/$i"
  echo "$i" >"$L/$i/etc/marker"   # the top layer's copy wins
  i=$((i + 1))
done
chown 1000:1000 "$L/5/layers/5"
layers=$(i=0; while [ $i -lt $N ]; do echo "$L/$i"; i=$((i + 1)); done | jq -R . | jq -sc .)

# What the container's own process sees (its stdout goes to $T/<id>.out).
VIEW='id -u; cat /proc/self/uid_map; ls /layers | wc -l; cat /etc/marker;
  stat -c "%u:%g" /bin/busybox /layers/5 /layers/6; touch /written && echo written'

start_layered() {  # start_layered ID: a container over the 50 layers
  make_bundle "$T/$1" sh -c "$VIEW; exec sleep 1000"
  annotate "$T/$1" io.siloc.rootfs.layers "$layers"
  annotate "$T/$1" io.siloc.userns auto
  s create --bundle "$T/$1" "$1" >"$T/$1.out" 2>"$T/$1.err" || fail "create $1: $(cat "$T/$1.err")"
  s start "$1" || fail "start $1"
  i=0
  while ! grep -q "^written$" "$T/$1.out" && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
}

# check_view ID UID: the container's view of the 50 layers, and its write.
check_view() {
  note "$1 inside: $(cat "$T/$1.out" "$T/$1.err" | tr '\n' ' ')"
  # shellcheck disable=SC2046 # the output's words become $3.. on purpose
  set -- "$1" "$2" $(cat "$T/$1.out")
  [ "$3" = 0 ] || fail "$1: id -u inside: $3"
  [ "$4 $5 $6" = "0 $2 65536" ] || fail "$1: uid_map inside: $4 $5 $6"
  [ "$7" = $((N - 1)) ] || fail "$1: files from layers 1..49: $7"
  [ "$8" = $((N - 1)) ] || fail "$1: /etc/marker from the top layer: $8"
  [ "$9" = 0:0 ] || fail "$1: /bin/busybox owner inside: $9"
  [ "${10}" = 1000:1000 ] || fail "$1: /layers/5 owner inside: ${10}"
  [ "${11}" = 0:0 ] || fail "$1: /layers/6 owner inside: ${11}"
  [ "${12}" = written ] || fail "$1: write to the rootfs: ${12}"
  up=$T/data/containers/$1/upper
  [ "$(stat -c %u:%g "$up/written")" = "$2:$2" ] ||
    fail "$1: upper file owner $(stat -c %u:%g "$up/written"), want $2"
}

range_uid() {  # range_uid ID: host uid of container root, from siloc's annotation
  state_field "$1" '.annotations["io.siloc.userns.range"]' | sed -n 's/^uid=\([0-9]*\),.*/\1/p'
}

start_layered c1
asm=$(state_field c1 '.annotations["io.siloc.rootfs.assembly"]')
[ "$asm" = "overlay layers=50 trees=1 idmapped=yes attached=1 via=mount(2)" ] || fail "assembly annotation: $asm"
uid=$(range_uid c1)
{ [ -n "$uid" ] && [ "$uid" -gt 0 ]; } || fail "userns range annotation: $(s state c1)"

# Nothing on the host's mount table: siloc attaches the rootfs in the namespace the
# container is created from. In the container's table "/" is the fallback's overlay:
# lowerdir= with /proc/self/fd paths.
[ -z "$(mounts_under "$T/c1")" ] || fail "mounts under the bundle: $(mounts_under "$T/c1")"
pid=$(state_field c1 .pid)
mi=$(awk '$5 == "/"' "/proc/$pid/mountinfo")
note "mountinfo: $(echo "$mi" | cut -c1-200)..."
echo "$mi" | grep -q ' - overlay siloc-c1 ' || fail "not siloc's overlay at the container's /: $mi"
echo "$mi" | grep -q 'lowerdir=/proc/self/fd/' || fail "not the mount(2) fallback (want lowerdir=/proc/self/fd/...): $mi"
[ -z "$(awk '$5 ~ "^/vm/node0/layers50"' /proc/self/mountinfo)" ] || fail "layer trees attached in the host's mount table"
check_view c1 "$uid"
# siloc exec joins the container's user namespace (libcontainer's tenant alone does not).
m=$(s exec c1 cat /proc/self/uid_map | tr -s ' ' | sed 's/^ //')
[ "$m" = "0 $uid 65536" ] || fail "uid_map of a process siloc exec started: $m"
[ "$(stat -c %u "$L/0/bin/busybox")" = 0 ] || fail "layer files changed owner"

# A second container from the same layers: same view, disjoint host IDs.
start_layered c2
uid2=$(range_uid c2)
[ "$uid2" -ge $((uid + 65536)) ] || [ $((uid2 + 65536)) -le "$uid" ] || fail "ranges overlap: $uid / $uid2"
check_view c2 "$uid2"

for c in c1 c2; do
  s kill "$c" KILL; wait_status "$c" stopped || fail "$c not stopped"
  s delete "$c" || fail "delete $c"
done
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
