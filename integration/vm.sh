#!/usr/bin/env bash
# The VM suite: boots hack/vm's guest once (kernel 6.1, pure cgroup v2, two NUMA nodes
# with a disk each) and runs integration/vm/t/*.sh in it. One line per test: PASS,
# FAIL (with its log) or SKIP (with the reason); logs land in target/vm-suite/.
# Arguments: test name filters (e.g. `bash integration/vm.sh layers`).
set -euo pipefail
cd "$(dirname "$0")/.."
SILOC=${SILOC:-target/release/siloc}
[ -x "$SILOC" ] || cargo build --release
extra=(--fio)
# The guest has no jq of its own; the tests edit config.json with the host's.
extra+=(--bin "$(command -v jq || { echo "vm.sh: jq not found: apt-get install jq" >&2; exit 1; })")
out=target/vm-suite
rm -rf "$out"
echo "== VM suite (hack/vm: Linux 6.1, cgroup v2, 2 NUMA nodes), siloc $SILOC"
start=$(date +%s)
set +e
hack/vm --siloc "$SILOC" "${extra[@]}" --in integration/vm --out "$out" -- sh ./run "$@"
rc=$?
set -e
echo "== VM suite: $(grep -c '^PASS' "$out/results" 2>/dev/null) passed," \
  "$(grep -c '^FAIL' "$out/results" 2>/dev/null) failed, $(grep -c '^SKIP' "$out/results" 2>/dev/null) skipped" \
  "in $(( $(date +%s) - start )) s (logs: $out/)"
exit $rc
