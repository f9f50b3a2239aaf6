# firstword's container image: a static binary on an empty base, run as
# uid 65532 with a read-only root filesystem. Build:
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) -t firstword .
# The builder stage is deploy/docker/build-stage.sh (also runnable without a
# container runtime); internal/deploytest checks this file against it.
# Mount writable volumes at /data (the SQLite store and the usage spill file)
# and /tmp, e.g. emptyDir volumes in Kubernetes (docs/operations.md).

FROM golang:1.26.8-bookworm AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG COMMIT=
RUN VERSION="$VERSION" COMMIT="$COMMIT" deploy/docker/build-stage.sh /out

FROM scratch
COPY --from=builder /out/rootfs/ /
# /data apart, so that the copy creates it as the user's.
COPY --from=builder --chown=65532:65532 /out/data/ /data/
USER 65532:65532
WORKDIR /data
EXPOSE 8080
# No HEALTHCHECK: the image has no shell or HTTP client, and the
# orchestrators firstword targets probe it themselves (GET /healthz for
# liveness, /readyz for readiness; the Helm chart's Deployment does).
ENTRYPOINT ["/usr/local/bin/firstword", "serve"]
CMD ["--config", "/etc/firstword/firstword.yaml"]
