# shellcheck shell=bash
# Sourced by the suites in integration/: the built siloc, hack/images' test images, a
# private temp dir that is removed on exit (also on failure or ^C), and one
# PASS/FAIL line per case with a closing "NAME: N passed, N failed" line.
#
#   . "$(dirname "$0")/lib/e2e.sh"
#   e2e_images busybox debian          # sets SILOC_IMAGE_*/SILOC_ARCHIVE_* (skips on 77)
#   e2e_at_exit 'podman rm -af -t0'    # cleanups run in reverse order, before T goes
#   c_run() { ...set -e body...; }     # a case: any failing command fails it
#   e2e_case "podman run prints output" c_run
#   e2e_finish                         # last: summary, exit 1 if any case failed
#
# A case runs in a subshell with `set -e`, its output kept in a file and shown only
# when it fails; state shared between cases lives in the clients (named containers),
# not in shell variables. Needs root. E2E_KEEP=1 keeps the temp dir for a look.
# A suite that cannot run here (not root, no Debian mirror) exits 77 with a last line
# "SKIP: reason", the skip convention of every script and suite (hack/test counts it).
set -uo pipefail

E2E_NAME=$(basename "$0")
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO=$PWD
E2E_START=$SECONDS
E2E_PASSED=0
E2E_FAILED=0
E2E_CLEANUPS=()
E2E_LIB=$REPO/integration/lib

# e2e_skip REASON: the whole suite is skipped (exit 77, see above).
e2e_skip() { echo "SKIP: $E2E_NAME: $*"; exit 77; }

[ "$(id -u)" = 0 ] || e2e_skip "needs root"

# The siloc under test: $SILOC, else the release build, built now (a no-op when up to
# date) so that a stale target/release/siloc is never tested.
if [ -z "${SILOC:-}" ]; then
  cargo build --release --bin siloc >&2 || { echo "FAIL $E2E_NAME: cargo build --release"; exit 1; }
  SILOC=$REPO/target/release/siloc
fi
[ -x "$SILOC" ] || { echo "FAIL $E2E_NAME: SILOC=$SILOC is not an executable"; exit 1; }
SILOC=$(realpath "$SILOC")

T=$(mktemp -d "/var/tmp/siloc-e2e-${E2E_NAME%.sh}.XXXXXX")
chmod 0711 "$T"

# e2e_at_exit CMD: runs CMD (eval'd) at exit, last registered first.
e2e_at_exit() { E2E_CLEANUPS+=("$1"); }

e2e_cleanup() {
  local i m
  trap - EXIT INT TERM
  # An unset variable or a failing command must not end the cleanup half-way.
  set +eu
  for ((i = ${#E2E_CLEANUPS[@]} - 1; i >= 0; i--)); do
    eval "${E2E_CLEANUPS[$i]}" >/dev/null 2>&1 || true
  done
  # Anything a client left mounted under T (overlay storage, rootfs binds), deepest first.
  awk -v t="$T" '$5 == t || index($5, t "/") == 1 { print $5 }' /proc/self/mountinfo |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  [ -n "${E2E_KEEP:-}" ] && { echo "kept $T"; return; }
  rm -rf "$T"
}
trap e2e_cleanup EXIT
trap 'exit 130' INT TERM

# e2e_images IMAGE...: builds (or reuses) hack/images' IMAGEs and loads images.env.
# When hack/images skips (77: no Debian mirror) the whole suite is skipped, loudly.
e2e_images() {
  local rc=0
  bash hack/images "$@" >"$T/images.log" 2>&1 || rc=$?
  if [ "$rc" = 77 ]; then
    e2e_skip "$(sed -n 's/^SKIP: //p' "$T/images.log" | tail -n1)"
  fi
  if [ "$rc" != 0 ]; then
    cat "$T/images.log"
    echo "FAIL $E2E_NAME: hack/images $* exited $rc"
    exit 1
  fi
  # shellcheck disable=SC1091
  . "${SILOC_IMAGES_DIR:-hack/.cache/images}/images.env"
}

# e2e_case NAME FUNCTION: runs one case, prints PASS/FAIL with its time.
e2e_case() {
  local name=$1 fn=$2 t0=$SECONDS rc
  # Not part of an && / || list: bash would ignore set -e inside the subshell.
  (
    set -e
    "$fn"
  ) >"$T/case.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then
    E2E_PASSED=$((E2E_PASSED + 1))
    printf 'PASS %s (%ss)\n' "$name" $((SECONDS - t0))
  else
    E2E_FAILED=$((E2E_FAILED + 1))
    printf 'FAIL %s (exit %s, %ss)\n' "$name" "$rc" $((SECONDS - t0))
    tail -n 40 "$T/case.log" | sed 's/^/    /'
  fi
}

# e2e_finish: the closing line; fails (status 1) when a case failed. The suite's last
# command, so that its status is the suite's (cleanup runs on exit).
e2e_finish() {
  printf '%s: ran in %ss\n' "$E2E_NAME" $((SECONDS - E2E_START))
  printf '%s: %d passed, %d failed\n' "$E2E_NAME" "$E2E_PASSED" "$E2E_FAILED"
  [ "$E2E_FAILED" = 0 ]
}

# --- assertions (fail the case through set -e) --------------------------------------

# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
  if [ "$1" != "$2" ]; then
    printf '%s: expected %q, got %q\n' "$3" "$2" "$1" >&2
    return 1
  fi
}

# expect_match TEXT ERE WHAT: TEXT has a line matching ERE.
expect_match() {
  if ! grep -Eq -- "$2" <<<"$1"; then
    printf '%s: no line matches /%s/ in:\n%s\n' "$3" "$2" "$1" >&2
    return 1
  fi
}

# expect_no_match TEXT ERE WHAT
expect_no_match() {
  if grep -Eq -- "$2" <<<"$1"; then
    printf '%s: unexpected /%s/ in:\n%s\n' "$3" "$2" "$1" >&2
    return 1
  fi
}

# status CMD...: prints CMD's exit status (its output goes to stderr, for the log).
status() {
  local rc=0
  "$@" >&2 || rc=$?
  echo "$rc"
}

# ptyrun ARGS...: integration/lib/ptyrun.py (a command on a new pty, expect/send).
ptyrun() { python3 "$E2E_LIB/ptyrun.py" "$@"; }

# clean_tty TEXT: drops CRs, terminal escapes and the NULs some clients send.
clean_tty() { tr -d '\r\000' <<<"$1" | sed 's/\x1b\[[0-9;?]*[A-Za-z]//g'; }

# json_log_ok FILE: every line of FILE is a JSON object with level, msg and time (the
# shape containerd's shim parses from `--log-format json`).
json_log_ok() {
  local bad rc=0
  [ -s "$1" ] || return 0
  bad=$(jq -c 'select((.level|type) != "string" or (.msg|type) != "string"
        or (.time|type) != "string")' "$1" 2>&1) || rc=$?
  if [ "$rc" != 0 ] || [ -n "$bad" ]; then
    echo "$1: not runc-shaped JSON log lines:" >&2
    cat "$1" >&2
    return 1
  fi
}
