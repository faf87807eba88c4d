# shellcheck shell=sh
# Helpers for the VM suite's guest-side tests (busybox sh inside hack/vm's guest).
# The runner sets: T (this test's scratch dir, on node 0's disk), STATE (a private
# state root) and CONF (a private host config); each test sources this file.
#
# Exit status of a test: 0 PASS, 77 SKIP (last "SKIP: ..." line says why), else FAIL.

set -u

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
note() { echo "-- $*"; }

# siloc with this test's state root and config.
s() { siloc --root "$STATE" --config "$CONF" "$@"; }

# Commands whose container inherits stdio (create, run -d): output to files, never
# pipes (the container would hold the pipe open). Prints stderr when it fails.
s_detached() {
  s "$@" >"$T/detached.out" 2>"$T/detached.err" && return 0
  cat "$T/detached.out" "$T/detached.err" >&2
  return 1
}

# write_config [EXTRA TOML...]: the test's config with data_root $DATA_ROOT.
write_config() {
  {
    printf 'data_root = "%s"\n' "${DATA_ROOT:-$T/data}"
    for l in "$@"; do printf '%s\n' "$l"; done
  } >"$CONF"
}

# make_rootfs DIR: a busybox rootfs (the guest's busybox is Debian's static one).
make_rootfs() {
  mkdir -p "$1/bin" "$1/proc" "$1/sys" "$1/dev" "$1/tmp" "$1/etc" "$1/root" "$1/var"
  cp /bin/busybox "$1/bin/busybox"
  # Symlinks to /bin/busybox, made by busybox itself: one exec, not one per applet.
  busybox --install -s "$1/bin"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$1/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$1/etc/group"
}

# make_bundle DIR ARG...: config.json from `siloc spec` (terminal off, writable root)
# running ARG...; rootfs left empty (fill it with make_rootfs or give layers).
make_bundle() {
  b=$1; shift
  mkdir -p "$b/rootfs"
  siloc spec --bundle "$b" || fail "siloc spec --bundle $b"
  # One --arg per argument: arguments may hold newlines (and jq would eat "-c").
  # shellcheck disable=SC2016 # $a is jq's variable
  args=$(for a in "$@"; do jq -n --arg a "$a" '$a'; done | jq -sc .)
  # shellcheck disable=SC2016 # $a is jq's variable
  edit_spec "$b" --argjson a "$args" '.process.terminal=false | .process.args=$a | .root.readonly=false'
}

# edit_spec BUNDLE [JQ ARGS...] FILTER
edit_spec() {
  b=$1; shift
  jq "$@" "$b/config.json" >"$b/config.json.new" || fail "jq $* on $b/config.json"
  mv "$b/config.json.new" "$b/config.json"
}

# annotate BUNDLE KEY VALUE
# shellcheck disable=SC2016 # $k and $v are jq's variables
annotate() { edit_spec "$1" --arg k "$2" --arg v "$3" '.annotations[$k]=$v'; }

# state_field ID JQ-FILTER
state_field() { s state "$1" | jq -r "$2"; }

# cgroup_dir PID: the process' cgroup v2 directory.
cgroup_dir() { echo "/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$1/cgroup")"; }

# wait_status ID STATUS: up to 5 s.
wait_status() {
  i=0
  while [ $i -lt 100 ]; do
    [ "$(state_field "$1" .status 2>/dev/null)" = "$2" ] && return 0
    sleep 0.05; i=$((i + 1))
  done
  return 1
}

# uptime_cs: centiseconds since boot (guest clock, for elapsed times).
uptime_cs() { awk '{ split($1, a, "."); print a[1] * 100 + a[2] }' /proc/uptime; }

# has_command NAME: whether `siloc --help` lists command NAME.
has_command() { siloc --help 2>/dev/null | grep -Eq "^ +$1( |$)"; }

# cpulist_expand LIST: "0-2,5" -> "0 1 2 5", for comparing CPU lists.
cpulist_expand() {
  echo "$1" | tr ',' '\n' | while IFS=- read -r a b; do
    [ -n "$a" ] || continue
    seq "$a" "${b:-$a}"
  done | tr '\n' ' ' | sed 's/ $//'
}

# mounts_under DIR: mount points at or under DIR (this mount namespace).
mounts_under() { awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo; }

# Deletes every container of this test, then unmounts what is left under $T. Runs on
# exit, also when the test fails.
cleanup() {
  for id in $(s list -q 2>/dev/null); do s delete --force "$id" >/dev/null 2>&1; done
  for d in "$STATE"/.siloc/containers/*; do
    [ -e "$d" ] && s delete --force "${d##*/}" >/dev/null 2>&1
  done
  for m in $(mounts_under "$T" | sort -r); do umount -l "$m" 2>/dev/null; done
}
trap cleanup EXIT

# leftovers: what siloc left behind in this test's state root, data root and mounts.
leftovers() {
  entries "$STATE" | grep -vx '\.siloc' | sed 's/^/state root entry /'
  entries "$STATE/.siloc/containers" | sed 's/^/record /'
  entries "${DATA_ROOT:-$T/data}/containers" | sed 's/^/data dir /'
  mounts_under "$T" | sed 's/^/mount /'
}

# entries DIR: the names in DIR (dot files too), one a line; nothing when DIR is missing.
entries() { find "$1" -mindepth 1 -maxdepth 1 2>/dev/null | sed 's|.*/||'; }

# feature_refuses KEY VALUE: whether siloc knows annotation KEY, judged by `create`
# refusing the bad VALUE with an error that names KEY (an unknown io.siloc.*
# annotation is ignored, as runtimes ignore annotations they do not know). Uses a
# throwaway busybox bundle; leaves nothing behind.
feature_refuses() {
  pb=$T/probe-$$
  make_rootfs "$pb/rootfs"
  make_bundle "$pb" true
  annotate "$pb" "$1" "$2"
  if s create --bundle "$pb" probe >"$pb.out" 2>"$pb.err"; then
    s delete --force probe >/dev/null 2>&1
    rm -rf "$pb"
    return 1
  fi
  grep -q "$1" "$pb.err" || fail "probe create with $1=$2 failed without naming $1: $(cat "$pb.err")"
  rm -rf "$pb"
  return 0
}

# timed_dd ID MIB [DD ARGS...]: writes MIB MiB of zeros to /dd.out inside running
# container ID (siloc exec) and prints the elapsed centiseconds, measured inside.
timed_dd() {
  id=$1 mib=$2; shift 2
  # shellcheck disable=SC2016 # shell code for the container's shell
  dd_out=$(s exec "$id" sh -c 'a=$(cut -d" " -f1 /proc/uptime)
    dd if=/dev/zero of=/dd.out bs=1M count='"$mib"' "$@" 2>/dev/null || exit 9
    b=$(cut -d" " -f1 /proc/uptime)
    echo "$a $b"' sh "$@") || fail "dd in $id failed: $dd_out"
  echo "$dd_out" | awk '{ printf "%d\n", ($2 - $1) * 100 }'
}

# rate MIB CS: bytes per second of MIB MiB in CS centiseconds.
rate() { awk -v m="$1" -v c="$2" 'BEGIN { printf "%d\n", m * 1048576 * 100 / (c > 0 ? c : 1) }'; }
