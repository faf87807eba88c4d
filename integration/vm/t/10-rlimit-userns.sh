# shellcheck shell=sh disable=SC3045 # busybox sh has ulimit -H and -S
# process.rlimits that raise a hard limit above the runtime's own, in containers with
# a user namespace, where root has CAP_SYS_RESOURCE (this guest; the host suite's
# machine lacks it). runc sets the limits from outside (prlimit) and succeeds;
# libcontainer 0.7 sets them inside the user namespace, where raising a hard limit is
# EPERM for everyone ("intermediate process error EPERM"). siloc raises its own hard
# limit first (engine::rlimit_check::RaisedHard): a new user namespace, a joined one,
# and exec --process all get the limit.
grep -q '^CapEff:.*[13579bdf]......$' /proc/self/status ||
  skip "no CAP_SYS_RESOURCE here: $(grep CapEff /proc/self/status)"
own=$(ulimit -Hn)
[ "$own" != unlimited ] || skip "own hard RLIMIT_NOFILE is unlimited"
want=$((own + 1024))
[ "$want" -le "$(cat /proc/sys/fs/nr_open)" ] || skip "fs.nr_open below $want"
note "own hard RLIMIT_NOFILE $own; the containers ask for $want"
LIMITS=$(jq -nc --argjson n "$want" '[{type: "RLIMIT_NOFILE", soft: $n, hard: $n}]')

# rl_bundle NAME ARG...: a busybox bundle with the raised limit.
rl_bundle() {
  n=$1; shift
  make_bundle "$T/$n" "$@"
  make_rootfs "$T/$n/rootfs"
  # shellcheck disable=SC2016 # jq's variable
  edit_spec "$T/$n" --argjson l "$LIMITS" '.process.rlimits=$l'
}

# a new user namespace
rl_bundle new sh -c 'ulimit -Hn; ulimit -Sn'
annotate "$T/new" io.siloc.userns auto
s run --bundle "$T/new" new >"$T/new.out" 2>"$T/new.err" ||
  fail "run, new user namespace: $(cat "$T/new.err")"
out=$(tr '\n' ' ' <"$T/new.out")
[ "$out" = "$want $want " ] || fail "new user namespace: limits inside: $out $(cat "$T/new.err")"

# a user namespace joined by path (a pod's app container), and exec into its owner
rl_bundle x sleep 1000
annotate "$T/x" io.siloc.userns auto
s_detached create --bundle "$T/x" x || fail "create x"
s start x || fail "start x"
xpid=$(state_field x .pid)
uid=$(state_field x '.annotations["io.siloc.userns.range"]' | sed -n 's/^uid=\([0-9]*\),.*/\1/p')
rl_bundle joined sh -c 'ulimit -Hn'
# shellcheck disable=SC2016 # jq's variables
edit_spec "$T/joined" --arg p "/proc/$xpid/ns/user" --argjson u "$uid" \
  '.linux.namespaces |= (map(select(.type != "user")) + [{type: "user", path: $p}])
   | .linux.uidMappings = [{containerID: 0, hostID: $u, size: 65536}]
   | .linux.gidMappings = .linux.uidMappings'
out=$(s run --bundle "$T/joined" joined 2>"$T/joined.err") ||
  fail "run, joined user namespace: $(cat "$T/joined.err")"
[ "$out" = "$want" ] || fail "joined user namespace: hard limit inside: $out"

jq -n --argjson l "$LIMITS" '{args: ["sh", "-c", "ulimit -Hn"], cwd: "/", env: ["PATH=/bin"], rlimits: $l}' >"$T/p.json"
out=$(s exec --process "$T/p.json" x 2>"$T/exec.err") || fail "exec --process: $(cat "$T/exec.err")"
[ "$out" = "$want" ] || fail "exec: hard limit inside: $out"
[ "$(ulimit -Hn)" = "$own" ] || fail "the caller's own limit changed"
s delete --force x || fail "delete x"
left=$(leftovers)
[ -z "$left" ] || fail "left behind: $left"
