#!/usr/bin/env bash
# Bundles made with `siloc spec` (edited with jq: terminal, args, hostname) over the
# busybox and Debian test images unpacked with umoci, run by siloc directly, and the
# same bundles under runc: both must print the same (ids, capabilities, limits,
# mounts and their ro/rw, devices, masked and read-only paths, namespaces, the Debian
# userland). umoci 0.4 cannot read zstd layers, so the Debian layout is first copied
# to gzip layers with skopeo.
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
. "$(dirname "$0")/lib/e2e.sh"
e2e_images busybox debian

RUNC=$(type -P runc)
mkdir -p "$T/siloc-root" "$T/runc-root"
siloc() { timeout -k 5 120 "$SILOC" --root "$T/siloc-root" "$@"; }
runc() { timeout -k 5 120 "$RUNC" --root "$T/runc-root" "$@"; }
# shellcheck disable=SC2016 # expanded when the cleanup runs (e2e_at_exit evals it)
e2e_at_exit 'for id in $(siloc list -q); do siloc delete --force "$id"; done'
# shellcheck disable=SC2016 # expanded when the cleanup runs (e2e_at_exit evals it)
e2e_at_exit 'for id in $(runc list -q); do runc delete --force "$id"; done'

# new_bundle DIR ROOTFS ARGS-JSON: `siloc spec` in DIR, root.path ROOTFS, the process
# without a terminal running ARGS, a fixed hostname, a writable rootfs.
new_bundle() {
  mkdir -p "$1"
  siloc spec --bundle "$1"
  jq --arg r "$2" --argjson a "$3" \
    '.root = {path: $r, readonly: false} | .process.terminal = false | .process.args = $a
     | .hostname = "bundle"' "$1/config.json" >"$1/config.tmp"
  mv "$1/config.tmp" "$1/config.json"
}

# both NAME BUNDLE: runs BUNDLE with siloc and with runc (ids NAME-siloc, NAME-runc),
# stdin from /dev/null; prints nothing, leaves NAME.siloc/NAME.runc (output then
# "exit N") in $T.
both() {
  local rc
  rc=0; siloc run --bundle "$2" "$1-siloc" </dev/null >"$T/$1.siloc" 2>&1 || rc=$?
  echo "exit $rc" >>"$T/$1.siloc"
  rc=0; runc run --bundle "$2" "$1-runc" </dev/null >"$T/$1.runc" 2>&1 || rc=$?
  echo "exit $rc" >>"$T/$1.runc"
}

# same NAME: siloc's and runc's outputs are equal (the diff is the failure message).
same() {
  if ! diff -u "$T/$1.runc" "$T/$1.siloc" >&2; then
    echo "$1: siloc's output (+) differs from runc's (-)" >&2
    return 1
  fi
}

c_spec_is_runcs() {
  mkdir -p "$T/spec/siloc" "$T/spec/runc" "$T/spec/siloc-rl" "$T/spec/runc-rl"
  siloc spec --bundle "$T/spec/siloc"
  runc spec --bundle "$T/spec/runc"
  siloc spec --rootless --bundle "$T/spec/siloc-rl"
  runc spec --rootless --bundle "$T/spec/runc-rl"
  # Only the hostname ("siloc") and the runtime-spec version siloc implements differ.
  local norm='del(.hostname, .ociVersion)'
  diff -u <(jq -S "$norm" "$T/spec/runc/config.json") <(jq -S "$norm" "$T/spec/siloc/config.json")
  diff -u <(jq -S "$norm" "$T/spec/runc-rl/config.json") <(jq -S "$norm" "$T/spec/siloc-rl/config.json")
  expect_eq "$(jq .process.terminal "$T/spec/siloc/config.json")" true "terminal as generated"
  # runc's refusal to overwrite.
  local err rc=0
  err=$(siloc spec --bundle "$T/spec/siloc" 2>&1) || rc=$?
  expect_eq "$rc" 1 "spec over an existing config.json"
  expect_match "$err" 'config.json exists' "its message"
}

