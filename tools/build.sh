#!/usr/bin/env bash
# Builds the pinned agent binaries used by the e2e tests and `make demo`
# into a cache outside the clone, keyed by name and version, and reuses them
# when present. Go's build cache makes a rebuild mostly a link step.
#
#   tools/build.sh            build all missing tools, print the bin dir
#   tools/build.sh NAME...    only those (nomad consul versitygw etcdctl
#                             etcd35 etcd promtool docker): `make demo` builds
#                             the three it runs, `make alerts` promtool
#
# docker is no build: Debian's docker.io (dockerd, containerd, runc, the
# CLI), installed with apt-get where dockerd is missing, for the Docker e2e
# test and `make demo DRIVER=docker`, which start an engine of their own
# (internal/devagents StartDocker). Where it cannot be installed (not root,
# no apt-get) this says so and the Docker tests skip.
#   ETCD_NOMAD_TOOLS_DIR=...  override the cache dir
set -euo pipefail
cd "$(dirname "$0")"
dir="${ETCD_NOMAD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-nomad/bin}"
mkdir -p "$dir"

want=("$@")
all=(nomad consul versitygw etcdctl etcd35 etcd promtool docker)
[ ${#want[@]} -gt 0 ] || want=("${all[@]}")
for w in "${want[@]}"; do
	case " ${all[*]} " in *" $w "*) ;; *) echo "tools/build.sh: unknown tool $w (one of: ${all[*]})" >&2; exit 2 ;; esac
done
n=0
wanted() { # key: is it asked for? counts it
	case " ${want[*]} " in *" $1 "*) n=$((n + 1)); return 0 ;; esac
	return 1
}

build() { # name version module-dir package [build tags]
	local name=$1 version=$2 mod=$3 pkg=$4 tags=${5:-} out="$dir/$1-$2"
	if [ -x "$out" ]; then
		return 0
	fi
	echo "building $name $version ($n of ${#want[@]}) into $out (first time only; a few minutes)..." >&2
	local start=$SECONDS
	(cd "$mod" && go build -trimpath ${tags:+-tags "$tags"} -o "$out.tmp" "$pkg")
	mv "$out.tmp" "$out"
	echo "built $name $version in $((SECONDS - start))s" >&2
}

# Nomad with its web UI: the module ships the built UI as generated Go
# (command/agent/bindata_assetfs.go) behind the "ui" build tag; without it
# every /ui/ page is "Nomad UI is not available in this binary". No npm:
# the tag costs one more compile of the agent package (131 s here, warm Go
# cache, load 6-13) and 1.7 MB. "+ui" in the key keeps it apart from an
# older cache's UI-less binary (devagents.NomadVersion).
wanted nomad && build nomad v1.11.3+ui nomad github.com/hashicorp/nomad ui
wanted consul && build consul v1.22.0 consul github.com/hashicorp/consul
wanted versitygw && build versitygw v1.8.0 versitygw github.com/versity/versitygw/cmd/versitygw
# etcdctl of the embedded etcd version (tools/etcd/go.mod), for the README's
# session against the demo cluster and the tests that run it.
wanted etcdctl && build etcdctl v3.6.16 etcd go.etcd.io/etcd/etcdctl/v3
# Plain etcd servers (etcd's own main, from its server module) for the
# migrate-in tests: an existing cluster outside etcd-nomad that its members
# join, of a 3.5 release (3.6 joins from 3.5.26 on) and of the embedded version.
wanted etcd35 && build etcd v3.5.35 etcdserver35 .
wanted etcd && build etcd v3.6.16 etcd ./etcdserver
# Prometheus's promtool (Prometheus 3.16: module v0.316.0), which checks and
# unit-tests the alerting rules in monitoring/ (`make alerts`). Built without
# the service discovery plugins (Prometheus's remove_all_sd tag; file and
# http stay): rules need none. Measured nice'd on 2 loaded cores (load 10-13):
# with every plugin the build ran 18 minutes and was stopped unfinished;
# without, 11.5 minutes from a cold Go cache (5.6 min of CPU; promtool itself
# still imports Kubernetes' client), 55 s from a warm one.
wanted promtool && build promtool v0.316.0 promtool github.com/prometheus/prometheus/cmd/promtool remove_all_sd
# Debian's docker.io where dockerd, containerd, runc or the docker CLI is
# missing. Installing it never starts an engine the tests use: they start
# their own (own socket, data and exec roots, no iptables, no bridge). On a
# host with systemd the package enables and starts the system's docker
# service, whose iptables rules (FORWARD policy DROP) stop the multi-host
# testbed's bridge from forwarding: that is said below.
install_docker() {
	local missing=() p
	for p in dockerd containerd runc docker; do
		command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		echo "docker: ${missing[*]} not installed, and apt-get is not usable here (needs root on Debian or Ubuntu): the Docker tests will skip; install Docker (docker.io: dockerd, containerd, runc, the CLI) to run them" >&2
		return 0
	fi
	echo "docker: ${missing[*]} missing: installing Debian's docker.io with apt-get (first time only; the tests start an engine of their own)..." >&2
	local start=$SECONDS
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >&2; then
		DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >&2
	fi
	echo "docker: installed $(/usr/sbin/dockerd --version 2>/dev/null || dockerd --version) in $((SECONDS - start))s" >&2
	if [ -S /var/run/docker.sock ] || [ -S /run/docker.sock ]; then
		echo "docker: note: the package started the system's Docker service; its iptables rules (FORWARD policy DROP) stop the multi-host testbed (e2e/hosts, chaos-hosts) from forwarding; 'systemctl disable --now docker.service docker.socket' if you do not use it" >&2
	fi
}
wanted docker && install_docker
echo "$dir"
