#!/usr/bin/env bash
# containerd-shim-siloc-v2 end to end, with containerd's CRI plugin driven as the
# kubelet drives it (integration/lib/cri.py), on Debian 12's containerd 1.6 and on
# containerd 2.1 (Debian sid's package, unpacked by hack/setup into
# hack/.cache/containerd-2.1; its cases are skipped, loudly, when it is missing).
# Each containerd runs from a temp dir (its own root, state, socket, config); siloc's
# state roots are private too.
#
# Handlers (RuntimeClass names):
#   siloc          runtime_type io.containerd.siloc.v2: the shim hands the snapshotter's
#                  overlay to siloc unmounted (siloc's one idmapped mount)
#   siloc-binary   the runc shim with BinaryName = siloc (item 2 of issue 16: a mounted
#                  overlay root.path with io.siloc.userns=auto is refused, naming the shim)
#   siloc-missing  the shim with a BinaryName that does not exist
#
# After each pod case: uid_map inside (one range per pod, shared by its containers),
# image files owned by root inside and by the range outside, `io.siloc.rootfs.assembly`
# in `siloc state` says one attached mount; after stop and remove: the mounts under
# this suite's temp dir back to none, no siloc state, no ID range held.
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
. "$(dirname "$0")/lib/e2e.sh"
e2e_images busybox layers50

SHIM=${SILOC_SHIM:-$REPO/target/release/containerd-shim-siloc-v2}
if [ ! -x "$SHIM" ]; then
  echo "$E2E_NAME: building $SHIM"
  cargo build --release --bin containerd-shim-siloc-v2 >&2 || exit 1
fi
C21=${SILOC_CONTAINERD21:-$REPO/hack/.cache/containerd-2.1/usr/bin}
C21_PROV=$(cat "${C21%/usr/bin}/PROVENANCE" 2>/dev/null || true)
BB=localhost/siloc/busybox:latest
L50=localhost/siloc/layers50:latest
PAUSE=localhost/siloc/pause:latest
SOCK=$T/containerd.sock
STATE=$T/state
CTRD_PID=""
CRI_CG=siloc-e2e-shim-$$
export CRI_LOGS=$T/pod-logs CRI_CGROUP_PARENT=/$CRI_CG
# The shim is found on containerd's PATH, as containerd-shim-siloc-v2.
mkdir -p "$T/bin" "$CRI_LOGS" "$T/cni/bin" "$T/cni/conf" "$T/pause/bin"
ln -s "$SHIM" "$T/bin/containerd-shim-siloc-v2"
SROOT=$T/siloc-root-shim
cat >"$T/siloc-shim.toml" <<EOF
BinaryName = "$SILOC"
Root = "$SROOT"
EOF
printf 'BinaryName = "/nonexistent/siloc"\nRoot = "%s"\n' "$T/siloc-root-missing" >"$T/missing.toml"

if ! /usr/bin/python3 -c 'import grpc' 2>/dev/null; then
  echo "FAIL $E2E_NAME: the CRI client needs Debian's python3-grpcio (bash hack/setup)"
  exit 1
fi
# Pods with their own network namespace: Debian's CNI loopback plugin, then a stub
# that configures nothing and reports the documentation address 192.0.2.2 on eth0
# (the CRI plugin wants an address on eth0). No host interface, route or traffic.
cp /usr/lib/cni/loopback "$T/cni/bin/"
cat >"$T/cni/bin/siloc-e2e-stub" <<'STUB'
#!/bin/sh
cat >/dev/null
case $CNI_COMMAND in
ADD) printf '{"cniVersion":"0.4.0","interfaces":[{"name":"eth0","sandbox":"%s"}],"ips":[{"version":"4","address":"192.0.2.2/32","interface":0}]}\n' "$CNI_NETNS" ;;
VERSION) echo '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}' ;;
esac
STUB
chmod +x "$T/cni/bin/siloc-e2e-stub"
echo '{"cniVersion": "0.4.0", "name": "siloc-e2e", "plugins": [{"type": "loopback"}, {"type": "siloc-e2e-stub"}]}' \
  >"$T/cni/conf/10-siloc-e2e.conflist"
cp /bin/busybox "$T/pause/bin/busybox" && ln -s busybox "$T/pause/bin/sleep"
bash hack/images dir pause "$T/pause" sleep 2147483647 >"$T/pause.log" 2>&1 ||
  { cat "$T/pause.log"; echo "FAIL $E2E_NAME: hack/images dir pause"; exit 1; }

write_config() {
  cat <<EOF
version = 2
root = "$T/root"
state = "$STATE"

[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$T/opt"
# 2.1 would serve the host's /run/nri/nri.sock (1.6 has no NRI plugin: ignored there).
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$T/cni/bin"
    conf_dir = "$T/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "siloc"
    # io.siloc.rootfs.* is allowed through on purpose: the shim must strip it.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.siloc]
      runtime_type = "io.containerd.siloc.v2"
      pod_annotations = ["io.siloc.userns", "io.siloc.userns.size", "io.siloc.rootfs.*"]
      # No options table: containerd 2.x then gives a user-namespaced pod's containers
      # runc's options with the IO owner; the shim reads \$SILOC_SHIM_CONFIG.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.siloc-binary]
      runtime_type = "io.containerd.runc.v2"
      pod_annotations = ["io.siloc.userns"]
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.siloc-binary.options]
        BinaryName = "$SILOC"
        Root = "$T/siloc-root-binary"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.siloc-missing]
      runtime_type = "io.containerd.siloc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.siloc-missing.options]
        ConfigPath = "$T/missing.toml"
EOF
}
write_config >"$T/config.toml"

