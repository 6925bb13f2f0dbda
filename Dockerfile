# syntax=docker/dockerfile:1
# The Clearance server: a static binary on a distroless base, as a non-root user.
#
#   docker build -t clearance .
#   docker run -p 8080:8080 -v clearance-data:/data clearance
#   docker inspect --format '{{.State.Health.Status}}' CONTAINER   # healthy once /v1/health says ok
#
# Settings come from flags after the image name (docker run clearance serve --log-level debug),
# CLEARANCE_* environment variables, or a mounted config file (--config); see docs/operations.md.
# Change the port with CLEARANCE_ADDR, not --addr: the health check reads CLEARANCE_ADDR.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/clearance ./cmd/clearance \
    && install -d -m 0700 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/clearance /clearance
# The volume starts as this directory: owned by the server's user, 0700.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV CLEARANCE_ADDR=0.0.0.0:8080 \
    CLEARANCE_DATA=/data
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 CMD ["/clearance", "healthcheck"]
ENTRYPOINT ["/clearance"]
CMD ["serve"]
