#!/usr/bin/env bash
# hack/images' oci-archives in the real clients, with their default runtimes (so this
# proves the images, independently of siloc): containerd 1.6 started here from a
# temporary directory (`ctr image import`, `ctr run`) and podman 4.3 with a private
# storage root (`podman load`, `podman pull oci-archive:`, `podman run`).
# Run as root. Skips (exit 77, last line "SKIP: reason") when not root or when the
# Debian mirror cannot be reached. It runs no siloc, so it builds none.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" = 0 ] || { echo "SKIP: integration/images.sh: needs root"; exit 77; }
rc=0
bash hack/images busybox debian || rc=$?
if [ "$rc" = 77 ]; then echo "SKIP: integration/images.sh: the Debian mirror cannot be reached"; exit 77; fi
[ "$rc" = 0 ] || exit "$rc"
# shellcheck disable=SC1091
. hack/.cache/images/images.env

T=$(mktemp -d /var/tmp/siloc-images-e2e.XXXXXX)
ctrd_pid=""
cleanup() {
  if [ -n "$ctrd_pid" ]; then kill "$ctrd_pid" 2>/dev/null || true; wait "$ctrd_pid" 2>/dev/null || true; fi
  { grep -o " ${T}[^ ]*" /proc/self/mountinfo || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
id=e2e-$$

echo "== containerd: ctr image import + ctr run"
containerd --root "$T/ctrd/root" --state "$T/ctrd/state" --address "$T/ctrd/sock" \
  >"$T/containerd.log" 2>&1 &
ctrd_pid=$!
for _ in $(seq 50); do [ -S "$T/ctrd/sock" ] && break; sleep 0.1; done
ctr=(ctr --address "$T/ctrd/sock")
for a in "$SILOC_ARCHIVE_BUSYBOX" "$SILOC_ARCHIVE_DEBIAN"; do "${ctr[@]}" image import "$a"; done
# Listed first, then searched: `grep -q` stops reading at its match, and the writer's
# SIGPIPE then fails the pipeline under pipefail.
imgs=$("${ctr[@]}" image ls -q)
grep -qx localhost/siloc/busybox:latest <<<"$imgs" || fail "ctr: busybox not imported"
out=$("${ctr[@]}" run --rm localhost/siloc/busybox:latest "$id-bb" sh -c 'echo busybox ok')
[ "$out" = "busybox ok" ] || fail "ctr busybox: $out"
out=$("${ctr[@]}" run --rm localhost/siloc/debian:latest "$id-deb" sh -c \
  'apt-get --version | head -n1; dpkg -l | grep -c "^ii"; test ! -e /etc/motd && test ! -e /usr/share/info && ls /usr/share/locale')
echo "$out"
grep -q '^apt 2\.' <<<"$out" || fail "ctr debian: no apt"
grep -qx 'README.siloc' <<<"$out" || fail "ctr debian: opaque /usr/share/locale not honoured"
kill "$ctrd_pid"; wait "$ctrd_pid" 2>/dev/null || true; ctrd_pid=""

echo "== podman: load, pull oci-archive:, run"
podman=(podman --root "$T/podman/root" --runroot "$T/podman/run" --tmpdir "$T/podman/tmp"
  --storage-driver vfs --cgroup-manager cgroupfs --events-backend none)
# This host's hard limits are below podman's defaults (nofile 1048576): ask for less.
limits=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --network none)
"${podman[@]}" load -i "$SILOC_ARCHIVE_BUSYBOX"
"${podman[@]}" pull -q "oci-archive:$SILOC_ARCHIVE_DEBIAN"
imgs=$("${podman[@]}" images --format '{{.Repository}}:{{.Tag}}')
grep -qx localhost/siloc/debian:latest <<<"$imgs" ||
  fail "podman: debian not named localhost/siloc/debian:latest"
out=$("${podman[@]}" run --rm "${limits[@]}" localhost/siloc/busybox:latest sh -c 'echo busybox ok')
[ "$out" = "busybox ok" ] || fail "podman busybox: $out"
out=$("${podman[@]}" run --rm "${limits[@]}" localhost/siloc/debian:latest sh -c \
  'apt-get --version | head -n1; test ! -e /etc/issue.net && ls /usr/share/locale')
echo "$out"
grep -q '^apt 2\.' <<<"$out" || fail "podman debian: no apt"
grep -qx 'README.siloc' <<<"$out" || fail "podman debian: opaque /usr/share/locale not honoured"
echo "integration/images.sh: ok"