c_unpack() {
  umoci unpack --image "$SILOC_IMAGE_BUSYBOX:localhost/siloc/busybox:latest" "$T/img/busybox"
  skopeo copy --quiet --dest-compress --dest-compress-format gzip \
    "oci:$SILOC_IMAGE_DEBIAN:localhost/siloc/debian:latest" "oci:$T/img/debian-gzip:latest"
  umoci unpack --image "$T/img/debian-gzip:latest" "$T/img/debian"
  rm -rf "$T/img/debian-gzip"
  [ -x "$T/img/busybox/rootfs/bin/busybox" ]
  [ -x "$T/img/debian/rootfs/usr/bin/apt-get" ]
}

# What a process sees of its container, one fact per line, in a stable order.
# shellcheck disable=SC2016 # run by the container's shell (sh -c "$PROBE")
PROBE='
exec 2>&1 # one stream: runc relays output through pipes, siloc passes its fds on
echo "id: $(id)"; echo "hostname: $(hostname)"; echo "cwd: $PWD umask: $(umask)"
env | sort
grep -E "^(Cap|NoNewPrivs|Seccomp|Uid|Gid|Groups)" /proc/self/status
echo "oom_score_adj: $(cat /proc/self/oom_score_adj)"
ulimit -a
# mount point, type, ro/rw of the mount itself
awk "{ for (i = 7; i <= NF; i++) if (\$i == \"-\") break; split(\$6, o, \",\"); print \$5, \$(i+1), o[1] }" /proc/self/mountinfo
ls -ln /dev | awk "NR > 1 { print \$1, \$3, \$4, \$5, \$6, \$NF }"
for p in /proc/kcore /proc/keys /proc/timer_list /proc/acpi /proc/scsi /sys/firmware; do
  printf "%s: %s\n" "$p" "$(cat "$p" 2>&1 | head -c 60; ls "$p" 2>&1 | head -c 60)"
done
for p in /proc/sys/kernel/hostname /proc/sysrq-trigger /proc/bus/x /proc/irq/x /sys/kernel/x; do
  printf "%s: %s\n" "$p" "$( (echo x >"$p") 2>&1 | sed "s/.*: //")"
done
for c in pids memory cpu blkio; do
  printf "cgroup %s: %s\n" "$c" "$( (echo 1 >"/sys/fs/cgroup/$c/tasks") 2>&1 | sed "s/.*: //")"
done
echo "namespaces: $(ls /proc/self/ns | tr "\n" " ")"
echo "pid: $$"
exit 3
'

c_busybox_same_as_runc() {
  new_bundle "$T/bb" "$T/img/busybox/rootfs" "$(jq -cn --arg p "$PROBE" '["sh", "-c", $p]')"
  both bb "$T/bb"
  same bb
  expect_match "$(cat "$T/bb.siloc")" '^exit 3$' "exit status"
  expect_match "$(cat "$T/bb.siloc")" '^hostname: bundle$' "hostname from the bundle"
}

# The container's cgroup files are read-only, as the spec's cgroup mount says (runc
# remounts them ro; a writable pids.max or blkio throttle would let a container lift
# its own limits).
c_cgroup_mount_read_only() {
  new_bundle "$T/cg" "$T/img/busybox/rootfs" \
    '["sh","-c","exec 2>&1; cat /sys/fs/cgroup/pids/pids.max; echo 77 > /sys/fs/cgroup/pids/pids.max; cat /sys/fs/cgroup/pids/pids.max"]'
  jq '.linux.resources.pids = {limit: 50}' "$T/cg/config.json" >"$T/cg/c" && mv "$T/cg/c" "$T/cg/config.json"
  both cg "$T/cg"
  same cg
  expect_match "$(cat "$T/cg.siloc")" 'Read-only file system' "writing pids.max"
}

DEBIAN_PROBE='
exec 2>&1
apt-get --version | head -n1; dpkg -l | grep -c ^ii
cd / && grep -E " (usr/)?s?bin/" /var/lib/dpkg/info/coreutils.md5sums /var/lib/dpkg/info/apt.md5sums |
  cut -d: -f2- | md5sum -c --quiet && echo verified; cd /root
perl -e "print qq(perl ok\n)"; getent passwd root; ls /usr/share/locale
test ! -e /etc/motd && test ! -e /usr/share/info && echo whiteouts ok
id -un; exit 4
'

