#!/usr/bin/env bash
# The VM suite: boots hack/vm's guest once (kernel 6.1, pure cgroup v2, two NUMA nodes
# with a disk each) and runs integration/vm/t/*.sh in it. One line per test: PASS,
# FAIL (with its log) or SKIP (with the reason); logs land in target/vm-suite/.
# Arguments: test name filters (e.g. `bash integration/vm.sh layers`).
# siloc: $SILOC, else the release build, built first (a no-op when up to date).
# Exit status: 0 when no test failed, 1 when one did, 77 (last line "SKIP: reason")
# when the VM cannot run here or every test skipped, 125 when the VM itself failed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SILOC:-}" ]; then
  cargo build --release --bin siloc
  SILOC=target/release/siloc
fi
extra=(--fio)
# The guest has no jq of its own; the tests edit config.json with the host's.
extra+=(--bin "$(command -v jq || { echo "vm.sh: jq not found: apt-get install jq" >&2; exit 1; })")
out=target/vm-suite
rm -rf "$out"
mkdir -p target
echo "== VM suite (hack/vm: Linux 6.1, cgroup v2, 2 NUMA nodes), siloc $SILOC"
start=$(date +%s)
rc=0
hack/vm --siloc "$SILOC" "${extra[@]}" --in integration/vm --out "$out" -- sh ./run "$@" 2>&1 |
  tee target/vm-suite.log || rc=${PIPESTATUS[0]}
count() { local n; n=$(grep -c "^$1" "$out/results" 2>/dev/null); echo "${n:-0}"; }
passed=$(count PASS) failed=$(count FAIL) skipped=$(count SKIP)
echo "== VM suite: $passed passed, $failed failed, $skipped skipped" \
  "in $(($(date +%s) - start)) s (logs: $out/)"
if [ "$rc" = 77 ]; then
  echo "SKIP: $(sed -n 's/^SKIP: //p' target/vm-suite.log | tail -n1)"
elif [ "$rc" = 0 ] && [ "$passed" = 0 ] && [ "$skipped" != 0 ]; then
  echo "SKIP: every VM test skipped"
  rc=77
fi
exit "$rc"
