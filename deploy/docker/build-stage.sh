#!/bin/sh
# The Dockerfile's builder stage: builds a static firstword and lays out the
# final image's root filesystem under OUT (default /out): the binary, CA
# certificates, passwd/group naming the non-root user 65532, and /data, the
# store's directory (mount a volume there). The Dockerfile runs this very
# script, so the image and a build without a container runtime are the same
# commands. VERSION and COMMIT stamp `firstword version`.
set -eu
out="${1:-/out}"
version="${VERSION:-devel}"
commit="${COMMIT:-}"
cli=github.com/firstword/firstword/internal/cli

rm -rf "$out"
mkdir -p "$out/usr/local/bin" "$out/etc/ssl/certs" "$out/data" "$out/tmp"
CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags "-s -w -X $cli.stampVersion=$version -X $cli.stampCommit=$commit" \
	-o "$out/usr/local/bin/firstword" ./cmd/firstword
cp /etc/ssl/certs/ca-certificates.crt "$out/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' >"$out/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$out/etc/group"
chmod 1777 "$out/tmp"
