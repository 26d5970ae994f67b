#!/usr/bin/env bash
# govulncheck without vuln.go.dev: `make vuln`.
#
# govulncheck v1.9.0 is built from the Go module proxy into the tools cache
# (seconds; reused). It needs a vulnerability database, which this
# workplace cannot download (vuln.go.dev is unreachable and the module proxy
# does not serve golang.org/x/vulndb). The database is taken from, in order:
#
#   ETCD_NOMAD_VULNDB=DIR   a copy of the Go vulnerability database: either the
#                           v1 layout (index/modules.json, ID/GO-*.json, as
#                           served by vuln.go.dev) or a flat directory of OSV
#                           files (golang.org/x/vulndb's data/osv)
#   ../shared/vulndb/osv    the offline copy kept beside the repository
#                           (CI has it)
#   $CACHE/vulndb           the same, left in the cache by an operator
#   https://vuln.go.dev     when reachable (probed for 5s)
#
# Every run also checks the scanner itself: a synthetic advisory
# (GO-0000-0001, against go-hclog's New, which the CLI calls) is added to the
# database and must be reported, so a scan that silently finds nothing fails.
# Without any real database the run says so loudly ("NOT CHECKED against
# real advisories") and exits 0 unless ETCD_NOMAD_VULN_REQUIRED=1.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-nomad"
bindir="${ETCD_NOMAD_TOOLS_DIR:-$cache/bin}"
version=v1.9.0
gvc="$bindir/govulncheck-$version"
mkdir -p "$bindir"
if [ ! -x "$gvc" ]; then
	tmp=$(mktemp -d)
	GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "golang.org/x/vuln/cmd/govulncheck@$version"
	mv "$tmp/govulncheck" "$gvc"
	rmdir "$tmp"
fi

selftest=GO-0000-0001
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
db="$work/db"
mkdir -p "$db"
cat >"$db/$selftest.json" <<'JSON'
{"schema_version":"1.3.1","id":"GO-0000-0001","modified":"2026-01-01T00:00:00Z","published":"2026-01-01T00:00:00Z",
 "summary":"etcd-nomad vuln self-test: synthetic advisory against go-hclog New","details":"Synthetic entry added by tools/vuln.sh.",
 "affected":[{"package":{"name":"github.com/hashicorp/go-hclog","ecosystem":"Go"},
   "ranges":[{"type":"SEMVER","events":[{"introduced":"0"}]}],
   "ecosystem_specific":{"imports":[{"path":"github.com/hashicorp/go-hclog","symbols":["New"]}]}}],
 "database_specific":{"url":"https://pkg.go.dev/vuln/GO-0000-0001"}}
JSON

# real: the source of real advisories, if any.
real=""
for src in "${ETCD_NOMAD_VULNDB:-}" ../shared/vulndb/osv "$cache/vulndb"; do
	if [ -n "$src" ] && [ -d "$src" ]; then
		n=0
		# Flat OSV files, or the v1 layout's ID/ directory.
		for f in "$src"/GO-*.json "$src"/ID/GO-*.json "$src"/data/osv/GO-*.json; do
			[ -e "$f" ] || continue
			ln -sf "$(readlink -f "$f")" "$db/$(basename "$f")"
			n=$((n + 1))
		done
		if [ "$n" -gt 0 ]; then
			# The newest advisory's date is the limit of what this
			# check can know.
			# (The copy's own dates are zeroed: name its newest advisory,
			# and the date its README gives, if any.)
			newest=$(ls "$db" | grep -v "$selftest" | sort -V | tail -1)
			dated=$(grep -ohE '20[0-9]{2}-[0-9]{2}-[0-9]{2}' "$src"/README* "$src"/../README* 2>/dev/null | head -1 || true)
			real="$src ($n advisories, newest ${newest%.json}${dated:+, copy of $dated})"
			break
		fi
		echo "vuln: $src holds no GO-*.json advisories; ignoring it" >&2
	fi
done
online=0
if [ -z "$real" ] && curl -fsS -m 5 -o /dev/null https://vuln.go.dev/index/db.json.gz 2>/dev/null; then
	online=1
fi

scan() { # db-url output
	local rc=0
	"$gvc" -db "$1" ./... >"$2" 2>&1 || rc=$?
	# 0: nothing found, 3: vulnerabilities found; anything else failed.
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
		echo "vuln: govulncheck failed (exit $rc):" >&2
		cat "$2" >&2
		exit 1
	fi
}
found() { grep -oE '^Vulnerability #[0-9]+: GO-[0-9]+-[0-9]+' "$1" | awk '{print $3}' | sort -u; }

start=$SECONDS
scan "file://$db" "$work/out"
ids=$(found "$work/out")
if ! grep -qx "$selftest" <<<"$ids"; then
	echo "vuln: self-test FAILED: govulncheck did not report the synthetic advisory $selftest; the scan cannot be trusted" >&2
	cat "$work/out" >&2
	exit 1
fi
others=$(grep -vx "$selftest" <<<"$ids" || true)
if [ "$online" = 1 ]; then
	scan https://vuln.go.dev "$work/online"
	others=$(found "$work/online")
	real="https://vuln.go.dev"
	cp "$work/online" "$work/out"
fi
if [ -n "$others" ]; then
	echo "vuln: FAILED: the code calls vulnerable symbols:" >&2
	sed "/$selftest/,/^\$/d" "$work/out" >&2
	exit 1
fi
if [ -z "$real" ]; then
	echo "vuln: govulncheck $version works (self-test advisory found in $((SECONDS - start))s), but the module was NOT CHECKED against real advisories: no vulnerability database is reachable (vuln.go.dev is blocked and the module proxy does not serve golang.org/x/vulndb). Set ETCD_NOMAD_VULNDB to a copy of the database."
	if [ "${ETCD_NOMAD_VULN_REQUIRED:-0}" = 1 ]; then
		exit 1
	fi
	exit 0
fi
echo "vuln: no known vulnerability reachable from the code (database: $real; self-test passed; $((SECONDS - start))s)"