# start_containerd DIR: containerd (and ctr, containerd-shim-runc-v2) from DIR.
start_containerd() {
  : >"$T/containerd.log"
  PATH="$T/bin:$1:$PATH" SILOC_SHIM_CONFIG="$T/siloc-shim.toml" "$1/containerd" --config "$T/config.toml" --root "$T/root" \
    --state "$STATE" --address "$SOCK" --log-level debug >>"$T/containerd.log" 2>&1 &
  CTRD_PID=$!
  CTR=("$1/ctr" --address "$SOCK" -n k8s.io)
  for _ in $(seq 150); do [ -S "$SOCK" ] && break; sleep 0.1; done
  [ -S "$SOCK" ] || { tail -n 30 "$T/containerd.log"; echo "FAIL $E2E_NAME: containerd did not start"; exit 1; }
}
stop_containerd() {
  [ -n "$CTRD_PID" ] || return 0
  kill "$CTRD_PID" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$CTRD_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$CTRD_PID" 2>/dev/null || true
  wait "$CTRD_PID" 2>/dev/null || true
  CTRD_PID=""
  local p
  for p in $(pgrep -f -- "-address $SOCK" || true); do kill -9 "$p" 2>/dev/null || true; done
  rm -f "$SOCK" "$SOCK.ttrpc"
}
cleanup_all() {
  local id root
  for id in $(cri pods 2>/dev/null); do cri stopp "$id"; cri rmp "$id"; done
  stop_containerd
  for root in "$T"/siloc-root-*/*/; do
    for id in $("$SILOC" --root "$root" list -q 2>/dev/null); do
      "$SILOC" --root "$root" delete --force "$id"
    done
  done
}
# shellcheck disable=SC2016 # expanded when the exit hook runs, not now
e2e_at_exit 'rmdir /sys/fs/cgroup/*/$CRI_CG /sys/fs/cgroup/unified/$CRI_CG'
e2e_at_exit cleanup_all

cri() { timeout -k 5 120 /usr/bin/python3 "$E2E_LIB/cri.py" "$SOCK" "$@"; }
# The mounts of this suite (under T, or siloc's overlays named siloc-<id>) now.
our_mounts() { awk -v t="$T" 'index($5, t "/") == 1 || index($4, t "/") == 1' /proc/self/mountinfo | awk '{print $5}' | sort; }
sstate() { "$SILOC" --root "$SROOT/k8s.io" state "$1"; }
pid_of() { sstate "$1" | jq -r .pid; }
uidmap_of() { tr -s ' ' <"/proc/$1/uid_map" | sed 's/^ //'; }
# wait_log FILE TEXT
wait_log() { for _ in $(seq 100); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; cat "$1" >&2; return 1; }

# check_pod POD CID IMAGE-LAYERS: the checks after each case (container running).
check_pod() {
  local pod=$1 cid=$2 layers=$3 pp cp pm cm host st
  pp=$(pid_of "$pod") cp=$(pid_of "$cid")
  pm=$(uidmap_of "$pp") cm=$(uidmap_of "$cp")
  expect_match "$pm" '^0 [0-9]+ [0-9]+$' "the sandbox's uid_map: one range"
  expect_eq "$cm" "$pm" "the app container's uid_map is the sandbox's"
  [ "$(awk '{print $2}' <<<"$pm")" != 0 ] || { echo "uid_map maps to host root: $pm" >&2; return 1; }
  expect_eq "$(readlink "/proc/$cp/ns/user")" "$(readlink "/proc/$pp/ns/user")" "one user namespace per pod"
  host=$(awk '{print $2}' <<<"$pm")
  expect_eq "$(cri exec "$cid" stat -c %u:%g /bin/busybox)" "0:0" "image files are root's inside"
  expect_eq "$(stat -c %u:%g "/proc/$cp/root/bin/busybox")" "$host:$host" "and the range's outside"
  for c in "$pod" "$cid"; do
    st=$(sstate "$c" | jq -r '.annotations["io.siloc.rootfs.assembly"]')
    expect_match "$st" " attached=1 " "$c: io.siloc.rootfs.assembly"
    expect_match "$st" "^overlay .*idmapped=yes" "$c: idmapped overlay"
  done
  expect_match "$(sstate "$cid" | jq -r '.annotations["io.siloc.rootfs.assembly"]')" "^overlay layers=$layers " "layers"
  # cgroup v1: the app container, in the sandbox's PID namespace (pid mode POD), sees
  # its own cgroup read-only (engine::pidns_cgroup; libcontainer bound another's). The
  # top mount there: under a user namespace /sys is the host's rbind, whose cgroup
  # mounts stay listed below the tmpfs that hides them.
  if [ -d /sys/fs/cgroup/pids ]; then
    expect_eq "$(awk '$5 == "/sys/fs/cgroup/pids" {print $4, substr($6, 1, 3)}' "/proc/$cp/mountinfo" | tail -n 1)" \
      "$(awk -F: '$2 == "pids" {print $3}' "/proc/$cp/cgroup") ro," "the app container's pids cgroup mount"
  fi
  # The pod's own io.siloc.rootfs.* never reaches siloc: the shim's values do.
  expect_match "$(sstate "$cid" | jq -r '.annotations["io.siloc.rootfs.upper"]')" "^$T/root/.*/snapshots/[0-9]+/fs$" "upper from the snapshotter"
  # siloc attaches the rootfs in the container's mount namespace only: the host's
  # table has no mount at root.path; the container's "/" is the one overlay.
  expect_eq "$(awk -v r="$STATE/io.containerd.runtime.v2.task/k8s.io/$cid/rootfs" '$5 == r' /proc/self/mountinfo)" "" "no rootfs mount on the host"
  expect_eq "$(awk '$5 == "/"' "/proc/$cp/mountinfo" | sed 's/.* - //' | awk '{print $1}' | tr '\n' ' ')" "overlay " "the container's / mounts"
}

# leftovers BEFORE-MOUNTS: nothing of the pods left.
leftovers() {
  expect_eq "$(our_mounts)" "$(cat "$1")" "mounts under T"
  expect_eq "$(awk -v s="$STATE/io.containerd.runtime.v2.task" 'index($5, s) == 1' /proc/self/mountinfo)" "" "rootfs mounts"
  expect_eq "$("$SILOC" --root "$SROOT/k8s.io" list -q 2>/dev/null)" "" "siloc's containers"
  # The host's ID pool (siloc's default [userns] pool_dir): no entry of a state root
  # under T (the table is removed when empty; other roots' entries are not ours).
  expect_eq "$(jq --arg t "$(realpath -m "$T")/" '[.entries[] | select(.root | startswith($t))] | length' /run/siloc-idpool/ranges.json 2>/dev/null || echo 0)" 0 "ID ranges held"
  expect_eq "$(find "$STATE/io.containerd.runtime.v2.task/k8s.io" -mindepth 1 -maxdepth 1 2>/dev/null)" "" "bundles"
  expect_eq "$(pgrep -f -- "containerd-shim-siloc-v2 .*-address $SOCK" || true)" "" "shims"
}

# RemovePodSandbox is retried once, as the kubelet retries it every sync: after the
# pod's shim died, containerd 2.1 can fail it with "ttrpc: closed" while it is still
# cleaning up the dead shim's tasks.
stop_rm() { cri stopp "$1" && { cri rmp "$1" 2>/dev/null || { sleep 0.5; cri rmp "$1"; }; }; }

# The siloc shims of this suite's containerd, one pid a line.
our_shims() { pgrep -f -- "containerd-shim-siloc-v2 .*-address $SOCK" || true; }
# pod_socket POD: the shim socket of a pod's group (containerd's rule, sha256 of
# "<containerd address>/<namespace>/<sandbox id>", crate::group::address).
pod_socket() { echo "/run/containerd/s/$(printf %s "$SOCK/k8s.io/$1" | sha256sum | cut -d' ' -f1)"; }
# shim_of_pod POD: the pid of the shim serving the pod's socket.
shim_of_pod() { pgrep -f -- "containerd-shim-siloc-v2 .*-socket unix://$(pod_socket "$1")( |$)" || true; }
# wait_state CID STATE: until ContainerStatus says STATE (10 s).
wait_state() { for _ in $(seq 100); do [ "$(cri status "$1" | jq -r .state)" = "$2" ] && return 0; sleep 0.1; done; return 1; }
# Nothing of a container id left in siloc's state root, in /run/siloc*, or as a cgroup.
no_trace_of() {
  local id
  for id in "$@"; do
    expect_eq "$(find "$SROOT" /run/siloc* -name "*$id*" 2>/dev/null)" "" "$id: siloc state"
    expect_eq "$(grep -rl -- "$id" /run/siloc* 2>/dev/null)" "" "$id: named in /run/siloc*"
    expect_eq "$(find /sys/fs/cgroup/ -maxdepth 3 -path "*/$CRI_CG/*" -name "*$id*" 2>/dev/null)" "" "$id: cgroups"
  done
}

c_ready() {
  "${CTR[@]}" image import "$SILOC_ARCHIVE_BUSYBOX" >/dev/null
  "${CTR[@]}" image import "$SILOC_ARCHIVE_LAYERS50" >/dev/null
  "${CTR[@]}" image import "$T/pause.oci.tar" 2>/dev/null >/dev/null ||
    "${CTR[@]}" image import "${SILOC_IMAGES_DIR:-hack/.cache/images}/pause.oci.tar" >/dev/null
  expect_match "$(cri version)" "^containerd $CVER" "CRI Version"
  expect_match "$("$SHIM" -v)" '^  Version: +[0-9]' "the shim's -v, as the runc shim's"
  our_mounts >"$T/mounts.before"
}

# A pod with io.siloc.userns=auto through the shim: two app containers share the
# sandbox's range; logs, ExecSync exit code, a container's exit code.
c_userns_auto() {
  local pod cid cid2 out rc=0
  pod=$(cri runp web siloc io.siloc.userns=auto io.siloc.rootfs.upper=/etc)
  cid=$(cri create "$pod" web app "$BB" '["sh","-c","echo hello from a pod; cat /proc/self/uid_map; sleep 1000"]' io.siloc.userns=auto io.siloc.rootfs.upper=/etc)
  cri start "$cid"
  cid2=$(cri create "$pod" web app2 "$BB" '["sh","-c","echo second >/dev/stderr; exit 7"]' io.siloc.userns=auto)
  cri start "$cid2"
  wait_log "$CRI_LOGS/app.log" 'hello from a pod'
  expect_match "$(cat "$CRI_LOGS/app.log")" ' stdout F hello from a pod$' "container log (CRI format)"
  for _ in $(seq 50); do [ "$(cri status "$cid2" | jq -r .state)" = EXITED ] && break; sleep 0.1; done
  expect_eq "$(cri status "$cid2" | jq -c '[.state, .exit_code]')" '["EXITED",7]' "ContainerStatus of a container that exits 7"
  expect_match "$(cat "$CRI_LOGS/app2.log")" ' stderr F second$' "reopened /dev/stderr (pipe owned by the range)"
  out=$(cri exec "$cid" sh -c 'echo exec-sync; exit 3') || rc=$?
  expect_eq "$out $rc" "exec-sync 3" "ExecSync output and exit code"
  check_pod "$pod" "$cid" 1
  stop_rm "$pod"
  leftovers "$T/mounts.before"
}

# An io.siloc.userns=auto pod with a CNI pod network: containerd's CRI makes the pod's
# network namespace (/var/run/netns/cni-...) in the host's user namespace, which the
# pod's new user namespace does not own. siloc joins it before the user namespace
# (engine::outer_namespaces; libcontainer alone failed with a bare EPERM), for the
# sandbox and, through /proc/<pause>/ns/net, for the app container. Logs, ExecSync
# in the pod's netns, exit code; afterwards no netns, mount, range or state left.
c_userns_auto_podnet() {
  local pod cid cid2 out rc=0 pp cp netns
  export CRI_NETWORK=pod
  pod=$(cri runp podnet siloc io.siloc.userns=auto)
  cid=$(cri create "$pod" podnet app "$BB" '["sh","-c","echo hello from a pod network; sleep 1000"]' io.siloc.userns=auto)
  cri start "$cid"
  cid2=$(cri create "$pod" podnet quits "$BB" '["sh","-c","exit 9"]' io.siloc.userns=auto)
  cri start "$cid2"
  pp=$(pid_of "$pod") cp=$(pid_of "$cid")
  expect_eq "$(readlink "/proc/$cp/ns/net")" "$(readlink "/proc/$pp/ns/net")" "the app container is in the pod's netns"
  [ "$(readlink "/proc/$pp/ns/net")" != "$(readlink /proc/self/ns/net)" ] || { echo "the pod runs in the host's netns" >&2; return 1; }
  netns=$(sstate "$pod" | jq -r '.annotations["io.siloc.namespaces.inherited"]')
  expect_match "$netns" '^network=/var/run/netns/cni-[-0-9a-f]+$' "the sandbox: joined by siloc"
  netns=${netns#network=}
  expect_eq "$(sstate "$cid" | jq -r '.annotations["io.siloc.namespaces.inherited"]')" "network=/proc/$pp/ns/net" "the app container: joined by siloc"
  wait_log "$CRI_LOGS/app.log" 'hello from a pod network'
  for _ in $(seq 50); do [ "$(cri status "$cid2" | jq -r .state)" = EXITED ] && break; sleep 0.1; done
  expect_eq "$(cri status "$cid2" | jq -c '[.state, .exit_code]')" '["EXITED",9]' "ContainerStatus of a container that exits 9"
  out=$(cri exec "$cid" sh -c 'readlink /proc/self/ns/net; exit 4') || rc=$?
  expect_eq "$out $rc" "$(readlink "/proc/$pp/ns/net") 4" "ExecSync runs in the pod's netns, exit code"
  # containerd 2.x gives the sandbox net.ipv4.ping_group_range: siloc writes it in the
  # pod's netns (the container's root, in a user namespace that does not own it, cannot).
  # Read on the host: inside, host gids outside the range show as the overflow gid.
  if [ "$CVER" = 2.1 ]; then
    expect_eq "$(nsenter --net="/proc/$pp/ns/net" cat /proc/sys/net/ipv4/ping_group_range | tr -s '\t ' ' ')" "0 2147483647" "the sandbox's sysctl"
  fi
  check_pod "$pod" "$cid" 1
  stop_rm "$pod"
  unset CRI_NETWORK
  leftovers "$T/mounts.before"
  # containerd removes the pod's netns (file and mount); siloc held nothing of it.
  expect_eq "$(find /var/run/netns -name "${netns##*/}")" "" "the pod's netns file"
  expect_eq "$(awk -v n="${netns##*/}" '$5 ~ ("/netns/" n "$")' /proc/self/mountinfo)" "" "the pod's netns mount"
}

# The sandbox's task gone (its pause killed) while an app container lives on, with a
# pid namespace per container (the kubelet's default): containerd deletes the
# sandbox's task and its bundle, the directory the pod's shim was started in.
# ExecSync into the app container still runs (siloc's commands run from /, not the
# shim's cwd), and stop and remove clean up.
c_sandbox_gone() {
  local pod a pp out rc=0 sb
  export CRI_PID=container
  pod=$(cri runp gone siloc io.siloc.userns=auto)
  a=$(cri create "$pod" gone a "$BB" '["sleep","1000"]' io.siloc.userns=auto)
  cri start "$a"
  unset CRI_PID
  pp=$(pid_of "$pod")
  expect_match "$pp" '^[0-9]+$' "the sandbox's pid"
  [ "$(readlink "/proc/$pp/ns/pid")" != "$(readlink "/proc/$(pid_of "$a")/ns/pid")" ] || { echo "one pid namespace for the pod: $(jq -c .linux.namespaces "$STATE/io.containerd.runtime.v2.task/k8s.io/$a/config.json")" >&2; return 1; }
  kill -9 "$pp"
  sb=$STATE/io.containerd.runtime.v2.task/k8s.io/$pod
  for _ in $(seq 100); do [ -d "$sb" ] || break; sleep 0.1; done
  expect_eq "$(find "$sb" -maxdepth 0 2>/dev/null)" "" "the sandbox's bundle removed"
  expect_match "$(readlink "/proc/$(shim_of_pod "$pod")/cwd")" ' \(deleted\)$' "the shim's cwd"
  out=$(cri exec "$a" echo still-here) || rc=$?
  expect_eq "$out $rc" "still-here 0" "ExecSync in the app container"
  stop_rm "$pod"
  no_trace_of "$pod" "$a"
  leftovers "$T/mounts.before"
}

# 50 layers: one attached mount still.
c_layers50() {
  local pod cid
  pod=$(cri runp deep siloc io.siloc.userns=auto)
  cid=$(cri create "$pod" deep app "$L50" '["sleep","1000"]' io.siloc.userns=auto)
  cri start "$cid"
  check_pod "$pod" "$cid" 50
  stop_rm "$pod"
  leftovers "$T/mounts.before"
}

# hostUsers: false (CRI userns_options, containerd 2.1): the kubelet's mapping.
c_host_users_false() {
  local pod cid pm
  # containerd 2.x has the runtime make a userns pod's network namespace inside its
  # user namespace, then runs CNI there (here: loopback only).
  export CRI_USERNS=3000000:65536 CRI_NETWORK=pod
  pod=$(cri runp nohost siloc)
  cid=$(cri create "$pod" nohost app "$BB" '["sleep","1000"]')
  cri start "$cid"
  pm=$(uidmap_of "$(pid_of "$pod")")
  expect_eq "$pm" "0 3000000 65536" "the sandbox's uid_map is the kubelet's mapping"
  expect_eq "$(uidmap_of "$(pid_of "$cid")")" "$pm" "shared by the app container"
  expect_eq "$(cri exec "$cid" stat -c %u:%g /bin/busybox)" "0:0" "image files are root's inside"
  expect_eq "$(stat -c %u:%g "/proc/$(pid_of "$cid")/root/bin/busybox")" "3000000:3000000" "and the mapping's outside"
  expect_match "$(sstate "$cid" | jq -r '.annotations["io.siloc.rootfs.assembly"]')" "^overlay .*idmapped=yes attached=1 " "one attached idmapped overlay"
  stop_rm "$pod"
  unset CRI_USERNS CRI_NETWORK
  leftovers "$T/mounts.before"
}

# A container over its memory limit: the shim's TaskOOM event reaches containerd,
# whose ContainerStatus then says OOMKilled (the kubelet's reason for a restart).
c_oom() {
  local pod cid st
  pod=$(cri runp oom siloc io.siloc.userns=auto)
  # The shell doubles a string until the 16 MiB limit's OOM killer ends it.
  # shellcheck disable=SC2016 # expanded by the container's shell
  cid=$(CRI_MEMORY=16777216 cri create "$pod" oom hog "$BB" '["sh","-c","a=0123456789abcdef; while :; do a=$a$a; done"]' io.siloc.userns=auto)
  cri start "$cid"
  for _ in $(seq 200); do [ "$(cri status "$cid" | jq -r .state)" = EXITED ] && break; sleep 0.1; done
  st=$(cri status "$cid")
  expect_eq "$(jq -c '[.state, .exit_code]' <<<"$st")" '["EXITED",137]' "killed by the OOM killer"
  expect_eq "$(jq -r .reason <<<"$st")" OOMKilled "ContainerStatus reason (the shim's TaskOOM event)"
  grep -q "OOM kill in container $cid" "$T/containerd.log"
  stop_rm "$pod"
  leftovers "$T/mounts.before"
}

# hostUsers: false with volumes (containerd 2.1): containerd turns a CRI Mount's
# uidMappings/gidMappings into the spec mount's (and idmaps its own /etc/hosts,
# /etc/hostname, resolv.conf binds for such pods); the shim passes them through and
# siloc makes the idmapped bind mounts, so the volume's files keep their owners inside
# (dropped, they show the overflow ID, 65534). A volume without mappings stays plain.
c_volume_idmap() {
  local pod cid cpid
  mkdir -p "$T/vol" "$T/vol-plain"
  echo data >"$T/vol/root-file" && chown 0:0 "$T/vol/root-file"
  echo data >"$T/vol/user-file" && chown 1000:1000 "$T/vol/user-file"
  echo data >"$T/vol-plain/f" && chown 0:0 "$T/vol-plain/f"
  export CRI_USERNS=3000000:65536 CRI_NETWORK=pod CRI_VOLUMES="$T/vol:/vol:idmap,$T/vol-plain:/plain"
  pod=$(cri runp volpod siloc)
  cid=$(cri create "$pod" volpod app "$BB" '["sleep","1000"]')
  cri start "$cid"
  unset CRI_VOLUMES
  cpid=$(pid_of "$cid")
  expect_eq "$(uidmap_of "$cpid")" "0 3000000 65536" "the pod's mapping"
  expect_eq "$(cri exec "$cid" stat -c %u:%g /vol/root-file)" "0:0" "a root-owned volume file is root's inside"
  expect_eq "$(cri exec "$cid" stat -c %u:%g /vol/user-file)" "1000:1000" "a 1000-owned volume file is 1000's inside"
  expect_eq "$(cri exec "$cid" sh -c 'echo more >>/vol/root-file && cat /vol/root-file')" "data
more" "root inside writes the volume's root file"
  expect_eq "$(stat -c %u:%g "$T/vol/root-file")" "0:0" "and the host's owner stays"
  # A volume without mappings: a plain bind (files of unmapped IDs show the overflow ID).
  expect_eq "$(cri exec "$cid" stat -c %u:%g /plain/f)" "65534:65534" "an unmapped volume"
  expect_match "$(grep -o 'idmapped bind mounts passed to siloc: .*' "$T/containerd.log" | tail -n1)" '/vol\\?", .*/etc/hosts' "the shim's log"
  stop_rm "$pod"
  unset CRI_USERNS CRI_NETWORK
  leftovers "$T/mounts.before"
}

# One shim process per pod, as containerd's runc shim: a sandbox and three app
# containers are served by the shim of the pod's socket (its grouping id, the sandbox
# id). Each container's exit, exec, stop (kill) and remove works on its own while
# the others run; removing the pod ends the shim and removes its socket.
c_pod_one_shim() {
  local pod a b c shim out rc=0 x
  pod=$(cri runp group siloc io.siloc.userns=auto)
  a=$(cri create "$pod" group a "$BB" '["sleep","1000"]' io.siloc.userns=auto)
  b=$(cri create "$pod" group b "$BB" '["sh","-c","trap \"exit 42\" TERM; while :; do sleep 0.1; done"]' io.siloc.userns=auto)
  c=$(cri create "$pod" group c "$BB" '["sh","-c","exit 5"]' io.siloc.userns=auto)
  cri start "$a" && cri start "$b" && cri start "$c"
  shim=$(shim_of_pod "$pod")
  expect_match "$shim" '^[0-9]+$' "the pod's shim serves its socket"
  expect_eq "$(our_shims)" "$shim" "one siloc shim process for the sandbox and 3 app containers"
  for x in "$pod" "$a" "$b"; do
    expect_eq "$(cat "$STATE/io.containerd.runtime.v2.task/k8s.io/$x/address")" "unix://$(pod_socket "$pod")" "$x: the pod's shim address"
  done
  wait_state "$c" EXITED
  expect_eq "$(cri status "$c" | jq -c '[.state, .exit_code]')" '["EXITED",5]' "c exits 5, the others run"
  out=$(cri exec "$a" sh -c 'echo in-a; exit 3') || rc=$?
  expect_eq "$out $rc" "in-a 3" "ExecSync in a"
  rc=0 out=$(cri exec "$b" sh -c 'echo in-b; exit 4') || rc=$?
  expect_eq "$out $rc" "in-b 4" "ExecSync in b"
  cri stop "$b" 10
  expect_eq "$(cri status "$b" | jq -c '[.state, .exit_code]')" '["EXITED",42]' "StopContainer b: its SIGTERM trap's exit code"
  expect_eq "$(cri status "$a" | jq -r .state)" RUNNING "a still runs"
  cri rm "$b" && cri rm "$c"
  expect_eq "$(our_shims)" "$shim" "the shim stays while the pod has containers"
  rc=0 out=$(cri exec "$a" echo still-a) || rc=$?
  expect_eq "$out $rc" "still-a 0" "ExecSync in a after b and c are removed"
  check_pod "$pod" "$a" 1
  stop_rm "$pod"
  for _ in $(seq 50); do [ -z "$(our_shims)" ] && break; sleep 0.1; done
  expect_eq "$(our_shims)" "" "removing the pod ends its shim"
  expect_eq "$(find "$(pod_socket "$pod")" 2>/dev/null)" "" "and its socket"
  no_trace_of "$pod" "$a" "$b" "$c"
  leftovers "$T/mounts.before"
}

# containerd killed with SIGKILL and started again (same root, state and socket) while
# a pod's sandbox and 2 app containers run in its one shim (b exits 7 while containerd
# is down): containerd reconnects to
# each bundle's address (the pod shim's socket) and asks the task service about each
# container id (containerd 2.1: Connect/PID, then Pids). The CRI API answers again within
# seconds, lists the containers with their states, and stop/remove cleans up.
c_pod_ctrd_restart() {
  local pod a b shim up="" out rc
  # containerd loads the bundles in the order of their ids: a's comes before the
  # sandbox's, whose bundle holds the log fifo the pod's shim writes to (made so by
  # running the pod again until its id starts with 8-f, then creating a again until
  # its id is below; ids are random, about 2 tries each).
  for _ in $(seq 20); do
    pod=$(cri runp grprestart siloc io.siloc.userns=auto)
    [[ ${pod:0:1} == [89a-f] ]] && break
    stop_rm "$pod"
  done
  # a writes a numbered line every 0.2 s: its log goes on after the restart (the
  # shim holds a read side of each stdio FIFO, as containerd's runc shim does).
  local tick=tick${CVER//./} before after
  for _ in $(seq 30); do
    # shellcheck disable=SC2016 # for the container's shell
    a=$(cri create "$pod" grprestart "$tick" "$BB" '["sh","-c","i=0; while :; do i=$((i+1)); echo tick-$i; sleep 0.2; done"]' io.siloc.userns=auto)
    [[ $a < $pod ]] && break
    cri rm "$a"
  done
  [[ $a < $pod ]] || { echo "no container id below the sandbox's $pod" >&2; return 1; }
  b=$(cri create "$pod" grprestart b "$BB" '["sh","-c","while [ ! -e /go ]; do sleep 0.1; done; exit 7"]' io.siloc.userns=auto)
  cri start "$a" && cri start "$b"
  shim=$(shim_of_pod "$pod")
  expect_eq "$(our_shims)" "$shim" "one shim for the pod"
  # The shim blocks SIGPIPE (src/shim/main.rs); its children do not inherit that.
  expect_eq "$(awk '$1 == "SigBlk:" {print $2}' "/proc/$(pid_of "$a")/status")" 0000000000000000 "a's blocked signals"
  wait_log "$CRI_LOGS/$tick.log" ' tick-3$'
  kill -9 "$CTRD_PID"
  wait "$CTRD_PID" 2>/dev/null || true
  before=$(grep -o 'tick-[0-9]*$' "$CRI_LOGS/$tick.log" | tail -n 1 | cut -d- -f2)
  cp "$T/containerd.log" "$T/containerd-before-restart.log"
  # b exits while containerd is down: the shim's exit event finds no containerd and
  # its log lines no reader on the log FIFO.
  touch "/proc/$(pid_of "$b")/root/go"
  for _ in $(seq 50); do [ "$(sstate "$b" | jq -r .status)" = stopped ] && break; sleep 0.1; done
  expect_eq "$(sstate "$b" | jq -r .status)" stopped "b exited while containerd is down"
  rm -f "$SOCK" "$SOCK.ttrpc"
  start_containerd "$C_DIR"
  for _ in $(seq 20); do
    up=$(timeout -k 1 5 /usr/bin/python3 "$E2E_LIB/cri.py" "$SOCK" version 2>/dev/null) && break
    sleep 0.5
  done
  expect_match "$up" "^containerd $CVER" "the CRI API answers after the restart"
  expect_eq "$(our_shims)" "$shim" "the pod's shim survived the restart"
  expect_eq "$(cri pods)" "$pod" "the pod is listed"
  for _ in $(seq 100); do
    after=$(grep -o 'tick-[0-9]*$' "$CRI_LOGS/$tick.log" | tail -n 1 | cut -d- -f2)
    [ "${after:-0}" -gt $((before + 10)) ] && break
    sleep 0.1
  done
  [ "${after:-0}" -gt $((before + 10)) ] || { echo "a's log stopped at the restart: tick-$before before it, tick-${after:-none} 10 s after" >&2; return 1; }
  expect_eq "$(cri ps | sort)" "$(printf '%s\n' "$a RUNNING" "$b EXITED" | sort)" "its containers: a runs, b exited"
  # containerd 2.1 deletes the task of a bundle that is no sandbox and whose Pids is
  # empty ("cleaning leaked shim process", core/runtime/v2/shim_load.go, containerd
  # #6860) before CRI reads its exit: CRI then reports 255, as for containerd's runc
  # shim. 1.6 keeps the exit code.
  local code=7
  [ "$CVER" = 2.1 ] && code=255
  expect_eq "$(cri status "$b" | jq -c '[.state, .exit_code]')" "[\"EXITED\",$code]" "b's exit, from while containerd was down"
  rc=0 out=$(cri exec "$a" echo in-a) || rc=$?
  expect_eq "$out $rc" "in-a 0" "ExecSync in a after the restart"
  cri stop "$a" 1
  expect_eq "$(cri status "$a" | jq -r .state)" EXITED "StopContainer a after the restart"
  stop_rm "$pod"
  for _ in $(seq 50); do [ -z "$(our_shims)" ] && break; sleep 0.1; done
  expect_eq "$(our_shims)" "" "removing the pod ends its shim"
  no_trace_of "$pod" "$a" "$b"
  leftovers "$T/mounts.before"
}

# The pod's one shim killed with SIGKILL: containerd cleans up each container
# (`shim delete` per bundle: siloc delete --force, the dead socket); then the pod is
# removed and nothing is left: no siloc state, cgroup, mount, /run/siloc* entry, socket,
# ID range. The sandbox's siloc-shim.json is removed first: its `shim delete` then
# takes siloc and its root from the settings file ($SILOC_SHIM_CONFIG here).
c_pod_shim_killed() {
  local pod a b shim x
  pod=$(cri runp grpkill siloc io.siloc.userns=auto)
  a=$(cri create "$pod" grpkill a "$BB" '["sleep","1000"]' io.siloc.userns=auto)
  b=$(cri create "$pod" grpkill b "$BB" '["sleep","1000"]' io.siloc.userns=auto)
  cri start "$a" && cri start "$b"
  shim=$(shim_of_pod "$pod")
  expect_eq "$(our_shims)" "$shim" "one shim for the pod"
  rm "$STATE/io.containerd.runtime.v2.task/k8s.io/$pod/siloc-shim.json"
  kill -9 "$shim"
  for x in "$a" "$b"; do
    wait_state "$x" EXITED
    expect_eq "$(cri status "$x" | jq -r .state)" EXITED "$x of the killed shim"
  done
  for _ in $(seq 100); do [ -z "$("$SILOC" --root "$SROOT/k8s.io" list -q 2>/dev/null)" ] && break; sleep 0.1; done
  expect_eq "$("$SILOC" --root "$SROOT/k8s.io" list -q 2>/dev/null)" "" "shim delete removed every container of the pod"
  expect_eq "$(find "$(pod_socket "$pod")" 2>/dev/null)" "" "the dead shim's socket"
  stop_rm "$pod"
  expect_eq "$(our_shims)" "" "no shim started again"
  no_trace_of "$pod" "$a" "$b"
  leftovers "$T/mounts.before"
}

# Containers outside a pod (ctr run, no CRI annotations): each is its own shim group,
# so two containers run in two shim processes; each shim ends with its container.
c_ctr_own_shim() {
  local a=siloc-e2e-ctr-a-$$ b=siloc-e2e-ctr-b-$$ x
  for x in "$a" "$b"; do
    "${CTR[@]}" run -d --runtime io.containerd.siloc.v2 "$BB" "$x" sleep 1000 >/dev/null
  done
  expect_eq "$(our_shims | wc -l)" 2 "one shim per ctr container"
  expect_match "$(shim_of_pod "$a")" '^[0-9]+$' "a's shim serves a's own socket"
  # README's kill, then delete once the task shows STOPPED (one try, no retry).
  local stopped
  for x in "$a" "$b"; do
    "${CTR[@]}" task kill -s SIGKILL "$x"
    stopped=""
    for _ in $(seq 100); do
      "${CTR[@]}" task ls | grep -qE "^$x +[0-9]+ +STOPPED" && { stopped=1; break; }
      sleep 0.05
    done
    expect_eq "$stopped" 1 "$x STOPPED after SIGKILL"
    "${CTR[@]}" task delete "$x" >/dev/null
    "${CTR[@]}" container delete "$x"
  done
  for _ in $(seq 50); do [ -z "$(our_shims)" ] && break; sleep 0.1; done
  expect_eq "$(our_shims)" "" "the shims end with their containers"
  no_trace_of "$a" "$b"
  leftovers "$T/mounts.before"
}

# The shims' memory for one pod of a sandbox and 6 app containers (`sleep`), for
# siloc's shim (plain and io.siloc.userns=auto) and the runc shim with BinaryName =
# siloc (plain: that path refuses userns=auto): the shim processes serving this
# containerd and the sum of their RSS (`ps -o rss`, KiB), printed. Run by
# hack/bench-shim-rss only (SHIM_RSS=1); a measurement, not a check.
c_pod_rss() {
  local handler annot pod i pids n rss line
  for line in "siloc plain" "siloc io.siloc.userns=auto" "siloc-binary plain"; do
    read -r handler annot <<<"$line"
    [ "$annot" = plain ] && annot=""
    # shellcheck disable=SC2086 # no annotation, or one
    pod=$(cri runp "rss-$handler" "$handler" $annot)
    for i in 1 2 3 4 5 6; do
      # shellcheck disable=SC2086
      cri start "$(cri create "$pod" "rss-$handler" "app$i" "$BB" '["sleep","1000"]' $annot)"
    done
    sleep 2
    pids=$(pgrep -f -- "containerd-shim-(siloc|runc)-v2 .*-address $SOCK" | tr '\n' ',' | sed 's/,$//')
    n=$(tr ',' '\n' <<<"$pids" | grep -c .)
    rss=$(ps -o rss= -p "$pids" | awk '{s += $1} END {print s}')
    printf 'RSS containerd %s %-13s %-26s shims=%d rss_kib=%d\n' "$CVER" "$handler" "${annot:-plain}" "$n" "$rss" >>"$T/rss.txt"
    stop_rm "$pod"
  done
  leftovers "$T/mounts.before"
}

# A plain pod (no user namespace) through the shim; siloc's warnings reach containerd's log;
# failed exec probes at the same time each get their own error.
c_plain() {
  local pod cid
  # io.siloc.userns.size without io.siloc.userns=auto: siloc warns that it is ignored,
  # and the shim passes the warning on to containerd's log.
  pod=$(cri runp plain siloc io.siloc.userns.size=1000)
  cid=$(cri create "$pod" plain app "$BB" '["sleep","1000"]')
  cri start "$cid"
  expect_eq "$(uidmap_of "$(pid_of "$cid")")" "0 0 4294967295" "host IDs"
  expect_match "$(grep -o 'siloc create: annotation io.siloc.userns.size: ignored' "$T/containerd.log" | head -n1)" 'ignored' "siloc's warning in containerd's log"
  # Exec probes that fail at the same time: each error names its own program, not a
  # neighbour's (each siloc command logs to a file of its own), and no such file stays.
  local i pids=()
  for i in 1 2 3 4 5 6; do
    cri exec "$cid" "/no/such-$i" >"$T/probe-$i.out" 2>&1 &
    pids+=("$!")
  done
  wait "${pids[@]}" || true
  for i in 1 2 3 4 5 6; do
    expect_eq "$(grep -o 'such-[0-9]' "$T/probe-$i.out" | sort -u | tr '\n' ' ')" "such-$i " "failed probe $i's error"
  done
  expect_eq "$(find "$STATE/io.containerd.runtime.v2.task/k8s.io/$cid" -name '.log.json.*')" "" "siloc's per-command logs"
  expect_match "$(cat "$STATE/io.containerd.runtime.v2.task/k8s.io/$cid/log.json")" 'such-6' "log.json keeps every command's lines"
  expect_match "$(sstate "$cid" | jq -r '.annotations["io.siloc.rootfs.assembly"]')" "^overlay layers=1 .*idmapped=no attached=1 " "one attached overlay"
  stop_rm "$pod"
  leftovers "$T/mounts.before"
}

# Bad input: a command that does not exist (siloc's create fails), a user namespace
# too small for the spec, a missing siloc binary, a shim killed with SIGKILL: clear
# errors, nothing left.
c_bad_input() {
  local pod cid out rc=0 shim
  pod=$(cri runp bad siloc io.siloc.userns=auto)
  cid=$(cri create "$pod" bad nocmd "$BB" '["/no/such"]' io.siloc.userns=auto)
  out=$(cri start "$cid" 2>&1) || rc=$?
  [ "$rc" != 0 ]
  expect_match "$out" 'siloc (create|start) failed .*/no/such' "StartContainer's error names siloc and the command"
  grep -q 'siloc create failed\|siloc start failed' "$T/containerd.log"
  # A range too small for the spec's IDs (/dev/pts has gid=5): the error names the
  # annotation, not libcontainer's "mount options require mapping valid uid".
  rc=0
  out=$(cri runp small siloc io.siloc.userns=auto io.siloc.userns.size=1 2>&1) || rc=$?
  [ "$rc" != 0 ]
  expect_match "$out" 'annotation io.siloc.userns.size: 1 IDs map container IDs 0..=0, but the spec.s mount /dev/pts option gid=5' "RunPodSandbox's error names the size"
  rc=0
  out=$(cri runp missing siloc-missing 2>&1) || rc=$?
  [ "$rc" != 0 ]
  expect_match "$out" 'cannot run siloc binary /nonexistent/siloc' "RunPodSandbox's error names the binary"
  grep -q 'cannot run siloc binary /nonexistent/siloc' "$T/containerd.log"
  # The shim of a running container dies: containerd cleans up (shim delete).
  cid=$(cri create "$pod" bad victim "$BB" '["sleep","1000"]' io.siloc.userns=auto)
  cri start "$cid"
  shim=$(shim_of_pod "$pod")
  [ -n "$shim" ]
  kill -9 "$shim"
  for _ in $(seq 100); do [ "$(cri status "$cid" | jq -r .state)" = EXITED ] && break; sleep 0.1; done
  expect_eq "$(cri status "$cid" | jq -r .state)" EXITED "the container of a killed shim"
  stop_rm "$pod"
  for p in $(cri pods); do stop_rm "$p"; done
  # The killed shim served the whole pod: containerd cleans up its sandbox's task too
  # (shim delete), after StopPodSandbox returns on 1.6.
  for _ in $(seq 100); do [ -z "$("$SILOC" --root "$SROOT/k8s.io" list -q 2>/dev/null)" ] && break; sleep 0.1; done
  leftovers "$T/mounts.before"
}

# A container whose siloc state went away behind the shim (what a `siloc delete` that
# removed the state and then failed on the ID pool table leaves): the kill containerd
# retries says "container does not exist", which the shim reports as NotFound, as the
# runc shim does, so StopPodSandbox finishes instead of retrying the kill forever.
c_state_gone() {
  local pod cid rc=0
  pod=$(cri runp gone siloc)
  cid=$(cri create "$pod" gone app "$BB" '["sleep","1000"]')
  cri start "$cid"
  "$SILOC" --root "$SROOT/k8s.io" delete --force "$cid"
  timeout 60 /usr/bin/python3 "$E2E_LIB/cri.py" "$SOCK" stopp "$pod" || rc=$?
  expect_eq "$rc" 0 "StopPodSandbox of a pod whose container's state is gone"
  cri rmp "$pod"
  leftovers "$T/mounts.before"
}

# The runc shim with BinaryName = siloc: root.path is already the snapshotter's
# overlay. With io.siloc.userns=auto siloc refuses at once and names the shim;
# a plain pod keeps working.
c_binary_name() {
  local pod cid out rc=0
  pod=$(cri runp bin siloc-binary)
  cid=$(cri create "$pod" bin app "$BB" '["sleep","1000"]')
  cri start "$cid"
  expect_eq "$("$SILOC" --root "$T/siloc-root-binary/k8s.io" state "$cid" | jq -r .status)" running "a plain pod runs"
  stop_rm "$pod"
  out=$(cri runp binns siloc-binary io.siloc.userns=auto 2>&1) || rc=$?
  [ "$rc" != 0 ]
  expect_match "$out" 'already an overlay mount.*containerd-shim-siloc-v2' "the refusal names the shim"
  for p in $(cri pods); do stop_rm "$p"; done
  expect_eq "$("$SILOC" --root "$T/siloc-root-binary/k8s.io" list -q)" "" "siloc's containers"
  leftovers "$T/mounts.before"
}

# SHIM_ONLY=ERE runs only the cases whose function name matches (c_ready always runs);
# SHIM_CONTAINERD=1.6 or 2.1 only that containerd; SHIM_RSS=1 adds c_pod_rss.
case_if() {
  [[ $2 == c_pod_rss && -z ${SHIM_RSS:-} ]] && return 0
  [[ $2 == c_ready || -z ${SHIM_ONLY:-} || $2 =~ ${SHIM_ONLY} ]] && e2e_case "$1" "$2"
  return 0
}
run_suite() {
  CVER=$1 C_DIR=$2
  echo "$E2E_NAME: containerd $CVER cases with $("$2/containerd" --version)"
  [ "$CVER" != 2.1 ] || [ -z "$C21_PROV" ] || echo "$E2E_NAME: containerd 2.1: $C21_PROV"
  start_containerd "$2"
  case_if "containerd $CVER: images, CRI Version, shim -v" c_ready
  case_if "containerd $CVER shim: io.siloc.userns=auto pod, 2 containers, logs, exec, exit 7" c_userns_auto
  case_if "containerd $CVER shim: io.siloc.userns=auto pod on a CNI pod network, exec, logs, exit 9" c_userns_auto_podnet
  case_if "containerd $CVER shim: 50-layer image, one attached mount" c_layers50
  case_if "containerd $CVER shim: a pod's sandbox and 3 app containers in one shim process" c_pod_one_shim
  case_if "containerd $CVER shim: the sandbox's task gone, ExecSync into its app container" c_sandbox_gone
  case_if "containerd $CVER shim: the pod's shim killed (SIGKILL), containerd cleans up" c_pod_shim_killed
  case_if "containerd $CVER shim: two ctr containers, two shims" c_ctr_own_shim
  case_if "containerd $CVER: shim RSS of a 1 + 6 container pod (hack/bench-shim-rss)" c_pod_rss
  case_if "containerd $CVER shim: plain pod, warnings, 6 failing probes at once" c_plain
  case_if "containerd $CVER shim: memory limit exceeded, OOMKilled" c_oom
  [ "$CVER" = 2.1 ] && case_if "containerd 2.1 shim: hostUsers: false (userns_options)" c_host_users_false
  [ "$CVER" = 2.1 ] && case_if "containerd 2.1 shim: hostUsers: false, a volume's idmapped bind mount" c_volume_idmap
  case_if "containerd $CVER shim: failed create, missing siloc, killed shim" c_bad_input
  case_if "containerd $CVER shim: a container's state gone behind the shim, the pod stops" c_state_gone
  case_if "containerd $CVER runc shim + BinaryName: userns pod refused, plain pod runs" c_binary_name
  # Last: it restarts containerd (the cases after it would use the new one).
  case_if "containerd $CVER shim: containerd killed (SIGKILL) and restarted, a pod of 3 in one shim" c_pod_ctrd_restart
  cleanup_all
}

[ "${SHIM_CONTAINERD:-1.6}" = 1.6 ] && run_suite 1.6 /usr/bin
if [ "${SHIM_CONTAINERD:-2.1}" != 2.1 ]; then
  :
elif [ -x "$C21/containerd" ]; then
  rm -rf "$T/root" "$STATE"
  run_suite 2.1 "$C21"
else
  echo "SKIPPED containerd 2.1 cases: $C21/containerd missing (bash hack/setup fetches it)${C21_PROV:+: $C21_PROV}"
fi
[ -z "${SHIM_RSS:-}" ] || cat "$T/rss.txt" 2>/dev/null
e2e_finish