c_debian_same_as_runc() {
  new_bundle "$T/deb" "$T/img/debian/rootfs" "$(jq -cn --arg p "$DEBIAN_PROBE" '["bash", "-c", $p]')"
  both deb "$T/deb"
  same deb
  local out
  out=$(cat "$T/deb.siloc")
  expect_match "$out" '^apt 2\.' "apt-get --version"
  expect_match "$out" '^verified$' "coreutils' and apt's binaries match dpkg's md5sums"
  expect_match "$out" '^perl ok$' "perl"
  expect_match "$out" '^whiteouts ok$' "whiteouts"
  expect_match "$out" '^README.siloc$' "opaque directory"
  expect_match "$out" '^exit 4$' "exit status"
}

# A Debian container through siloc's whole lifecycle, writing into its rootfs.
c_debian_lifecycle() {
  new_bundle "$T/deb2" "$T/img/debian/rootfs" '["sleep","1000"]'
  siloc create --bundle "$T/deb2" deb2 </dev/null >/dev/null 2>"$T/deb2.err"
  expect_eq "$(siloc state deb2 | jq -r .status)" created "state after create"
  siloc start deb2
  expect_eq "$(siloc state deb2 | jq -r .status)" running "state after start"
  expect_eq "$(siloc exec deb2 bash -c 'dpkg -s apt | grep ^Status')" "Status: install ok installed" "exec dpkg"
  siloc exec deb2 bash -c 'echo written-by-debian > /root/note; apt-config dump | grep -c . > /root/aptconf'
  expect_eq "$(cat "$T/img/debian/rootfs/root/note")" written-by-debian "file on the host"
  [ "$(cat "$T/img/debian/rootfs/root/aptconf")" -gt 10 ]
  expect_eq "$(siloc exec --user 65534:65534 deb2 id -un)" nobody "exec --user"
  expect_match "$(siloc ps deb2)" 'sleep 1000' "siloc ps"
  siloc kill deb2 KILL
  for _ in $(seq 50); do [ "$(siloc state deb2 | jq -r .status)" = stopped ] && break; sleep 0.1; done
  expect_eq "$(siloc state deb2 | jq -r .status)" stopped "state after kill"
  siloc delete deb2
  expect_eq "$(siloc list -q)" "" "list after delete"
}

# The spec as generated (terminal: true): siloc run gives the process its own pty.
c_terminal_bundle() {
  mkdir -p "$T/tty"
  siloc spec --bundle "$T/tty"
  jq --arg r "$T/img/busybox/rootfs" '.root.path = $r | .process.args = ["sh"]' \
    "$T/tty/config.json" >"$T/tty/c" && mv "$T/tty/c" "$T/tty/config.json"
  local out rc=0
  # shellcheck disable=SC2016 # typed into the container's shell
  out=$(ptyrun --timeout 60 --rows 40 --cols 120 \
    --expect '# ' --send 'tty; stty size; echo answer=$((6*7))\n' \
    --expect 'answer=42' --send 'exit 6\n' \
    -- "$SILOC" --root "$T/siloc-root" run --bundle "$T/tty" tty1) || rc=$?
  out=$(clean_tty "$out")
  expect_eq "$rc" 6 "exit status"
  expect_match "$out" '^/dev/pts/0$' "the container's own pty"
  expect_match "$out" '^40 120$' "window size"
  expect_match "$out" '^answer=42$' "interactive input"
}

c_leftovers() {
  expect_eq "$(siloc list -q)" "" "siloc list"
  expect_eq "$(ls "$T/siloc-root")" "" "siloc's root"
  expect_eq "$(awk -v t="$T" 'index($5, t "/") == 1' /proc/self/mountinfo)" "" "mounts"
}

e2e_case "siloc spec (and --rootless) writes runc's default config.json" c_spec_is_runcs
e2e_case "umoci unpacks busybox and Debian (via skopeo to gzip)" c_unpack
e2e_case "busybox bundle: siloc and runc show the container the same" c_busybox_same_as_runc
e2e_case "cgroup v1 files are read-only in the container, as under runc" c_cgroup_mount_read_only
e2e_case "Debian bundle: apt, binaries match dpkg md5sums, perl, whiteouts; same as runc" c_debian_same_as_runc
e2e_case "Debian bundle: create, start, exec, ps, kill, delete; writes files" c_debian_lifecycle
e2e_case "bundle with terminal: true on a pty: interactive shell, window size" c_terminal_bundle
e2e_case "nothing left: containers, state, mounts" c_leftovers
e2e_finish
