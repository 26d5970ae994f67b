#!/usr/bin/env bash
# Where the time of a `make test` run goes, from its gotestsum JSON files
# (go test -json) as `make test` writes them: TEST_JSON of the main pass (the
# two lanes' TEST_JSON.agents and TEST_JSON.embedded together),
# TEST_JSON.race and TEST_JSON.race-full of the race passes (those present).
# Prints Markdown: each pass's wall time (and each lane's), per package the
# elapsed time of its test binary, the sum of its top-level tests and the
# difference (TestMain's setup: building binaries, starting agents; negative
# when tests run in parallel), when it ran (seconds from the pass's first
# event), then the slowest top-level tests. Needs jq; gotestsum comes from
# tools/gotestsum.sh.
#
#   tools/timing.sh FILE.json [N]      (make timing JSON=FILE.json)
set -euo pipefail
main=${1:?usage: tools/timing.sh FILE.json [N]}
n=${2:-25}
here=$(cd "$(dirname "$0")" && pwd)

# Wall time of one pass: its first to its last event.
wall() {
	jq -rs '[.[].Time | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601] | (max - min) as $s
		| "\($s / 60 | floor)m\($s % 60 | floor)s (\($s) s, \(min | todate) to \(max | todate))"' "$1"
}

# Per package: binary elapsed, sum of top-level tests, difference, when it
# ran, tests run.
packages() {
	jq -rs '
		def done: .Action == "pass" or .Action == "fail" or .Action == "skip";
		def r: . * 100 | round / 100;
		def ts: .Time | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601;
		(map(ts) | min) as $t0
		| (group_by(.Package) | map({key: .[0].Package, value: "\(map(ts) | min - $t0)-\(map(ts) | max - $t0)"}) | from_entries) as $when
		| (map(select((.Action == "pass" or .Action == "fail") and .Test == null)) | map({key: .Package, value: .Elapsed}) | from_entries) as $pkg
		| (map(select(done and .Test != null and (.Test | contains("/") | not)))
			| group_by(.Package)
			| map({key: .[0].Package, value: {sum: (map(.Elapsed) | add), n: length,
				skip: (map(select(.Action == "skip")) | length)}}) | from_entries) as $tests
		| $pkg | to_entries | sort_by(-.value) | .[]
		| .key as $p | ($tests[$p] // {sum: 0, n: 0, skip: 0}) as $t
		| "| \($p | sub("^github.com/etcd-nomad/etcd-nomad/?"; "") | if . == "" then "." else . end) | \(.value | r) | \($t.sum | r) | \(.value - $t.sum | r) | \($when[$p]) | \($t.n) (\($t.skip) skipped) |"' "$1"
}

total() {
	jq -rs 'map(select((.Action == "pass" or .Action == "fail") and .Test == null) | .Elapsed) | add | . * 10 | round / 10' "$1"
}

for f in "$main" "$main.race" "$main.race-full"; do
	[ -f "$f" ] || continue
	echo "### $(basename "$f")"
	echo
	echo "Wall time of the pass: $(wall "$f")."
	for l in agents embedded; do
		if [ "$f" = "$main" ] && [ -f "$f.$l" ]; then
			echo "Lane $l: $(wall "$f.$l")."
		fi
	done
	echo "Sum of the packages' elapsed times: $(total "$f") s (go test runs up to -p packages at once; the main pass, in each of its two lanes)."
	echo
	echo "| package | elapsed s | its top-level tests s | setup s (difference) | ran, s from the pass's start | tests |"
	echo "|---|---|---|---|---|---|"
	packages "$f"
	echo
done

echo "### The $n slowest top-level tests (main pass)"
echo
echo '```'
bash "$here/gotestsum.sh" tool slowest --jsonfile "$main" --threshold 1s | awk -v n="$n" '$2 !~ /\// && c++ < n'
echo '```'
if [ -f "$main.race" ]; then
	echo
	echo "### The $n slowest top-level tests (race pass)"
	echo
	echo '```'
	bash "$here/gotestsum.sh" tool slowest --jsonfile "$main.race" --threshold 1s | awk -v n="$n" '$2 !~ /\// && c++ < n'
	echo '```'
fi
