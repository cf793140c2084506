#!/usr/bin/env bash
# Runs Steward's test tiers one after the other and prints each tier's wall time at the end, also when a tier
# fails (every tier runs; the exit status is non-zero if any failed):
#   unit         go test -short ./..., then the nested modules test/bundle (OLM bundle), test/chart (Helm chart) and
#                test/monitoring (alerting rules with the pinned promtool, dashboard queries)
#   integration  the test bed's acceptance test, then the S3 agent against the test bed's S3 gateway build, and
#                continuous backup, point-in-time replay and membership calls against etcd processes of the test
#                bed's releases
#   e2e          test/e2e on the test bed, E2E_PARALLEL tests at a time (docs/development/testing.md says why that many)
# Budget on this project's 2-core machines: 40 minutes warm (docs/development/testing.md, "Budgets"). Logs: $TEST_LOG_DIR (default _output/test).
set -uo pipefail
cd "$(dirname "$0")/.."

E2E_PARALLEL=${E2E_PARALLEL:-3}
TEST_LOG_DIR=${TEST_LOG_DIR:-_output/test}
BUDGET_MINUTES=${BUDGET_MINUTES:-40}
mkdir -p "$TEST_LOG_DIR"

names=() results=() seconds=()
start_all=$(date +%s)

# tier NAME COMMAND...: runs the command, output to the terminal and to $TEST_LOG_DIR/NAME.log.
tier() {
  local name=$1
  shift
  echo "=== tier $name: $*"
  local begin=$(date +%s)
  "$@" 2>&1 | tee "$TEST_LOG_DIR/$name.log"
  local rc=${PIPESTATUS[0]}
  names+=("$name")
  seconds+=($(($(date +%s) - begin)))
  if ((rc == 0)); then results+=(ok); else results+=(FAIL); fi
}

unit() {
  local rc=0
  go test -short -count=1 ./... || rc=1
  # Nested modules (operator-framework/api and Helm stay out of the operator's go.mod): ./... above does not
  # reach them. Each runs even when an earlier command failed, so that one run shows every result.
  (cd test/bundle && go test -short -count=1 ./...) || rc=1
  (cd test/chart && go test -short -count=1 ./...) || rc=1
  # promtool is built before go test, outside its timeout (a first build compiles much of Prometheus); the tests
  # run bin/promtool-<version>.
  { make --no-print-directory promtool && (cd test/monitoring && go test -short -count=1 ./...); } || rc=1
  return $rc
}

integration() {
  go test -count=1 -timeout 60m ./internal/testbed/ &&
    # After the test bed's build: the S3 tests use its versitygw binary, the point-in-time and membership tests
    # its etcd (they skip without them).
    go test -count=1 -timeout 10m ./internal/backup/ ./cmd/steward-agent/ ./internal/etcd/
}

tier unit unit
tier integration integration
e2e() {
  # The Helm e2e test runs the pinned Helm; built here, a cold build does not compete with running tests for CPU.
  make --no-print-directory helm &&
    go test -count=1 -timeout 70m -v -parallel "$E2E_PARALLEL" ./test/e2e/
}

tier e2e e2e

dur() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
total=$(($(date +%s) - start_all))
echo
if [[ -s $TEST_LOG_DIR/e2e.log ]]; then
  # go test's time for a parallel test includes its wait for a slot; each test logs "ran X after waiting Y".
  echo "=== e2e tests by running time (-parallel $E2E_PARALLEL; waited: for a slot)"
  awk '
    function sec(d,   n, v, u) { n = 0; while (match(d, /^[0-9.]+(h|ms|m|s)/)) { v = substr(d, 1, RLENGTH); u = v; sub(/^[0-9.]+/, "", u); v += 0
        n += (u == "h" ? v * 3600 : u == "m" ? v * 60 : u == "ms" ? v / 1000 : v); d = substr(d, RLENGTH + 1) } return n }
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; sub(/\/.*/, "", cur) }
    / ran [0-9hms.]+ after waiting / { for (i = 1; i <= NF; i++) if ($i == "ran") { ran[cur] = sec($(i + 1)); waited[cur] = sec($(i + 4)) } }
    /^--- (PASS|FAIL|SKIP): Test[^ \/]* / { n = $3; t = $4; gsub(/[()s]/, "", t)
      printf "%8.0f %-5s %s %s\n", (n in ran ? ran[n] : t), substr($2, 1, length($2) - 1), n, (n in waited ? sprintf("(waited %.0fs)", waited[n]) : "(serial)") }
  ' "$TEST_LOG_DIR/e2e.log" | sort -rn | awk '{ st = $2; d = $1; $1 = $2 = ""; sub(/^ +/, ""); printf "  %-5s %6ss  %s\n", st, d, $0 }'
fi
# What each failed test said last (its failure, usually): CI shows only the end of this output, and a parallel
# test's failure line can be far above it. With -v a test's lines come before its "--- FAIL", without -v after it.
# The first test to fail comes last, nearest the end: a failure often makes the tests after it fail too. A test's
# "ran X after waiting Y" line (shared_test.go, nodes_test.go) is left out: it says nothing of the failure.
failures=$(for name in "${names[@]}"; do
  awk -v tier="$name" '
    function short(l) { return length(l) > 1000 ? substr(l, 1, 1000) "..." : l }
    function add(l) { out[blocks] = out[blocks] l "\n" }
    / ran [0-9hms.]+ after waiting / { next }
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; after = ""; next }
    /^ *--- FAIL: / { n = $3; blocks++; add(sprintf("  [%s] %s", tier, n)); for (i = 1; i <= cnt[n]; i++) add("    " short(last[n, i])); after = n; next }
    /^ +[A-Za-z0-9_]+\.go:[0-9]+: / { if (after != "") { add("    " short($0)); next }
      k = cur; if (cnt[k] == 3) { last[k, 1] = last[k, 2]; last[k, 2] = last[k, 3]; cnt[k] = 2 }; last[k, ++cnt[k]] = $0; next }
    { after = "" }
    END { for (b = blocks; b >= 1; b--) printf "%s", out[b] }
  ' "$TEST_LOG_DIR/$name.log" 2>/dev/null
done)
if [[ -n $failures ]]; then
  echo "=== failed tests, with their last lines"
  echo "$failures"
fi
echo "=== test tiers (budget ${BUDGET_MINUTES}m on 2 cores, see docs/development/testing.md)"
status=0
for i in "${!names[@]}"; do
  printf '  %-12s %-4s %8s\n' "${names[$i]}" "${results[$i]}" "$(dur "${seconds[$i]}")"
  [[ ${results[$i]} == ok ]] || status=1
done
printf '  %-12s %-4s %8s\n' total "$([[ $status == 0 ]] && echo ok || echo FAIL)" "$(dur "$total")"
if ((total > BUDGET_MINUTES * 60)); then
  echo "  over the ${BUDGET_MINUTES}-minute budget"
fi
exit $status
