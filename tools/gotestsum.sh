#!/usr/bin/env bash
# gotestsum (gotest.tools/gotestsum, pinned) from the tools cache, built
# from the Go module proxy the first time (seconds; reused): `make test`
# runs go test through it for per-test times in a JSON file and a summary of
# the failures at the end of its output.
#
#   tools/gotestsum.sh [gotestsum args] -- [go test args]
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/etcd-nomad"
bindir="${ETCD_NOMAD_TOOLS_DIR:-$cache/bin}"
version=v1.13.0
bin="$bindir/gotestsum-$version"
if [ ! -x "$bin" ]; then
	mkdir -p "$bindir"
	tmp=$(mktemp -d)
	echo "building gotestsum $version into $bin (first time only)..." >&2
	(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "gotest.tools/gotestsum@$version")
	mv "$tmp/gotestsum" "$bin"
	rm -rf "$tmp"
fi
exec "$bin" "$@"
