// Package deploytest checks what deploy/ and the Dockerfile ship against
// the binary and its config: the image's builder stage is the script
// that builds a static binary, the Helm chart renders manifests that
// probe, drain and keep secrets out of ConfigMaps, and the systemd unit
// passes systemd's own checks. It has tests only.
package deploytest
