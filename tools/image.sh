#!/usr/bin/env bash
# Builds the etcd-nomad container image from a static binary, with no
# registry, no base image and no Dockerfile builder: `docker import` of a
# root file system holding only
#
#   /usr/local/bin/etcd-nomad      the binary (the image's entrypoint)
#   /etc/ssl/certs/ca-certificates.crt   this machine's CA bundle, for
#                                  HTTPS endpoints signed by public CAs
#                                  (an S3 snapshot store)
#   /etc/passwd, /etc/group        the user it runs as: nonroot, 65532
#   /tmp                           (1777) Go's temporary directory
#
# and, with SAVE, `docker save` of it: a tar that `docker load` takes on a
# client without a registry. `make image` builds the binary and calls this;
# the e2e test kit calls it against its own engine.
#
#   tools/image.sh BINARY TAG [SAVE.tar]
#
# DOCKER_HOST picks the engine (default: the docker CLI's). BINARY must be
# static (CGO_ENABLED=0): the image has no libc.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
	echo "usage: tools/image.sh BINARY TAG [SAVE.tar]" >&2
	exit 2
fi
bin=$1 tag=$2 out=${3:-}
if ! go version -m "$bin" 2>/dev/null | grep -q 'CGO_ENABLED=0'; then
	echo "tools/image.sh: $bin is not a Go binary built with CGO_ENABLED=0; the image has no libc to run anything else" >&2
	exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
chmod 0755 "$root" "$root/usr" "$root/usr/local" "$root/usr/local/bin" "$root/etc" "$root/etc/ssl" "$root/etc/ssl/certs"
chmod 1777 "$root/tmp"
cp "$bin" "$root/usr/local/bin/etcd-nomad"
chmod 0755 "$root/usr/local/bin/etcd-nomad"
ca=/etc/ssl/certs/ca-certificates.crt
if [ -r "$ca" ]; then
	install -m 0644 "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
else
	echo "tools/image.sh: no $ca on this machine: the image trusts no public CA (an S3 store over HTTPS needs snapshot { ca_file })" >&2
fi
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:etcd-nomad:/tmp:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
chmod 0644 "$root/etc/passwd" "$root/etc/group"
# Owned by root and dated 1970 whoever builds it: the same binary gives
# the same layer.
tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$root" -c . |
	docker import --change 'USER 65532:65532' --change 'ENTRYPOINT ["/usr/local/bin/etcd-nomad"]' \
		--message "etcd-nomad image (tools/image.sh)" - "$tag" >/dev/null
echo "built image $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))" >&2
if [ -n "$out" ]; then
	docker save -o "$out" "$tag"
	echo "saved $tag to $out: 'docker load -i $(basename "$out")' on a client, or push it (docs/install.md, With Docker)" >&2
fi
