#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 20s), one after the other: `go test -fuzz`
# takes one target at a time. New failing inputs land in the package's testdata/fuzz/<target>/ and from then on
# run as seeds under `go test -short`. Optional: FUZZ_PACKAGES limits the packages (default ./...), FUZZ_RUN the
# targets (a regular expression).
set -euo pipefail
fuzztime=${FUZZTIME:-20s}
packages=${FUZZ_PACKAGES:-./...}
filter=${FUZZ_RUN:-.}
status=0
for pkg in $(go list "$packages"); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
		[[ $target =~ $filter ]] || continue
		echo "== $pkg $target ($fuzztime)"
		if ! go test "$pkg" -run "^${target}\$" -fuzz "^${target}\$" -fuzztime "$fuzztime" ${FUZZ_FLAGS:-}; then
			status=1
		fi
	done
done
exit $status
