#!/bin/sh
# The Dockerfile's builder stage: builds a static firstword and lays out the
# final image's files under OUT (default /out): OUT/rootfs has the binary, CA
# certificates, passwd/group naming the non-root user 65532 and /tmp;
# OUT/data is /data, the store's directory (the Dockerfile copies it apart,
# to make it the user's; mount a volume there). The Dockerfile runs this very
# script, so the image and a build without a container runtime are the same
# commands. VERSION and COMMIT stamp `firstword version`.
set -eu
out="${1:-/out}"
version="${VERSION:-devel}"
commit="${COMMIT:-}"
cli=github.com/firstword/firstword/internal/cli

root="$out/rootfs"
rm -rf "$out"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp" "$out/data"
CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X $cli.stampVersion=$version -X $cli.stampCommit=$commit" \
	-o "$root/usr/local/bin/firstword" ./cmd/firstword
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"
