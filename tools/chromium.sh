#!/usr/bin/env bash
# Chromium for the browser tests (cmd/demo drives the Consul and Nomad web
# UIs with chromedp): `make test` runs this first, and the tests fail, not
# skip, without a browser. Does nothing when one is on PATH; otherwise
# installs Debian's chromium package with apt-get (as root, or with sudo -n).
# Prints the browser's path.
#
# Measured here (Debian 12, 2 cores): 25 s, 112 MB downloaded, 389 MB on
# disk (--no-install-recommends, 25 packages); later runs: nothing to do.
set -euo pipefail

find_browser() {
	local n
	for n in chromium chromium-browser google-chrome; do
		if command -v "$n"; then
			return 0
		fi
	done
	return 1
}

if find_browser; then
	exit 0
fi
if ! command -v apt-get >/dev/null; then
	echo "tools/chromium.sh: no Chromium on PATH (chromium, chromium-browser or google-chrome) and no apt-get to install Debian's: install Chromium" >&2
	exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
	sudo=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
# Wait for another apt-get or dpkg rather than fail on its lock.
apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 -y -q)
echo "tools/chromium.sh: installing Debian's chromium (first time only; about 110 MB to download)..." >&2
start=$SECONDS
# A fresh machine's package lists may be missing or stale: update them once
# when the install cannot find the package.
if ! "${apt[@]}" install --no-install-recommends chromium >&2; then
	"${apt[@]}" update >&2
	"${apt[@]}" install --no-install-recommends chromium >&2
fi
echo "tools/chromium.sh: installed chromium in $((SECONDS - start)) s" >&2
find_browser
